#!/usr/bin/python3
"""How much a call from Python costs over the same call from C++ (target: at most 10 us more).

Runs the C++ half (python_call_overhead_cpp, built with the project: the same tiny calls through
the C++ API, timed one by one) and then makes the same calls from Python in this process, timed
the same way, on the same module (bench/call_overhead.synk) and the same number of ranks:

  call        tiny(x, y) on two synk.Data inputs, one output (returned as a numpy array)
  call_batch  the same with batch = 8 row indices (a numpy int64 array)
  all_reduce  synk.all_reduce(s, "avg") of a 4-float shared variable

Prints per case the C++ and Python medians, the difference (the binding's cost) and the ratio;
writes them to a CSV. Runs alternate C++ / Python `--repeats` times and keep each side's best
median, which damps the noise of a shared machine. Exit status 0 (1 if --check and a difference
exceeds 10 us; 77 without numpy, so CTest reports a skip).

Usage: python_call_overhead.py [--calls 20000] [--repeats 3] [--ranks 2] [--cpp PATH]
                               [--csv python_call_overhead.csv] [--check]
(PYTHONPATH must reach the built package: build/python.)
"""
import argparse
import csv
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("call", "call_batch", "all_reduce")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ranks", type=int, default=2)
    default_cpp = os.path.join(os.environ.get("SYNK_BUILD_DIR", os.path.join(HERE, "..", "build")),
                               "bench", "python_call_overhead_cpp")
    p.add_argument("--cpp", default=default_cpp, help="the C++ half (default: %(default)s)")
    p.add_argument("--csv", default="python_call_overhead.csv")
    p.add_argument("--check", action="store_true", help="exit 1 if a difference exceeds 10 us")
    a = p.parse_args()
    if a.calls < 1 or a.repeats < 1 or a.ranks < 1:
        p.error("--calls, --repeats and --ranks must be >= 1")
    if not os.access(a.cpp, os.X_OK):
        p.error(f"--cpp {a.cpp}: no such program (build the target python_call_overhead_cpp)")
    return a


def run_cpp(args):
    out = subprocess.run([args.cpp, "--calls", str(args.calls), "--ranks", str(args.ranks)],
                         check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(out.splitlines()))
    return {r["case"]: float(r["median_us"]) for r in rows}


def time_calls(calls, call):
    for _ in range(max(100, calls // 10)):   # warm up, as the C++ half does
        call()
    clock = time.perf_counter_ns
    us = [0.0] * calls
    for i in range(calls):
        t = clock()
        call()
        us[i] = (clock() - t) / 1000.0
    us.sort()
    return us[len(us) // 2]


def run_python(args, synk, np):
    mod = synk.load(os.path.join(HERE, "call_overhead.synk"))
    tiny = mod.function("tiny")
    s = mod.shared("s")
    synk.fork(args.ranks)
    try:
        x = synk.data(np.full((8, 4), 0.5, dtype=np.float32), name="x")
        y = synk.data(np.full(4, 2.0, dtype=np.float32), name="y")
        rows = np.array([7, 1, 3, 5, 0, 2, 6, 4], dtype=np.int64)
        return {
            "call": time_calls(args.calls, lambda: tiny(x, y)),
            "call_batch": time_calls(args.calls, lambda: tiny(x, y, batch=rows)),
            "all_reduce": time_calls(args.calls, lambda: synk.all_reduce(s, "avg")),
        }
    finally:
        synk.close()


def main():
    args = parse_args()
    try:
        import numpy as np
        import synk
    except ImportError as e:
        print(f"SKIPPED: {e} (this benchmark needs numpy and the built package on PYTHONPATH)")
        return 77
    best_cpp = {c: float("inf") for c in CASES}
    best_py = dict(best_cpp)
    for _ in range(args.repeats):
        for c, v in run_cpp(args).items():
            best_cpp[c] = min(best_cpp[c], v)
        for c, v in run_python(args, synk, np).items():
            best_py[c] = min(best_py[c], v)
    print(f"synk call overhead, Python vs C++: {args.ranks} ranks, {args.calls} calls per run, best median of "
          f"{args.repeats} runs, {os.cpu_count()} CPUs")
    print(f"{'case':<12} {'C++ us':>9} {'Python us':>10} {'diff us':>8} {'ratio':>6}")
    failed = False
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "ranks", "calls", "cpp_median_us", "python_median_us", "diff_us", "ratio"])
        for c in CASES:
            diff, ratio = best_py[c] - best_cpp[c], best_py[c] / best_cpp[c]
            failed |= diff > 10.0
            print(f"{c:<12} {best_cpp[c]:9.2f} {best_py[c]:10.2f} {diff:8.2f} {ratio:6.2f}")
            w.writerow([c, args.ranks, args.calls, f"{best_cpp[c]:.3f}", f"{best_py[c]:.3f}", f"{diff:.3f}",
                        f"{ratio:.3f}"])
    print(f"target: diff <= 10 us: {'not met' if failed else 'met'}; CSV: {args.csv}")
    return 1 if (failed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
