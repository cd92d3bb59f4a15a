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


PROBE_SLOW_NS = 250   # the bare cache-line round trip: ~75-140 ns in the host's fast state, ~355-410 ns in its slow one


def probe_ns(build_dir):
    """The machine's state just now: bench/cpu_probe's cache-line round trip between CPU 0 and 1
    in ns (docs/performance/collectives.md, "Fresh groups"); nan where the probe is not built or cannot pin."""
    binary = os.path.join(build_dir, "bench", "cpu_probe")
    if not os.access(binary, os.X_OK):
        return float("nan")
    out = subprocess.run([binary], capture_output=True, text=True, timeout=60).stdout.split()
    value = float(out[1]) if len(out) == 2 and out[0] == "probe_ns" else 0.0
    return value if value > 0 else float("nan")


def probe_state(ns):
    return "?" if ns != ns else ("slow" if ns > PROBE_SLOW_NS else "fast")


def run_rounds(rounds, chosen, run_variant, build_dir):
    """Rows, one per run (a dict: round, variant, times, median, accuracy, probe_ns, load_before,
    load_after): every variant once per round, in order, each in fresh processes with the probe
    taken just before it. run_variant(name) returns (epoch times, test accuracy or nan)."""
    rows = []
    for rnd in range(1, rounds + 1):
        for name in chosen:
            probe = probe_ns(build_dir)
            load_before = os.getloadavg()[0]
            start = time.time()
            times, accuracy = run_variant(name)
            row = dict(round=rnd, variant=name, times=times, median=statistics.median(times), accuracy=accuracy,
                       probe_ns=probe, load_before=load_before, load_after=os.getloadavg()[0])
            rows.append(row)
            acc = f"test acc {100 * accuracy:.2f}%; " if accuracy == accuracy else ""
            print(f"round {rnd}  {name:<12} {row['median']:7.3f} s/epoch  (epochs {', '.join(f'{t:.3f}' for t in times)}; "
                  f"{acc}probe {probe:.0f} ns {probe_state(probe)}; load {load_before:.2f} -> {row['load_after']:.2f}; "
                  f"{time.time() - start:.0f} s)", flush=True)
    return rows


def variant_summary(rows, name):
    """A variant's rows of run_rounds, the median and the best of their per-round medians, the load
    averages seen around its runs, and the probe's range over them ("fast 84-131 ns" / "2 of 6 slow")."""
    mine = [r for r in rows if r["variant"] == name]
    meds = [r["median"] for r in mine]
    loads = [x for r in mine for x in (r["load_before"], r["load_after"])]
    probes = [r["probe_ns"] for r in mine if r["probe_ns"] == r["probe_ns"]]
    slow = sum(probe_state(p) == "slow" for p in probes)
    probe_text = (f"{min(probes):.0f}-{max(probes):.0f} ns, {slow} of {len(probes)} slow" if probes else "no probe")
    return mine, statistics.median(meds), min(meds), loads, probe_text


CSV_FIELDS = ["round", "variant", "median_epoch_s", "epoch_times_s", "test_accuracy", "probe_ns", "load1_before",
              "load1_after"]


def csv_row(r):
    return [r["round"], r["variant"], f"{r['median']:.4f}", " ".join(f"{t:.4f}" for t in r["times"]),
            f"{r['accuracy']:.4f}", f"{r['probe_ns']:.0f}", f"{r['load_before']:.2f}", f"{r['load_after']:.2f}"]


def row_from_csv(r):
    """A row written by csv_row (older CSVs have no test_accuracy or probe_ns column)."""
    return dict(round=int(r["round"]), variant=r["variant"], times=[float(t) for t in r["epoch_times_s"].split()],
                median=float(r["median_epoch_s"]), accuracy=float(r.get("test_accuracy") or "nan"),
                probe_ns=float(r.get("probe_ns") or "nan"), load_before=float(r["load1_before"]),
                load_after=float(r["load1_after"]))
