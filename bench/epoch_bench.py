"""What the epoch-time benchmarks (train_bench.py for the MLP, cnn_bench.py for the CNN) share:
running a synk example or a PyTorch baseline and reading its epoch times, choosing the variants,
the rounds loop that runs every variant once per round with the load average around it (so a
noisy run shows in the CSV), and a variant's summary over its rounds."""
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH_LINE = re.compile(r"^epoch\s+(\d+)\s+train\s+([0-9.]+) s")
ACCURACY_LINE = re.compile(r"test accuracy ([0-9.]+)%")


def run_checked(cmd, env, timeout):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def run_synk(binary, ranks, epochs, env, extra_args=(), extra_env=None, timeout=7200):
    """A synk example's epoch times and its final test accuracy (nan when it prints none)."""
    cmd = [binary, "--ranks", str(ranks), "--epochs", str(epochs), "--out", ""] + list(extra_args)
    out = run_checked(cmd, dict(env, **(extra_env or {})), timeout)
    times = [float(m.group(2)) for m in map(EPOCH_LINE.match, out.splitlines()) if m]
    if len(times) != epochs:
        raise RuntimeError(f"{' '.join(cmd)}: expected {epochs} epoch lines, found {len(times)}")
    accuracy = ACCURACY_LINE.search(out)
    return times, float(accuracy.group(1)) / 100 if accuracy else float("nan")


def run_torch(script, args_list, epochs, env, timeout=7200):
    """A PyTorch baseline's (train_torch.py, cnn_torch.py) epoch times and test accuracy."""
    cmd = [sys.executable, os.path.join(HERE, script), "--epochs", str(epochs)] + list(args_list)
    out = run_checked(cmd, env, timeout)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    times = [r["seconds"] for r in records if "epoch" in r]
    if len(times) != epochs:
        raise RuntimeError(f"{' '.join(cmd)}: expected {epochs} epochs, found {len(times)}")
    summary = [r for r in records if r.get("summary")]
    return times, summary[0]["test_accuracy"] if summary else float("nan")


def chosen_variants(parser, text, table):
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in table]
    if unknown:
        parser.error(f"unknown variants {unknown} (known: {', '.join(table)})")
    return chosen


def bench_env():
    """The environment of every run: the caller's, without SYNK_PROFILE (it slows synk down)."""
    env = dict(os.environ)
    env.pop("SYNK_PROFILE", None)
    return env


def run_rounds(rounds, chosen, run_variant, with_accuracy):
    """Rows (round, variant, epoch times, median[, accuracy], load before, load after): every variant
    once per round, in order. run_variant(name) returns (epoch times, test accuracy)."""
    rows = []
    for rnd in range(1, rounds + 1):
        for name in chosen:
            load_before = os.getloadavg()[0]
            start = time.time()
            times, accuracy = run_variant(name)
            load_after = os.getloadavg()[0]
            median = statistics.median(times)
            rows.append((rnd, name, times, median) + ((accuracy,) if with_accuracy else ()) + (load_before, load_after))
            acc = f"test acc {100 * accuracy:.2f}%; " if with_accuracy else ""
            print(f"round {rnd}  {name:<12} {median:7.3f} s/epoch  (epochs {', '.join(f'{t:.3f}' for t in times)}; "
                  f"{acc}load {load_before:.2f} -> {load_after:.2f}; {time.time() - start:.0f} s)", flush=True)
    return rows


def variant_summary(rows, name):
    """A variant's rows of run_rounds, the median and the best of their per-round medians, and the
    load averages seen around its rounds (the last two columns)."""
    mine = [r for r in rows if r[1] == name]
    meds = [r[3] for r in mine]
    loads = [x for r in mine for x in r[-2:]]
    return mine, statistics.median(meds), min(meds), loads
