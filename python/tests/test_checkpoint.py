"""Checkpoints from Python (docs/training.md, "Checkpoints"): Module.save_checkpoint writes the
parameters, adam's state and counter and the functions' random state into a directory of .npy
files (numpy reads them) and a manifest; a fresh module that loads it on 2 ranks continues the run
bit for bit, uneven splits and dropout included, and a schedule resumes from the saved step index. Shared.set_value_all reaches every rank where
set_value reaches the master's copy only. A bad checkpoint is a UsageError.
"""
import json

import numpy as np
import pytest

import synk

SOURCE = """
shared w: f64[4, 2] = uniform(seed=3, low=-0.5, high=0.5);
shared b: f64[2];
optimizer opt = adam(lr=0.05);
fn train(scatter x: f64[n, 4], scatter y: f64[n, 2]) {
  let err = dropout(x, 0.2) @ w + b - y;
  out loss: avg = mean(sum(err * err, axis=1));
  minimize mean(sum(err * err, axis=1)) over w, b using opt;
}
"""


def steps(model, x, y, first, count):
    step = model.train_step("train")
    for s in range(first, first + count):
        step(x, y, batch=[(s * 7 + j * 3) % 40 for j in range(3 + s % 5)])


def state(model, rank):
    return [model.shared(n).get_value(rank) for n in ("w", "b", "w_m", "w_v", "opt_update_t")]


def test_a_resumed_run_continues_bit_for_bit(group, rng, tmp_path):
    x = synk.data(rng.standard_normal((40, 4)))
    y = synk.data(rng.standard_normal((40, 2)))
    straight = synk.compile(SOURCE)
    steps(straight, x, y, 0, 4)
    straight.save_checkpoint(tmp_path / "ckpt", metadata={"step": 4})
    steps(straight, x, y, 4, 5)
    resumed = synk.compile(SOURCE)
    assert resumed.load_checkpoint(tmp_path / "ckpt") == {"step": "4"}
    steps(resumed, x, y, 4, 5)
    for rank in range(group):
        for a, b in zip(state(straight, rank), state(resumed, rank)):
            assert np.array_equal(a, b)
    manifest = json.loads((tmp_path / "ckpt" / "manifest.json").read_text())
    assert {v["name"] for v in manifest["variables"]} >= {"w", "b", "w_m", "w_v", "opt_update_t"}
    assert "opt_grads" not in {v["name"] for v in manifest["variables"]}, "not state: every step overwrites it"
    assert not (tmp_path / "ckpt" / "opt_grads.npy").exists()
    assert np.load(tmp_path / "ckpt" / "w.npy").shape == (4, 2)


def test_a_resumed_schedule_continues_from_the_saved_step_index(group, rng, tmp_path):
    x = synk.data(rng.standard_normal((40, 4)))
    y = synk.data(rng.standard_normal((40, 2)))
    schedule = synk.Schedule.cosine(0.05, 8, 0.001)
    straight = synk.compile(SOURCE)
    step = straight.train_step("train")
    step.set_schedule(schedule)
    for s in range(3):
        step(x, y, batch=range(s, s + 10))
    straight.save_checkpoint(tmp_path / "ckpt")
    for s in range(3, 7):
        step(x, y, batch=range(s, s + 10))
    resumed = synk.compile(SOURCE)
    resumed.load_checkpoint(tmp_path / "ckpt")
    again = resumed.train_step("train")
    assert again.step_index == 3
    again.set_schedule(schedule)
    for s in range(3, 7):
        again(x, y, batch=range(s, s + 10))
    assert again.hyper("lr") == schedule(6)
    for a, b in zip(state(straight, group - 1), state(resumed, group - 1)):
        assert np.array_equal(a, b)
    manifest = json.loads((tmp_path / "ckpt" / "manifest.json").read_text())
    assert manifest["train_steps"] == {"train": 3}


def test_set_value_all_reaches_every_rank(group):
    model = synk.compile(SOURCE)
    before = model.shared("b").get_value(1)
    model.shared("b").set_value(np.array([1.0, 2.0]))
    assert np.array_equal(model.shared("b").get_value(1), before)
    model.shared("b").set_value_all(np.array([3.0, 4.0]))
    for rank in range(group):
        assert np.array_equal(model.shared("b").get_value(rank), [3.0, 4.0])


def test_bad_checkpoints(tmp_path):
    model = synk.compile(SOURCE)
    with pytest.raises(synk.UsageError, match="no such directory"):
        model.load_checkpoint(tmp_path / "none")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(synk.UsageError, match="not a checkpoint"):
        model.save_checkpoint(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    with pytest.raises(synk.UsageError, match=r"metadata must be a dict \(or None\), received \[1, 2\]"):
        model.save_checkpoint(tmp_path / "list", metadata=[1, 2])
    assert not (tmp_path / "list").exists()


def test_random_state_and_metadata_from_python(rng, tmp_path):
    """Function.seed/step read and set what a checkpoint restores; synk.checkpoint_metadata reads the
    metadata without loading anything."""
    model = synk.compile(SOURCE)
    x = synk.data(rng.standard_normal((40, 4)))
    y = synk.data(rng.standard_normal((40, 2)))
    steps(model, x, y, 0, 2)
    train = model.function("train")
    assert train.step == 2
    train.seed = 11
    model.save_checkpoint(tmp_path / "ck", {"epoch": 2})
    assert synk.checkpoint_metadata(tmp_path / "ck") == {"epoch": "2"}
    train.seed, train.step = 5, 9
    model.load_checkpoint(tmp_path / "ck")
    assert (train.seed, train.step) == (11, 2)
    with pytest.raises(synk.UsageError, match="not a checkpoint"):
        synk.checkpoint_metadata(tmp_path)
    with pytest.raises(TypeError):
        train.step = -1
