#!/usr/bin/python3
"""Where a training loop's steps go, rank by rank, from a synk trace (SYNK_TRACE,
docs/trace.md): cuts the trace into steps at each start of the call NAME on rank 0, drops the
first and last --skip steps (compilation, warm-up, the end of the epoch), and prints for every
rank the median (and the 10th and 90th percentiles) per step of: each call, each collective,
the row gathers, the BLAS and generated kernels, and each kind of wait. The step time is rank 0's
distance between two starts.

    /usr/bin/python3 scripts/trace_steps.py trace.json [--call train] [--skip 20] [--csv F]
"""
import argparse
import csv
import json
import statistics
import sys


def spans(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"trace_steps: cannot read the trace '{path}': {e}")
    events = data["traceEvents"] if isinstance(data, dict) else data
    return sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])


def part_of(e):
    """The row a span adds to, or None for spans inside those rows (plans, rounds, ...)."""
    cat, name = e.get("cat"), e.get("name")
    if cat == "call":
        return f"call {name}"
    if cat == "collective" and name != "rsag round":
        return f"collective {name}"
    if cat == "gather":
        return "gathers (rows, shared values)"
    if cat in ("blas", "kernel", "dnn"):
        return f"{cat} (sum)"
    if cat == "wait":
        return f"wait: {name}"
    return None


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--call", default="train", help="the call that starts each step (rank 0)")
    ap.add_argument("--skip", type=int, default=20, help="steps dropped at each end")
    ap.add_argument("--csv", help="also write rank, part, median, p10, p90 (us) here")
    a = ap.parse_args()
    xs = spans(a.trace)
    starts = [e["ts"] for e in xs if e.get("pid") == 0 and e.get("cat") == "call" and e.get("name") == a.call]
    windows = list(zip(starts[:-1], starts[1:]))
    windows = windows[a.skip:len(windows) - a.skip] if len(windows) > 2 * a.skip else []
    if not windows:
        calls = sorted({e["name"] for e in xs if e.get("cat") == "call"})
        sys.exit(f"trace_steps: fewer than {2 * a.skip + 2} calls named '{a.call}' on rank 0 "
                 f"(calls in the trace: {', '.join(calls) or 'none'}); see --call and --skip")
    step_us = [b - s for s, b in windows]
    print(f"{a.trace}: {len(windows)} steps (from '{a.call}' to the next, {a.skip} dropped at each end); "
          f"step {statistics.median(step_us):.1f} us median, {percentile(step_us, 0.1):.1f}-"
          f"{percentile(step_us, 0.9):.1f} (p10-p90)")
    rows = []
    for rank in sorted({e["pid"] for e in xs}):
        per_step = {}
        i = 0
        mine = [e for e in xs if e["pid"] == rank]
        for k, (s, b) in enumerate(windows):
            while i < len(mine) and mine[i]["ts"] < s:
                i += 1
            j = i
            while j < len(mine) and mine[j]["ts"] < b:
                part = part_of(mine[j])
                if part:
                    per_step.setdefault(part, [0.0] * len(windows))[k] += mine[j]["dur"]
                j += 1
        print(f"rank {rank}:")
        for part, values in sorted(per_step.items()):
            med, lo, hi = statistics.median(values), percentile(values, 0.1), percentile(values, 0.9)
            print(f"  {part:<46} {med:9.1f} us  ({lo:.1f}-{hi:.1f})")
            rows.append({"rank": rank, "part": part, "median_us": round(med, 1), "p10_us": round(lo, 1),
                         "p90_us": round(hi, 1)})
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["rank", "part", "median_us", "p10_us", "p90_us"])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
