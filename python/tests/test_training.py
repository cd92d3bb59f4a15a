"""Training steps (synk/train_step.h) from Python: a step declared with `minimize ... using opt`
runs as one call (gradient function, the flat gradient reduced with each rank weighted by its
rows, update function) and trains exactly as a numpy float64 reference of the same optimizer on
the same shuffled batches with the mean loss, over uneven splits and num_slices. The three parts
called one by one give the same bits.
"""
import numpy as np
import pytest

import synk

SOURCE = """
shared w: f64[4, 2];
shared b: f64[2];
optimizer opt = momentum(lr=0.1, momentum=0.5);
fn train(scatter x: f64[n, 4], scatter y: f64[n, 2]) {
  let err = x @ w + b - y;
  out loss_sum: sum = sum(err * err);
  minimize mean(sum(err * err, axis=1)) over w, b using opt;
}
"""


@pytest.fixture
def model(group):
    return synk.compile(SOURCE)


def reference_steps(x, y, batches, lr=0.1, momentum=0.5):
    w, b = np.zeros((4, 2)), np.zeros(2)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    losses = []
    for idx in batches:
        err = x[idx] @ w + b - y[idx]
        losses.append((err * err).sum())
        gw, gb = 2 * x[idx].T @ err / len(idx), 2 * err.sum(0) / len(idx)   # gradient of the mean loss
        vw, vb = momentum * vw - lr * gw, momentum * vb - lr * gb
        w, b = w + vw, b + vb
    return w, b, losses


def test_train_step_matches_numpy(model, group, rng):
    step = model.train_step("train")
    assert step.name == "train" and step.gradient.name == "train" and step.update.name == "opt_update"
    assert step.gradient_var.name == "opt_grads" and step.gradient_var.shape == (10,)
    assert model.train_step_names == ["train"] and "opt_update" in model.function_names
    x_dat = rng.standard_normal((101, 4))
    y_dat = x_dat @ rng.standard_normal((4, 2)) + 0.1 * rng.standard_normal((101, 2))
    x, y = synk.data(x_dat), synk.data(y_dat)
    batches = [rng.choice(101, size=size, replace=False) for size in (25, 25, 31, 7, 3)]
    losses = []
    for idx in batches:                        # 25, 31, 7 and 3 rows split unevenly over 2 ranks
        losses.append(float(step(x, y, batch=idx)))
    w, b, ref_losses = reference_steps(x_dat, y_dat, batches)
    assert np.allclose(losses, ref_losses, rtol=1e-10)
    w_ranks = synk.gather(model.shared("w"))
    for r in range(group):                    # identical parameters on every rank
        assert np.allclose(w_ranks[r], w, rtol=1e-10, atol=1e-12)
    assert np.allclose(model.shared("b").get_value(1), b, rtol=1e-10, atol=1e-12)


def test_mean_loss_with_slices(group, rng):
    x_dat, y_dat = rng.standard_normal((100, 4)), rng.standard_normal((100, 2))
    x, y = synk.data(x_dat), synk.data(y_dat)
    batches = [rng.choice(100, size=size, replace=False) for size in (24, 36, 12, 48)]
    w, b, ref_losses = reference_steps(x_dat, y_dat, batches)
    for num_slices in (1, 2, 3):
        model = synk.compile(SOURCE)
        step = model.train_step("train")
        losses = [float(step(x, y, batch=idx, num_slices=num_slices)) for idx in batches]
        assert np.allclose(losses, ref_losses, rtol=1e-10)
        assert np.allclose(model.shared("w").get_value(1), w, rtol=1e-10, atol=1e-12)
        assert np.allclose(model.shared("b").get_value(), b, rtol=1e-10, atol=1e-12)


def test_parts_one_by_one_give_the_same_bits(group, rng):
    a, b = synk.compile(SOURCE), synk.compile(SOURCE)
    step_a, step_b = a.train_step("train"), b.train_step("train", num_packs=2)
    assert step_b.num_packs == 2
    x = synk.data(rng.standard_normal((40, 4)))
    y = synk.data(rng.standard_normal((40, 2)))
    for _ in range(3):
        idx = rng.permutation(40)[:16]
        out_a = step_a(x, y, batch=idx)
        out_b = step_b.gradient(x, y, batch=idx)          # the three parts by hand (even split: plain avg)
        synk.all_reduce(step_b.gradient_var, "avg")
        step_b.update()
        assert out_a == out_b
    assert np.array_equal(a.shared("w").get_value(1), b.shared("w").get_value(1))
    assert np.array_equal(a.shared("b").get_value(), b.shared("b").get_value())


def test_gradient_call_and_reduce_gradient_give_the_steps_bits(group, rng):
    """The parts as the step makes them (docs/training.md): gradient_call, reduce_gradient (each
    rank weighted by its rows, here over uneven splits), the update; and reduce_gradient without a
    gradient_call before it is a UsageError."""
    a, b = synk.compile(SOURCE), synk.compile(SOURCE)
    step_a, step_b = a.train_step("train"), b.train_step("train")
    x = synk.data(rng.standard_normal((40, 4)))
    y = synk.data(rng.standard_normal((40, 2)))
    for rows in (15, 7, 16):
        idx = rng.permutation(40)[:rows]
        out_a = step_a(x, y, batch=idx)
        out_b = step_b.gradient_call(x, y, batch=idx)
        assert step_b.reduce_gradient() is True
        step_b.update()
        assert out_a == out_b
    assert np.array_equal(a.shared("w").get_value(1), b.shared("w").get_value(1))
    assert step_a.step_index == 3 and step_b.step_index == 0   # the parts are not a step
    with pytest.raises(synk.UsageError, match="there is none to reduce"):
        step_b.reduce_gradient()
    step_b.gradient_call(x, y, batch=[])
    assert step_b.reduce_gradient() is False                    # no rows: skip the update


def test_set_lr_while_a_schedule_sets_it_is_an_error(model):
    step = model.train_step("train")
    step.set_schedule(synk.Schedule.constant(0.05))
    with pytest.raises(synk.UsageError, match="lr follows the schedule set with set_schedule"):
        step.set_lr(0.5)
    step.set_hyper("momentum", 0.25)                            # the others are free
    step.clear_schedule()
    step.set_lr(0.5)
    assert step.hyper("lr") == 0.5


def test_training_errors(model):
    with pytest.raises(synk.UsageError, match="opt_update"):
        model.train_step("opt_update")                            # not a training function
    step = model.train_step("train")
    with pytest.raises(synk.UsageError):
        step.num_packs = -1
    with pytest.raises(synk.UsageError, match="num_packs must be >= 0"):
        model.train_step("train", num_packs=-5)
    with pytest.raises(synk.UsageError, match="training step 'train'"):
        step(synk.data(np.ones((4, 3))), synk.data(np.ones((4, 2))))


def test_input_gradient_saliency_and_adversarial_step(group, rng):
    """grad with respect to an input: the per-row gradient of a summed loss, gathered from 2
    ranks, is numpy's softmax - one_hot times w^T; one FGSM step along its sign raises the loss."""
    model = synk.compile("""
shared w: f64[5, 3];
fn saliency(scatter x: f64[n, 5], scatter y: i64[n]) {
  let loss = sum(cross_entropy(x @ w, y));
  out loss: sum = loss;
  out dx: gather = grad(loss, x);
}
""")
    w = rng.standard_normal((5, 3))
    model.shared("w").set_value_all(w)
    x, y = rng.standard_normal((9, 5)), rng.integers(0, 3, 9)
    loss, dx = model.function("saliency")(x, y)
    z = x @ w
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert np.isclose(loss, -np.log(p[np.arange(9), y]).sum(), rtol=1e-12)
    assert np.allclose(dx, (p - np.eye(3)[y]) @ w.T, rtol=1e-10, atol=1e-12)
    adversarial, _ = model.function("saliency")(x + 0.05 * np.sign(dx), y)
    assert adversarial > loss


def test_the_gradient_of_a_power_is_zero_where_the_exponent_is_zero():
    """d(a ** b)/da = b * a ** (b - 1) was 0 * inf = NaN at a = 0 for b = 0; PyTorch masks it to 0,
    and so does synk, for a constant exponent and for an exponent that is a value."""
    f = synk.compile("""
fn f(bcast x: f64[3], bcast e: f64[3]) {
  let l = sum(x ** 0.0) + sum(pow(x, e));
  out g = grad(l, x);
}""").function("f")
    x = np.array([0.0, 2.0, 3.0])
    e = np.array([0.0, 2.0, 0.0])
    assert np.array_equal(f.as_local(x, e), [0.0, 4.0, 0.0])


def test_the_gradient_of_a_power_for_its_exponent_is_zero_at_a_zero_base():
    """d(a ** b)/db = a ** b * log(a) is 0 * -inf at a = 0; for b >= 0 PyTorch gives 0, and so does synk."""
    f = synk.compile("""
fn f(bcast x: f64[3], bcast e: f64[3]) {
  out g = grad(sum(pow(x, e)), e);
}""").function("f")
    got = f.as_local(np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 3.0]))
    assert np.allclose(got, [0.0, 0.0, 8.0 * np.log(2.0)], rtol=0, atol=1e-12)


def test_a_step_that_selects_no_rows_changes_no_variable(group, rng):
    """batch=[] (the empty last chunk of np.array_split): rank 0 runs the gradient function once on
    zero rows for its outputs, and keeps its variables like every rank without rows. Its batch
    norm running statistics were set to mean over no rows, NaN, on the master only."""
    model = synk.compile("""
shared w: f32[3, 2] = normal(seed=1);
shared g: f32[2] = ones;  shared b: f32[2];
shared rm: f32[2];        shared rv: f32[2] = ones;
optimizer opt = adam(lr=0.01);
fn train(scatter x: f32[n, 3], scatter y: i64[n]) {
  let h = batch_norm(x @ w, g, b, rm, rv, training=true);
  out loss: avg = mean(cross_entropy(h, y));
  minimize mean(cross_entropy(h, y)) over w, g, b using opt;
}
fn stat(scatter x: f32[n]) { update w: avg = w * mean(x); }
""")
    step = model.train_step("train")
    x, y = rng.standard_normal((8, 3)).astype(np.float32), np.zeros(8, np.int64)
    step(x, y)
    names = ["w", "g", "b", "rm", "rv"]
    before = [[model.shared(v).get_value(r) for v in names] for r in range(synk.size())]
    step(x, y, batch=[])
    model.function("stat")(np.ones(4, np.float32), batch=[])
    after = [[model.shared(v).get_value(r) for v in names] for r in range(synk.size())]
    for r in range(synk.size()):
        for v, old, new in zip(names, before[r], after[r]):
            assert np.array_equal(old, new), (r, v, old, new)


def test_a_loss_that_is_not_a_mean_over_the_rows_is_warned_about(capfd):
    # A sum over the rows trains on a gradient divided by the rank count: a warning where the
    # module is compiled, pointing at the loss (docs/language.md).
    synk.compile(SOURCE.replace("minimize mean(sum(err * err, axis=1))", "minimize sum(err * err)"),
                 name="sum_loss.synk")
    err = capfd.readouterr().err
    assert "sum_loss.synk:8:12: warning: the loss is not a mean over the scattered rows ('n'" in err, err
    assert "it has a sum over each rank's rows" in err
    synk.compile(SOURCE, name="mean_loss.synk")
    assert "warning" not in capfd.readouterr().err


def test_function_handles_of_one_function_compare_equal(model):
    f, g = model.function("train"), model.function("train")
    assert f == g and hash(f) == hash(g) and len({f, g}) == 1
    other = synk.compile(SOURCE).function("train")
    assert f != other and f != "train"

    class Anything:   # a comparison with another type is left to the other side (NotImplemented)
        def __eq__(self, _):
            return True
    assert f == Anything() and model.shared("w") == Anything() and model == Anything()
