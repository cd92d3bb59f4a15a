"""Modules no Python object holds any more are freed on every rank: a program that compiles a
module in a loop (a hyperparameter search, a notebook cell run again) stays at one module's
memory, on the master and on the workers, and what a Function, Shared or TrainStep still holds
stays usable.
"""
import gc
import os

import numpy as np

import synk

BIG = """
shared w: f32[4096, 4096] = uniform(seed=3, low=-1.0, high=1.0);
fn f(scatter x: f32[n, 4]) { out y: sum = sum(x); out m: avg = mean(w); }
"""

SMALL = """
shared w: f32[4, 3] = uniform(seed=1, low=-0.5, high=0.5);
shared b: f32[3];
optimizer opt = sgd(lr=0.1);
fn f(scatter x: f32[n, 4]) { out y: gather = x @ w + b; }
fn train(scatter x: f32[n, 4], scatter y: i64[n]) {
  minimize mean(cross_entropy(x @ w + b, y)) over w, b using opt;
}
"""


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def test_modules_compiled_in_a_loop_are_freed_on_every_rank(group):
    x = synk.data(np.full((6, 4), 0.5, np.float32))
    pids = [os.getpid(), synk.worker_pid(1)]
    before = [rss_mib(p) for p in pids]
    for _ in range(5):
        m = synk.compile(BIG)
        y, mean = m.function("f")(x)
        assert y == 12.0 and abs(mean) < 0.01
        del m
        gc.collect()
    synk.distribute()   # a command: the workers free the last one too
    grown = [rss_mib(p) - b for p, b in zip(pids, before)]
    # Five modules of 64 MiB: 320 MiB on each rank if none were freed.
    assert max(grown) < 100, grown


def test_what_a_handle_holds_stays_usable(group):
    m = synk.compile(SMALL)
    f, b, step = m.function("f"), m.shared("b"), m.train_step("train")
    del m
    gc.collect()
    x = synk.data(np.ones((4, 4), np.float32))
    step(x, synk.data(np.array([0, 1, 2, 0])))
    synk.distribute()
    assert f(x).shape == (4, 3)
    assert b.get_value(1).shape == (3,)


FINALIZER_CALLS_SYNK = r'''
import gc, synk
synk.fork(2)
m = synk.compile("shared w: f32[3, 4];\nfn f(scatter x: f32[n, 4]) { out y: sum = sum(x) + sum(w); }")
w = m.shared("w")
class Buffer:                      # frees its Data when collected; a cycle, so only gc frees it
    def __init__(self, d):
        self.d, self.me = d, self
    def __del__(self):
        self.d.free_memory()       # a synk call, maybe inside a binding that holds synk's lock
keep = []
for t, shape in [(t, s) for s in (True, False) for t in range(1, 6)]:
    for k in range(6):
        d = synk.data(shape=(4,), dtype="f32")
        gc.collect(); gc.set_threshold(t)
        Buffer(d); del d
        for _ in range(k):
            keep.append([])
        r = w.shape if shape else m.function("f")
        gc.set_threshold(700)
print("done")
'''


def test_a_finalizer_that_calls_synk_during_a_binding_does_not_hang():
    # The collector may run a finalizer while a binding builds its result under synk's API lock
    # (Shared.shape, Module.function): the finalizer's synk call takes the lock again.
    import subprocess, sys
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", FINALIZER_CALLS_SYNK], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr
