"""The timeline from Python (synk.trace_start / trace_stop / the synk.trace context manager,
docs/trace.md): a call and an all_reduce on 2 ranks give a Chrome trace-event file with a track per
rank holding the call, its kernels and the collective; an unwritable path is a UsageError naming it.
The file's structure is checked in depth by synk/trace_test.cpp; this checks the binding.
"""
import json

import numpy as np
import pytest

import synk

SOURCE = """
shared s: f32[3] = ones;
fn f(scatter x: f32[n, 3], bcast y: f32[3]) {
  out z: avg = mean(x @ y, axis=0);
  update s = s + mean(x, axis=0);
}
"""


def test_context_manager_traces_every_rank(group, tmp_path):
    mod = synk.compile(SOURCE)
    f = mod.function("f")
    path = tmp_path / "trace.json"
    with synk.trace(str(path)):
        assert synk.tracing()
        f(np.ones((8, 3), "float32"), np.ones(3, "float32"))
        synk.all_reduce(mod.shared("s"))
    assert not synk.tracing()
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for rank in range(group):
        mine = [e for e in spans if e["pid"] == rank]
        assert any(e["cat"] == "call" and e["name"] == "f" for e in mine), rank
        assert any(e["cat"] in ("kernel", "blas") for e in mine), rank
        assert any(e["cat"] == "collective" and e["name"] == "all_reduce" for e in mine), rank
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {0: "rank 0 (master)", 1: "rank 1"}
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]


def test_unwritable_path_is_a_usage_error(group):
    with pytest.raises(synk.UsageError, match="/nonexistent-synk-dir/t.json"):
        synk.trace_start("/nonexistent-synk-dir/t.json")
    assert not synk.tracing()
    synk.trace_stop()   # nothing runs: nothing happens


def test_trace_steps_sums_up_each_rank(group, tmp_path):
    """scripts/trace_steps.py on a loop of 30 calls and all_reduces: every rank's calls, collective
    and waits per step, the CSV, and a clear error for a call the trace does not hold."""
    import csv
    import os
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "trace_steps.py")
    mod = synk.compile(SOURCE)
    f = mod.function("f")
    path = tmp_path / "loop.json"
    with synk.trace(str(path)):
        for _ in range(30):
            f(np.ones((8, 3), "float32"), np.ones(3, "float32"))
            synk.all_reduce(mod.shared("s"))
    table = tmp_path / "parts.csv"
    done = subprocess.run([sys.executable, script, str(path), "--call", "f", "--skip", "5", "--csv", str(table)],
                          capture_output=True, text=True, check=True)
    assert "19 steps" in done.stdout, done.stdout
    rows = list(csv.DictReader(table.open()))
    for rank in range(group):
        parts = {r["part"]: float(r["median_us"]) for r in rows if int(r["rank"]) == rank}
        assert parts["call f"] > 0 and parts["collective all_reduce"] > 0, parts
        assert "kernel (sum)" in parts or "blas (sum)" in parts, parts
    bad = subprocess.run([sys.executable, script, str(path), "--call", "g"], capture_output=True, text=True)
    assert bad.returncode != 0 and "calls in the trace: f" in bad.stderr, bad.stderr
