#!/usr/bin/python3
"""Renders a synk trace (SYNK_TRACE / synk::trace_start, docs/trace.md) to a PNG timeline.

One band per rank (the file's pids), and one more under it for each helper track of the rank (a
training step's gradient all-reduce with overlap: the file's tids), the nesting depth of the spans as lanes inside the band
(calls on top, their phases below, kernels at the bottom), coloured by category. For a picture of
one step, pick a window: --start/--end in ms from the trace's start, or --step NAME:K for the
period from the K-th (0-based) span named NAME on rank 0 to the next one (e.g. NAME = the step's
gradient function: one whole training step), widened by --margin.

  /usr/bin/python3 scripts/trace_timeline.py trace.json -o trace.png --step grad:5

Needs matplotlib (Debian: python3-matplotlib, hence /usr/bin/python3).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "call": "#4c72b0",
    "plan": "#8c8c8c",
    "gather": "#c49c94",
    "run": "#aec7e8",
    "kernel": "#2ca02c",
    "blas": "#ff7f0e",
    "dnn": "#9467bd",
    "slice": "#17becf",
    "reduce": "#bcbd22",
    "update": "#8c564b",
    "collective": "#d62728",
    "wait": "#f7b6d2",
}


def load_spans(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {}    # per (pid, tid): the track's name
    spans = {}    # per (pid, tid)
    for e in events:
        track = (e.get("pid"), e.get("tid", 0))
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[(e["pid"], 0)] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name" and track[1] != 0:
            names[track] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.setdefault(track, []).append(
                (e["ts"] / 1000.0, (e["ts"] + e["dur"]) / 1000.0, e.get("cat", ""), e["name"]))
    return names, spans


def with_depths(spans):
    """(start, end, cat, name, depth) in time order, depth = how many spans hold it."""
    out = []
    open_ends = []
    for start, end, cat, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        # 10 ns of slack: ts and dur are printed in whole ns, but their float sum may pass the
        # next span's ts by a rounding error.
        while open_ends and open_ends[-1] <= start + 1e-5:
            open_ends.pop()
        out.append((start, end, cat, name, len(open_ends)))
        open_ends.append(end)
    return out


def pick_window(args, spans):
    if args.step:
        name, _, index = args.step.rpartition(":")
        matches = sorted(s for s in spans.get((0, 0), []) if s[3] == name)
        k = int(index)
        if k >= len(matches):
            sys.exit(f"--step: rank 0 has {len(matches)} spans named '{name}'")
        # One period: from this span's start to the next one's (a whole training step when NAME
        # is the step's first call), or to its end when it is the last.
        start = matches[k][0]
        end = matches[k + 1][0] if k + 1 < len(matches) else matches[k][1]
        pad = (end - start) * args.margin
        return start - pad, end + pad
    return args.start, args.end


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("-o", "--out", default="trace.png")
    p.add_argument("--start", type=float, default=None, help="window start, ms")
    p.add_argument("--end", type=float, default=None, help="window end, ms")
    p.add_argument("--step", help="NAME:K: from the K-th span named NAME on rank 0 to the next one")
    p.add_argument("--margin", type=float, default=0.05, help="--step's window is widened by this fraction")
    p.add_argument("--title", default=None)
    args = p.parse_args()

    names, spans = load_spans(args.trace)
    lo, hi = pick_window(args, spans)
    ranks = sorted(spans)
    fig, ax = plt.subplots(figsize=(14, 1.6 + 1.5 * len(ranks)))
    lane = 0.16
    seen = set()
    every = [s for rank in ranks for s in spans[rank]]
    span_lo = lo if lo is not None else min(s[0] for s in every)
    span_hi = hi if hi is not None else max(s[1] for s in every)
    label_width = (span_hi - span_lo) * 0.12
    for row, rank in enumerate(ranks):
        base = row * 1.2
        for start, end, cat, name, depth in with_depths(spans[rank]):
            if (lo is not None and end < lo) or (hi is not None and start > hi):
                continue
            seen.add(cat)
            ax.broken_barh([(start, max(end - start, 1e-4))], (base + depth * lane, lane * 0.9),
                           facecolors=COLOURS.get(cat, "#7f7f7f"), edgecolor="none")
            shown_lo = max(start, lo) if lo is not None else start
            shown_hi = min(end, hi) if hi is not None else end
            if shown_hi - shown_lo > label_width:   # room for its name
                ax.text(shown_lo + label_width * 0.05, base + (depth + 0.45) * lane, name[:40], fontsize=6.5,
                        va="center", ha="left", clip_on=True)
    ax.set_yticks([row * 1.2 + 0.4 for row in range(len(ranks))])
    ax.set_yticklabels([names.get(r, f"rank {r[0]}" + (f" track {r[1]}" if r[1] else "")) for r in ranks])
    ax.invert_yaxis()
    if lo is not None or hi is not None:
        ax.set_xlim(lo, hi)
    ax.set_xlabel("time since the trace started (ms)")
    ax.set_title(args.title or args.trace)
    ax.legend(handles=[Patch(color=COLOURS.get(c, "#7f7f7f"), label=c) for c in COLOURS if c in seen],
              loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=len(seen), frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=110)
    except OSError as e:
        sys.exit(f"trace_timeline.py: cannot write {args.out}: {e.strerror or e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
