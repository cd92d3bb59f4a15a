"""synk from Python under mpirun (docs/multinode.md): the same script on 2 "nodes" of 2 ranks
(OpenMPI's TCP transport over lo between them) and on one node of 4 ranks gives the same
results, bit for bit: calls with index batches and slices, collectives by global rank (a 24 KB
all_reduce goes through the leaders' direct exchange), and deterministic training steps. And an
uncaught Python exception on one node ends the whole job naming that node, leaving nothing in
/dev/shm. Skipped, with the reason, without mpirun or the MPI plugin.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

MPIRUN = shutil.which("mpirun")
PLUGIN = os.path.join(os.environ.get("SYNK_BUILD_DIR", "build"), "lib", "libsynk_mpi.so")
LAUNCH = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
          "--mca", "oob_tcp_if_include", "lo"]

pytestmark = pytest.mark.skipif(not MPIRUN or not os.path.exists(PLUGIN),
                                reason=f"needs mpirun and the MPI plugin ({PLUGIN})")

SCRIPT = r'''
import sys
import numpy as np
import synk

ranks, out, fail_node = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
m = synk.compile("""
shared w: f32[6, 3] = normal(seed=3, mean=0, std=0.5);
shared acc: f64[k];
optimizer opt = momentum(lr=0.1, momentum=0.9);
fn train(scatter x: f32[n, 6], scatter y: i64[n]) {
  let losses = cross_entropy(x @ w, y);
  out loss: sum = sum(losses);
  minimize mean(losses) over w using opt;
}
fn stats(scatter x: f32[n, 6]) {
  out total: sum = sum(x, axis=0);
  out biggest: max = max(x);
  out centre: avg = mean(x, axis=0);
  out rows: sum = n;
}
shared data: f32[m, 6] sliceable;
fn local_stats() {
  out picked: gather = data;
  out count: sum = m;
}
""")
step = m.train_step("train")
step.deterministic = 4
synk.fork(ranks)
with open(out + ".pid" + str(synk.node()), "w") as f:
    f.write(str(__import__("os").getpid()))
res = {"size": np.array(synk.size())}
rng = np.random.default_rng(5)
x = (rng.integers(-8, 9, size=(37, 6)) / 4).astype("float32")    # quarters: every sum is exact
y = rng.integers(0, 3, size=37)
stats = m.function("stats")
for name, kwargs in [("all", {}), ("range", {"batch": range(3, 30), "num_slices": 3}),
                     ("list", {"batch": [5, 1, 33, 8, 8, 20, 0, 36] if synk.node() == 0 else [0] * 8})]:
    for k, v in enumerate(stats(x, **kwargs)):
        res[f"{name}{k}"] = v
# batch_s with one selection per global rank (every rank holds 9 or 10 rows of data).
synk.scatter(m.shared("data"), x)
per_rank = [range(0, 2), [1, 0, 1], range(1, 4), [0], range(2, 3), [8, 0]][:synk.size()]
for k, v in enumerate(m.function("local_stats")(batch_s=per_rank)):
    res[f"batch_s{k}"] = v
acc = m.shared("acc")
for r in range(synk.size()):
    synk.set_value(r, acc, np.arange(3000) * 0.5 + r)                 # 24 KB
synk.all_reduce(acc, op="sum")
res["summed"] = synk.get_value(synk.size() - 1, acc)
for r in range(synk.size()):
    synk.set_value(r, acc, np.arange(3000) * 0.5 + (r * 5) % synk.size())
synk.all_reduce(acc, op="max")
for r in range(synk.size()):
    res[f"get{r}"] = synk.get_value(r, acc)
if synk.node() == fail_node:
    raise RuntimeError("a mistake only node %d makes" % fail_node)
for i in range(5):
    idx = rng.permutation(37)[:16]
    res[f"loss{i}"] = step(x, y, batch=idx)
res["w"] = m.shared("w").get_value()
np.savez(out + ".node" + str(synk.node()) + ".npz", **res)
synk.close()
'''


def run_script(tmp_path, nodes, ranks, fail_node=-1):
    script = tmp_path / "multi.py"
    script.write_text(SCRIPT)
    out = str(tmp_path / ("one" if nodes == 1 else "multi"))
    env = dict(os.environ)
    args = [sys.executable, str(script), str(ranks), out, str(fail_node)]
    if nodes == 1:
        env["SYNK_MPI"] = "0"
    else:
        args = [MPIRUN, *LAUNCH, "-np", str(nodes), *args]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
    return proc, out


def two_leaders(tmp_path, name, text, *args, env=None):
    """Runs `text` as a script on 2 leaders (2 ranks each where it forks 2), with a short node
    timeout and `env` added to the environment, and checks that the job succeeded."""
    script = tmp_path / (name + ".py")
    script.write_text(text)
    env = dict(os.environ, SYNK_NODE_TIMEOUT_S="60", **(env or {}))
    proc = subprocess.run([MPIRUN, *LAUNCH, "-np", "2", sys.executable, str(script), *args], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_two_nodes_give_the_bits_of_one(tmp_path):
    one, one_out = run_script(tmp_path, 1, 4)
    assert one.returncode == 0, one.stderr
    multi, multi_out = run_script(tmp_path, 2, 2)
    assert multi.returncode == 0, multi.stdout + multi.stderr
    ref = np.load(one_out + ".node0.npz")
    assert int(ref["size"]) == 4
    for node in range(2):
        got = np.load(f"{multi_out}.node{node}.npz")
        assert sorted(got.files) == sorted(ref.files)
        for key in ref.files:
            if key.startswith("loss"):   # the loss output's sum meets the ranks in another grouping
                np.testing.assert_allclose(got[key], ref[key], rtol=1e-6, err_msg=key)
                continue
            assert got[key].dtype == ref[key].dtype, key
            assert np.array_equal(got[key], ref[key]), f"node {node}: {key} differs"
    assert np.array_equal(ref["summed"], np.arange(3000) * 2.0 + 6)   # 4 ranks: 4 * i/2 + (0+1+2+3)
    assert np.array_equal(ref["get0"], np.arange(3000) * 0.5 + 3)
    assert int(ref["batch_s1"]) == 2 + 3 + 3 + 1 and ref["batch_s0"].shape == (9, 6)   # one selection per global rank


def test_an_uncaught_exception_on_one_node_ends_the_job(tmp_path):
    proc, out = run_script(tmp_path, 2, 2, fail_node=1)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "a mistake only node 1 makes" in text
    assert "synk: node 1 of 2" in text, text
    pids = [open(f"{out}.pid{n}").read() for n in range(2)]
    left = [e for e in os.listdir("/dev/shm") if any(e.startswith(f"synk-{p}-") for p in pids)]
    assert not left, left


REFUSED = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("""
shared w: f32[6, 3] = normal(seed=3, mean=0, std=0.5);
optimizer opt = momentum(lr=0.1, momentum=0.9);
fn train(scatter x: f32[n, 6], scatter y: i64[n]) {
  let losses = cross_entropy(x @ w, y);
  out loss: avg = mean(losses);
  minimize mean(losses) over w using opt;
}
fn stats(scatter x: f32[n, 6]) { out total: sum = sum(x, axis=0); }
""")
stats = m.function("stats")
step = m.train_step("train")
step.overlap = True                                         # the gradient is reduced while the call runs
step.set_schedule(synk.Schedule.cosine(0.1, 8))           # the lr is broadcast before each step's call
synk.fork(1)
rng = np.random.default_rng(5)
x = (rng.integers(-8, 9, size=(40, 6)) / 4).astype("float32")
y = rng.integers(0, 3, size=40)
lines = []
mine = synk.node() == 1
for what, call in [("stats", lambda bad: stats("oops" if bad else x)),
                   ("keyword", lambda bad: stats(x, batchh=3) if bad else stats(x)),
                   ("step", lambda bad: step(x, "oops" if bad else y, batch=range(16)))]:
    try:
        call(mine)
        lines.append(f"{what}: not refused")
    except synk.UsageError as e:
        lines.append(f"{what}: usage error: {e}")
    except synk.RankError as e:
        lines.append(f"{what}: rank error {e.ranks}: {e}")
    lines.append(f"{what} after: {stats(x).tolist()} {step(x, y, batch=range(16, 32)).tolist()}")
lines.append(f"w: {m.shared('w').get_value().tolist()} lr: {step.hyper('lr')} index: {step.step_index}")
open(out + ".node" + str(synk.node()), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_a_call_one_leader_refuses_before_it_starts_fails_on_every_node(tmp_path):
    """A value only node 1 cannot convert (or a keyword only it misspells) is refused before the
    call reaches the engine; node 0 is already in the call's exchange. Every leader must fail that
    call at once (node 0 with a RankError naming node 1's reason), and the next calls must pair
    with the same calls on the other node: both nodes write the same values after each mistake.
    Before, node 1's next call paired with node 0's refused one, or the job waited for the
    timeout. The training step overlaps its gradient reduction and follows a schedule, which move
    data across nodes before the outcome is exchanged."""
    out = str(tmp_path / "refused")
    two_leaders(tmp_path, "refused", REFUSED, out)
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    for what in ["stats", "keyword", "step"]:
        line0 = next(l for l in node0 if l.startswith(what + ":"))
        line1 = next(l for l in node1 if l.startswith(what + ":"))
        assert line1.startswith(f"{what}: usage error"), line1
        assert line0.startswith(f"{what}: rank error [1]"), line0
        assert "node 1's leader refused this call before it ran" in line0, line0
        assert line1.split("usage error: ")[1] in line0, (line0, line1)
    after0 = [l for l in node0 if " after:" in l or l.startswith("w:")]
    after1 = [l for l in node1 if " after:" in l or l.startswith("w:")]
    assert after0 == after1
    assert node0[-1].endswith("index: 3"), node0[-1]   # the refused step did not count


CHECKPOINTED = r'''
import os
import sys
import numpy as np
import synk

base = sys.argv[1]
m = synk.compile("""
shared w: f32[6, 3] = normal(seed=3, mean=0, std=0.5);
optimizer opt = adam(lr=0.05);
fn train(scatter x: f32[n, 6], scatter y: i64[n]) {
  out loss: avg = mean(cross_entropy(x @ w, y));
  minimize mean(cross_entropy(x @ w, y)) over w using opt;
}
""")
step = m.train_step("train")
synk.fork(2)
here = os.path.join(base, f"node{synk.node()}")      # each leader's own disk
os.makedirs(here)
os.chdir(here)
rng = np.random.default_rng(5)
x = rng.standard_normal((40, 6)).astype("float32")
y = rng.integers(0, 3, size=40)
lines = []
for _ in range(3):
    step(x, y)
m.save_checkpoint("ckpt", {"epoch": 3})
saved = [synk.get_value(r, m.shared("w")).tobytes().hex() for r in range(synk.size())]
for _ in range(2):
    step(x, y)
lines.append(f"trained on: {synk.get_value(0, m.shared('w')).tobytes().hex() != saved[0]}")
lines.append(f"metadata: {m.load_checkpoint('ckpt')}")
lines.append(f"restored: {[synk.get_value(r, m.shared('w')).tobytes().hex() for r in range(synk.size())] == saved}")
lines.append(f"step index: {step.step_index}")
try:
    m.load_checkpoint("missing")
    lines.append("missing: loaded")
except synk.UsageError as e:
    lines.append(f"missing: {e}")
lines.append(f"after: {step(x, y).tolist()}")
lines.append(f"files: {sorted(os.listdir(here))}")
open(os.path.join(base, f"out.node{synk.node()}"), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_node_zero_alone_writes_and_reads_a_checkpoint(tmp_path):
    """Each leader works in a directory of its own (its node's disk). save_checkpoint writes on
    node 0 only (the others' disks may be the same shared filesystem, where two writers race);
    load_checkpoint reads node 0's files and restores every rank of every node, though node 1's
    disk has none; a missing checkpoint is the same UsageError on every leader, and the job goes
    on in step."""
    two_leaders(tmp_path, "ckpt", CHECKPOINTED, str(tmp_path))
    node0 = (tmp_path / "out.node0").read_text().splitlines()
    node1 = (tmp_path / "out.node1").read_text().splitlines()
    for lines in (node0, node1):
        assert "trained on: True" in lines
        assert "metadata: {'epoch': '3'}" in lines
        assert "restored: True" in lines
        assert "step index: 3" in lines
        missing = next(l for l in lines if l.startswith("missing:"))
        assert "load_checkpoint('missing'): no such directory" in missing, missing
    assert next(l for l in node0 if l.startswith("after:")) == next(l for l in node1 if l.startswith("after:"))
    assert "files: ['ckpt']" in node0
    assert "files: []" in node1
    held = os.listdir(tmp_path / "node0" / "ckpt")
    assert "manifest.json" in held and "w.npy" in held, held


BROADCAST_VALUES = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("shared w: f32[2, 3] = zeros;")
synk.fork(2)
w = m.shared("w")
lines = []
good = np.arange(6, dtype="float32").reshape(2, 3) + 10 * synk.node()
bad = np.zeros((4, 3), dtype="float32")
# Node 1's value is ignored (node 0's goes to every rank), so its wrong shape cannot stop node 0.
synk.broadcast(w, values=good if synk.node() == 0 else bad)
lines.append(f"node 1 bad: {[synk.get_value(r, w).tolist() for r in range(synk.size())]}")
# Node 0's wrong shape is the same error on every leader, and the job goes on.
try:
    synk.broadcast(w, values=bad if synk.node() == 0 else good)
    lines.append("node 0 bad: broadcast")
except synk.UsageError as e:
    lines.append(f"node 0 bad: {e}")
# A value Python cannot convert (f64 for f32) is read on node 0 only, and its error reaches node 1.
synk.broadcast(w, values=good if synk.node() == 0 else good.astype("float64"))
try:
    synk.broadcast(w, values=good.astype("float64") if synk.node() == 0 else good)
    lines.append("node 0 f64: broadcast")
except synk.UsageError as e:
    lines.append(f"node 0 f64: {e}")
synk.broadcast(w, values=good + 1)
lines.append(f"after: {[synk.get_value(r, w).tolist() for r in range(synk.size())]}")
# A shared variable's own get_value/set_value(rank) take global ranks too (rank 0 is node 0's master).
w.set_value(np.full((2, 3), 7, dtype="float32"), rank=3)
lines.append(f"shared: {w.get_value(rank=0).tolist()} {w.get_value(rank=3).tolist()} {synk.get_value(3, w).tolist()}")
open(out + ".node" + str(synk.node()), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_broadcast_takes_node_zeros_values_and_its_error_reaches_every_leader(tmp_path):
    """broadcast(vars, values) across nodes: node 0 checks its values and sends them (or its
    error) to every leader; the other leaders' values are ignored. Before, a value only node 1
    refused left node 0 waiting in the broadcast until SYNK_NODE_TIMEOUT_S ended the job."""
    out = str(tmp_path / "bcast")
    two_leaders(tmp_path, "bcast", BROADCAST_VALUES, out)
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    assert node0 == node1, (node0, node1)
    node0_value = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert node0[0] == f"node 1 bad: {[node0_value] * 4}", node0[0]
    assert node0[1].startswith("node 0 bad: broadcast") and "[4, 3]" in node0[1], node0[1]
    assert node0[2].startswith("node 0 f64: broadcast: value for 'w'") and "float64" in node0[2], node0[2]
    node0.pop(2)
    assert node0[2] == f"after: {[[[v + 1 for v in row] for row in node0_value]] * 4}", node0[2]
    assert node0[3] == f"shared: {[[v + 1 for v in row] for row in node0_value]} {[[7.0] * 3] * 2} {[[7.0] * 3] * 2}", \
        node0[3]


CHECKED = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("""
shared w: f32[2, 3] = zeros;
fn f(scatter x: f32[n, 3]) { out s: sum = sum(x); }
""")
synk.fork(2)
w = m.shared("w")
f = m.function("f")
node = synk.node()
lines = []

def attempt(what, action):
    try:
        action()
        lines.append(f"{what}: ran")
    except synk.UsageError as e:
        lines.append(f"{what}: {e}")

synk.broadcast(w, values=np.ones((2, 3), dtype="float32"))
attempt("refused", lambda: synk.all_reduce(w, op="sum" if node == 0 else "bogus"))
attempt("different", lambda: synk.all_reduce(w) if node == 0 else synk.broadcast(w))
attempt("rank", lambda: synk.get_value(3 if node == 0 else 2, w))
attempt("call", lambda: f(np.ones((4, 3), dtype="float32")) if node == 0 else synk.gather(w))
synk.all_reduce(w, op="sum")
lines.append(f"after: {synk.get_value(3, w).tolist()}")
open(out + ".node" + str(node), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_check_nodes_compares_collectives_across_leaders(tmp_path):
    """SYNK_CHECK_NODES=1: the leaders compare each collective before moving data. One leader's
    refusal (a bad op on node 1) is an error on every leader at once, different collectives (or a
    call on one node and a collective on the other) are a UsageError on every leader naming what
    each node made, and the leaders stay in step: the last all_reduce sums 4 ranks' ones. Without
    the check each of these waits until SYNK_NODE_TIMEOUT_S ends the job."""
    out = str(tmp_path / "checked")
    two_leaders(tmp_path, "checked", CHECKED, out, env={"SYNK_CHECK_NODES": "1"})
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    assert node0[0].startswith("refused: all_reduce: node 1's leader refused it before any data moved"), node0[0]
    assert "'bogus'" in node0[0] and "'bogus'" in node1[0], (node0[0], node1[0])
    for lines in (node0, node1):
        assert "different: all_reduce: the nodes' leaders make different" in lines[1] or \
            "different: broadcast: the nodes' leaders make different" in lines[1], lines[1]
        assert "node 0: all_reduce(op avg) of 'w' f32[2, 3]; node 1: broadcast of 'w' f32" in lines[1], lines[1]
        assert "node 0: get_value(rank 3) of 'w' f32; node 1: get_value(rank 2) of 'w' f32" in lines[2], lines[2]
        assert lines[4] == "after: [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]", lines[4]
    assert "node 0: a call, f(f32[4, 3])" in node1[3], node1[3]
    assert "node 1 called the collective gather(nd_up 1) of 'w' f32" in node0[3], node0[3]


BCAST_VALUES = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("""
fn f(scatter x: f32[n, 3], bcast scale: f32[3], bcast shift: f32) { out y: gather = x * scale + shift; }
""")
synk.fork(2)
f = m.function("f")
node = synk.node()
x = np.arange(12, dtype="float32").reshape(4, 3)
scale = np.array([1, 2, 3], dtype="float32")
lines = []
for what, kwargs in [("all rows", {}), ("index list", {"batch": [3, 1, 0, 2]})]:
    try:
        f(x, scale if node == 0 else scale * 2, np.float32(0.5), **kwargs)
        lines.append(f"{what}: ran")
    except synk.UsageError as e:
        lines.append(f"{what}: {e}")
    lines.append(f"{what} after: {f(x, scale, np.float32(0.5), **kwargs).tolist()}")
try:
    f(x, scale if node == 0 else scale + 1, np.float32(0.5 + node))
    lines.append("both: ran")
except synk.UsageError as e:
    lines.append(f"both: {e}")
open(out + ".node" + str(node), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_bcast_values_that_differ_between_nodes_are_a_usage_error_on_every_leader(tmp_path):
    """Each leader passes its own bcast values to its ranks, so values that differ between nodes
    gave each node's ranks another computation and a silently mixed result. They are compared
    (a hash of their bytes in the call's description): a UsageError on every leader naming the
    input, and the leaders stay in step, with or without an index list (agreed before planning or
    compared with the outcomes)."""
    out = str(tmp_path / "bcastvalues")
    two_leaders(tmp_path, "bcastvalues", BCAST_VALUES, out)
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    assert node0 == node1, (node0, node1)
    x = np.arange(12, dtype="float32").reshape(4, 3)
    want = x * np.array([1, 2, 3], dtype="float32") + 0.5
    for what, rows in [("all rows", [0, 1, 2, 3]), ("index list", [3, 1, 0, 2])]:
        line = next(l for l in node0 if l.startswith(what + ":"))
        assert "the bcast input 'scale' has other values on node 1 than on node 0" in line, line
        assert node0[node0.index(line) + 1] == f"{what} after: {want[rows].tolist()}"
    both = next(l for l in node0 if l.startswith("both:"))
    assert "the bcast inputs 'scale', 'shift' have other values on node 1 than on node 0" in both, both


FORK_MISMATCH = r'''
import os
import sys
import synk

out = sys.argv[1]
lines = []
leader = int(os.environ["OMPI_COMM_WORLD_RANK"])   # synk.node() is 0 until the fork
for attempt in range(2):
    try:
        synk.fork(1 if leader == 0 and attempt == 0 else 2)
        lines.append(f"fork {attempt}: forked {synk.size()}")
    except synk.UsageError as e:
        lines.append(f"fork {attempt}: {e}")
synk.close()
open(out + ".node" + str(leader), "w").write("\n".join(lines) + "\n")
'''


def test_a_refused_fork_cannot_be_retried_and_says_so(tmp_path):
    """Node 0 forks 1 rank and node 1 forks 2: a UsageError on both naming each node's choice.
    MPI is initialised by then, and workers must never be forked under it, so a second fork is a
    UsageError that says why (before, an InternalError: 'a cluster is running already'); close()
    still ends the job cleanly."""
    out = str(tmp_path / "forks")
    two_leaders(tmp_path, "forks", FORK_MISMATCH, out)
    for node in range(2):
        first, second = open(f"{out}.node{node}").read().splitlines()
        assert first.startswith("fork 0: fork: every node must start the same number of ranks"), first
        assert second.startswith("fork 1: fork: under mpirun a program can fork once, and the fork before this one "
                                 "was refused"), second


NAN_MAX = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("shared small: f32[3];\nshared big: f64[300000];\nfn f() { out s: sum = sum(small); }")
synk.fork(2)
lines = []
for name, length in [("small", 3), ("big", 300000)]:
    var = m.shared(name)
    for op in ["max", "min"]:
        for r in range(synk.size()):
            v = np.full(length, float(r))
            if r == synk.size() - 1:
                v[1] = np.nan           # on node 1's last rank only
            synk.set_value(r, var, v.astype("float32" if name == "small" else "float64"))
        synk.all_reduce(var, op=op)
        got = [synk.get_value(r, var)[:3].tolist() for r in range(synk.size())]
        lines.append(f"{name} {op}: {got}")
open(out + ".node" + str(synk.node()), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_max_and_min_across_nodes_propagate_a_nan_from_any_node(tmp_path):
    """A NaN held by node 1 alone reaches every rank of every node in max and min, small (gathered)
    and large (which went through MPI_MAX / MPI_MIN before, and may drop a NaN)."""
    out = str(tmp_path / "nanmax")
    two_leaders(tmp_path, "nanmax", NAN_MAX, out)
    node0 = open(out + ".node0").read().splitlines()
    assert node0 == open(out + ".node1").read().splitlines()
    for line, (first, last) in zip(node0, [(3.0, 3.0), (0.0, 0.0)] * 2):
        values = eval(line.split(": ", 1)[1], {"nan": float("nan")})
        for v in values:
            assert v[0] == first and v[1] != v[1] and v[2] == last, line


ONE_LEADER_ALONE = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("""
shared w: f32[4] = 1;
fn f(scatter x: f32[n, 4]) { out a: avg = mean(x, axis=0); }
""")
synk.fork(2)
f, w, node = m.function("f"), m.shared("w"), synk.node()
x = np.arange(40, dtype="float32").reshape(10, 4)
lines = []
if node == 0:   # this process's alone, as one device: no other leader takes part
    lines.append(f"as_local: {f.as_local(x).tolist()}")
lines.append(f"call: {f(synk.data(x)).tolist()}")
ckpt = out + ".ckpt"
m.save_checkpoint(ckpt)
try:   # node 0 saves while node 1 calls: both learn it, and neither pairs with the other's data
    lines.append(f"mixed: {m.save_checkpoint(ckpt) if node == 0 else f(synk.data(x))}")
except synk.UsageError as e:
    lines.append(f"mixed: {e}")
try:   # a shared variable's get_value by rank is compared like synk.get_value (SYNK_CHECK_NODES=1)
    lines.append(f"get: {w.get_value(rank=0) if node == 0 else synk.all_reduce(w, op='sum')}")
except synk.UsageError as e:
    lines.append(f"get: {e}")
synk.all_reduce(w, op="sum")
lines.append(f"after: {w.get_value().tolist()} {f(synk.data(x)).tolist()}")
open(out + ".node" + str(node), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_a_local_call_a_checkpoint_and_get_value_on_one_leader_alone(tmp_path):
    """as_local on one leader alone runs there (it was taken for a call across nodes: a C++
    IndexError with 2 ranks per node); a checkpoint call on one leader against a call on the other
    is a UsageError on both, naming each (node 1 took node 0's checkpoint message for its call's);
    a shared variable's get_value(rank=0) is compared across the leaders with SYNK_CHECK_NODES=1
    (it was not, and node 0's value went to node 1's next exchange). The leaders stay in step."""
    out = str(tmp_path / "alone")
    two_leaders(tmp_path, "alone", ONE_LEADER_ALONE, out, env={"SYNK_CHECK_NODES": "1"})
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    assert node0[0] == "as_local: [18.0, 19.0, 20.0, 21.0]", node0
    assert node0[1] == node1[0] == "call: [18.0, 19.0, 20.0, 21.0]", (node0, node1)
    for mixed in (node0[2], node1[1]):
        assert "the nodes' leaders made different calls" in mixed, mixed
        assert "save_checkpoint(...)" in mixed and "f(f32[10, 4])" in mixed, mixed
    for got in (node0[3], node1[2]):
        assert "the nodes' leaders make different collectives" in got, got
        assert "get_value('w')(rank 0)" in got and "all_reduce(op sum)" in got, got
    assert node0[4] == node1[3] == "after: [4.0, 4.0, 4.0, 4.0] [18.0, 19.0, 20.0, 21.0]", (node0, node1)


HYPER_PER_NODE = r'''
import sys
import numpy as np
import synk

out = sys.argv[1]
m = synk.compile("""
shared w: f32[4] = 1;
optimizer opt = sgd(lr=0.1);
fn train(scatter x: f32[n, 4]) {
  out l: sum = sum(x @ w);
  minimize mean(x @ w) over w using opt;
}
""")
synk.fork(1)
step, node = m.train_step("train"), synk.node()
x = np.ones((8, 4), "float32")
lines = []
try:   # an lr computed on each node: node 0's was broadcast and node 1's dropped without a word
    step.set_lr(0.5 if node == 1 else 0.25)
    lines.append("set_lr: set")
except synk.UsageError as e:
    lines.append(f"set_lr: {e}")
step.set_schedule(synk.Schedule.step_decay(1.0, 10, 0.1))
step.step_index = 100 if node == 1 else 0
before = m.shared("w").get_value().tolist()
try:   # step indices that differ: refused before the gradient call
    step(x)
    lines.append("step: ran")
except synk.UsageError as e:
    lines.append(f"step: {e}")
step.step_index = 3
lines.append(f"unchanged: {m.shared('w').get_value().tolist() == before} {step.hyper('lr')}")
step(x)
lines.append(f"after: {m.shared('w').get_value().tolist()} {step.hyper('lr')}")
open(out + ".node" + str(node), "w").write("\n".join(lines) + "\n")
synk.close()
'''


def test_hyper_parameters_that_differ_between_leaders_are_a_usage_error_on_every_leader(tmp_path):
    """set_lr with another value on each leader, and a schedule read at different step indices,
    are a UsageError on every leader before anything runs (node 0's value used to win silently);
    then the leaders go on in step."""
    out = str(tmp_path / "hyper")
    two_leaders(tmp_path, "hyper", HYPER_PER_NODE, out)
    node0 = open(out + ".node0").read().splitlines()
    node1 = open(out + ".node1").read().splitlines()
    for lines in (node0, node1):
        assert "the nodes' leaders set 'lr' differently" in lines[0], lines
        assert "node 0: set_hyper('lr', 0.25)" in lines[0] and "node 1: set_hyper('lr', 0.5)" in lines[0], lines
        assert "the nodes' leaders set 'lr' differently" in lines[1], lines
        assert lines[2] == "unchanged: True 0.1", lines
    assert node0[3] == node1[3], (node0, node1)
    assert node0[3].endswith(" 1.0"), node0


OUT_OF_STEP = r'''
import numpy as np
import synk

synk.fork(2)
m = synk.compile("""
shared w: f32[256] = 1;
fn f(scatter x: f32[n, 4]) { out a: avg = mean(x, axis=0); }
""")
w, f = m.shared("w"), m.function("f")
x = synk.data(np.arange(40, dtype="float32").reshape(10, 4))
if synk.node() == 0:
    print("master value", w.get_value(rank=0)[:3])   # a collective made by node 0 alone
print("call", f(x))
synk.all_reduce(w, op="sum")
print("w", w.get_value()[:3])
synk.close()
'''


def test_a_collective_one_leader_alone_makes_ends_the_job_at_the_next_call(tmp_path):
    """Without SYNK_CHECK_NODES: node 0 alone reads a value by rank (a broadcast to the others).
    Its message used to be taken for node 1's next exchange of the same length, and the job
    computed with it (node 0 and node 1 then held different sums, exit code 0). The leaders count
    their exchanges: the next call's first exchange finds them out of step and ends the job."""
    script = tmp_path / "out_of_step.py"
    script.write_text(OUT_OF_STEP)
    env = dict(os.environ, SYNK_NODE_TIMEOUT_S="60")
    proc = subprocess.run([MPIRUN, *LAUNCH, "-np", "2", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "the leaders are out of step: node 1 is at its cross-node exchange" in proc.stderr, proc.stderr
    assert "\nw " not in proc.stdout, proc.stdout
