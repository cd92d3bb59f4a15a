#!/usr/bin/python3
"""Renders a synk trace (SYNK_TRACE / synk::trace_start, docs/trace.md) to a PNG timeline.

One band per rank (the file's pids), the nesting depth of the spans as lanes inside the band
(calls on top, their phases below, kernels at the bottom), coloured by category. For a picture of
one step, pick a window: --start/--end in ms from the trace's start, or --step NAME:K for the K-th
(0-based) span named NAME on rank 0 (e.g. a call of the gradient function), widened by --margin.

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
    names = {}
    spans = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.setdefault(e["pid"], []).append(
                (e["ts"] / 1000.0, (e["ts"] + e["dur"]) / 1000.0, e.get("cat", ""), e["name"]))
    return names, spans


def with_depths(spans):
    """(start, end, cat, name, depth) in time order, depth = how many spans hold it."""
    out = []
    open_ends = []
    for start, end, cat, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        out.append((start, end, cat, name, len(open_ends)))
        open_ends.append(end)
    return out


def pick_window(args, spans):
    if args.step:
        name, _, index = args.step.rpartition(":")
        matches = sorted(s for s in spans.get(0, []) if s[3] == name)
        k = int(index)
        if k >= len(matches):
            sys.exit(f"--step: rank 0 has {len(matches)} spans named '{name}'")
        start, end = matches[k][0], matches[k][1]
        pad = (end - start) * args.margin
        return start - pad, end + pad
    return args.start, args.end


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("-o", "--out", default="trace.png")
    p.add_argument("--start", type=float, default=None, help="window start, ms")
    p.add_argument("--end", type=float, default=None, help="window end, ms")
    p.add_argument("--step", help="NAME:K: the window of the K-th span named NAME on rank 0")
    p.add_argument("--margin", type=float, default=0.05, help="--step's window is widened by this fraction")
    p.add_argument("--title", default=None)
    args = p.parse_args()

    names, spans = load_spans(args.trace)
    lo, hi = pick_window(args, spans)
    ranks = sorted(spans)
    fig, ax = plt.subplots(figsize=(14, 1.6 + 1.5 * len(ranks)))
    lane = 0.16
    seen = set()
    for row, rank in enumerate(ranks):
        base = row * 1.2
        for start, end, cat, name, depth in with_depths(spans[rank]):
            if (lo is not None and end < lo) or (hi is not None and start > hi):
                continue
            seen.add(cat)
            ax.broken_barh([(start, max(end - start, 1e-4))], (base + depth * lane, lane * 0.9),
                           facecolors=COLOURS.get(cat, "#7f7f7f"), edgecolor="none")
    ax.set_yticks([row * 1.2 + 0.4 for row in range(len(ranks))])
    ax.set_yticklabels([names.get(r, f"rank {r}") for r in ranks])
    ax.invert_yaxis()
    if lo is not None or hi is not None:
        ax.set_xlim(lo, hi)
    ax.set_xlabel("time since the trace started (ms)")
    ax.set_title(args.title or args.trace)
    ax.legend(handles=[Patch(color=COLOURS.get(c, "#7f7f7f"), label=c) for c in COLOURS if c in seen],
              loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=len(seen), frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
