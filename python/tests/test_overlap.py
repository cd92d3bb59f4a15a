"""Overlapped gradient all-reduce from Python (`step.overlap = True`, docs/training.md "Overlap"):
a three-layer network trained on 2 and 3 ranks gives the same bits with and without overlap, with
small and default buckets, including rows that do not split evenly (the weighted average, bucket
by bucket) and steps that fall back to the one all_reduce (num_slices); bad settings are a
UsageError, as for every other setting.
"""
import numpy as np
import os
import subprocess
import sys

import pytest

import synk

SOURCE = """
shared w1: f32[64, 96] = uniform(seed=1, low=-0.1, high=0.1);
shared b1: f32[96];
shared w2: f32[96, 48] = uniform(seed=2, low=-0.1, high=0.1);
shared b2: f32[48];
shared w3: f32[48, 4] = uniform(seed=3, low=-0.1, high=0.1);
optimizer opt = momentum(lr=0.05, momentum=0.9);
fn train(scatter x: f32[n, 64], scatter y: i64[n]) {
  let h = relu(relu(x @ w1 + b1) @ w2 + b2);
  let losses = cross_entropy(h @ w3, y);
  out loss: avg = mean(losses);
  minimize mean(losses) over w1, b1, w2, b2, w3 using opt;
}
"""


def run(ranks, x_dat, y_dat, batches, overlap, bucket=0, num_slices=1):
    model = synk.compile(SOURCE)
    step = model.train_step("train")
    step.overlap = overlap
    step.bucket_bytes = bucket
    assert (step.overlap, step.bucket_bytes) == (overlap, bucket)
    synk.fork(ranks)
    try:
        x, y = synk.data(x_dat), synk.data(y_dat)
        losses = [float(step(x, y, batch=idx, num_slices=num_slices)) for idx in batches]
        state = {name: model.shared(name).get_value() for name in model.shared_names}
        for name in state:
            for r in range(1, ranks):
                assert model.shared(name).get_value(r).tobytes() == state[name].tobytes(), (name, r)
        return losses, state
    finally:
        synk.close()


def test_same_bits_with_and_without_overlap(rng):
    x_dat = rng.standard_normal((120, 64)).astype(np.float32)
    y_dat = rng.integers(0, 4, size=120)
    batches = [rng.choice(120, size=size, replace=False) for size in (48, 36, 37, 60, 24, 1)]
    for ranks in (2, 3):
        plain = run(ranks, x_dat, y_dat, batches, False)
        for bucket in (0, 512, 20000):
            losses, state = run(ranks, x_dat, y_dat, batches, True, bucket)
            assert losses == plain[0], (ranks, bucket)
            for name in state:
                assert state[name].tobytes() == plain[1][name].tobytes(), (name, ranks, bucket)
    sliced_plain = run(2, x_dat, y_dat, batches, False, num_slices=2)
    sliced = run(2, x_dat, y_dat, batches, True, 512, num_slices=2)
    assert sliced[0] == sliced_plain[0]


def test_bad_settings():
    step = synk.compile(SOURCE).train_step("train")
    with pytest.raises(synk.UsageError, match="overlap: expected True or False, received 1"):
        step.overlap = 1
    with pytest.raises(synk.UsageError, match="overlap: expected True or False, received 'yes'"):
        step.overlap = "yes"
    with pytest.raises(synk.UsageError, match="bucket_bytes must be >= 0"):
        step.bucket_bytes = -1
    with pytest.raises(synk.UsageError, match="bucket_bytes"):
        step.bucket_bytes = 2.5
    assert (step.overlap, step.bucket_bytes) == (False, 0)


def test_verbose_says_why_a_step_does_not_stream(tmp_path):
    # A new process: SYNK_VERBOSE is read once per process.
    script = tmp_path / "why.py"
    script.write_text(f'''
import numpy as np, synk
model = synk.compile("""{SOURCE}""")
step = model.train_step("train")
step.overlap = True
synk.fork(2)
x = synk.data(np.zeros((8, 64), np.float32)); y = synk.data(np.zeros(8, np.int64))
for _ in range(2):
    step(x, y, batch=[0, 1, 2, 3], num_slices=2)  # slices
    step(x, y, batch=[3])                         # a rank without rows streams: says nothing
    step(x, y, batch=[0, 1, 2, 3])                # streams: says nothing
synk.close()
''')
    env = dict(os.environ, SYNK_VERBOSE="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "with overlap" in line]
    assert said == ["synk: 'train' with overlap takes the one all_reduce after the call: num_slices > 1"], done.stderr
