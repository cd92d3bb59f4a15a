"""Deterministic training steps from Python (`step.deterministic = rows`, docs/training.md "The
same bits on any number of ranks"): the same data and batches on 1, 2 and 3 ranks, with and
without num_slices, give bit-identical parameters and optimizer state, close to the numpy float64
reference; a negative or fractional shard size is a UsageError.
"""
import numpy as np
import pytest

import synk

SOURCE = """
shared w: f32[5, 3];
shared b: f32[3];
optimizer opt = adam(lr=0.05);
fn train(scatter x: f32[n, 5], scatter y: f32[n, 3]) {
  let err = tanh(x @ w + b) - y;
  out loss: avg = mean(sum(err * err, axis=1));
  minimize mean(sum(err * err, axis=1)) over w, b using opt;
}
"""


def run(ranks, x_dat, y_dat, batches, num_slices=1, rows=4):
    model = synk.compile(SOURCE)
    step = model.train_step("train")
    step.deterministic = rows
    assert step.deterministic == rows
    synk.fork(ranks)
    try:
        x, y = synk.data(x_dat), synk.data(y_dat)
        losses = [float(step(x, y, batch=idx, num_slices=num_slices)) for idx in batches]
        state = {name: model.shared(name).get_value() for name in model.shared_names}
        for name in state:                    # every rank holds the master's bits
            for r in range(1, ranks):
                assert model.shared(name).get_value(r).tobytes() == state[name].tobytes(), (name, r)
        return losses, state
    finally:
        synk.close()


def test_same_bits_on_one_two_and_three_ranks(rng):
    x_dat = rng.standard_normal((60, 5)).astype(np.float32)
    y_dat = np.tanh(x_dat @ rng.standard_normal((5, 3))).astype(np.float32)
    batches = [rng.choice(60, size=size, replace=False) for size in (23, 17, 9, 3, 30)]
    _, one = run(1, x_dat, y_dat, batches)
    for ranks, slices in ((2, 1), (3, 1), (3, 2)):
        _, other = run(ranks, x_dat, y_dat, batches, num_slices=slices)
        for name in one:
            assert one[name].tobytes() == other[name].tobytes(), (name, ranks, slices)
    _, plain = run(2, x_dat, y_dat, batches, rows=0)
    for name in ("w", "b"):
        assert np.allclose(one[name], plain[name], rtol=1e-4, atol=1e-5)


def test_negative_shard_rows_is_a_usage_error():
    step = synk.compile(SOURCE).train_step("train")
    with pytest.raises(synk.UsageError, match=r"deterministic = rows\) takes the micro-shard rows, >= 0 \(0: off\); received -3"):
        step.deterministic = -3
    with pytest.raises(synk.UsageError, match="deterministic"):
        step.deterministic = 2.5                # rows are a whole number
