"""Run-time hyper-parameters of training steps from Python (docs/training.md, "Hyper-parameters at
run time"): TrainStep.set_lr / set_hyper / hyper between calls train exactly as a numpy float64
reference that changes the value at the same step, on every rank; a synk.Schedule sets lr from
the step count; adamw with clip_norm matches PyTorch's formulas written in numpy; bad keywords
and values raise synk.UsageError naming them.
"""
import numpy as np
import pytest

import synk

MODEL = """
shared w: f64[4, 2] = {w0};
shared b: f64[2];
optimizer opt = {rule};
fn train(scatter x: f64[n, 4], scatter y: f64[n, 2], bcast scale: f64) {{
  let err = x @ w + b - y;
  out loss_sum: sum = sum(err * err);
  minimize sum(err * err) * scale over w, b using opt;
}}
"""


def gradient(x, y, w, b):
    err = x @ w + b - y
    return 2 * x.T @ err / len(x), 2 * err.sum(0) / len(x)


def momentum_reference(x, y, batches, lrs, momentum=0.5):
    w, b = np.zeros((4, 2)), np.zeros(2)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    for idx, lr in zip(batches, lrs):
        gw, gb = gradient(x[idx], y[idx], w, b)
        vw, vb = momentum * vw - lr * gw, momentum * vb - lr * gb
        w, b = w + vw, b + vb
    return w, b


def adamw_reference(x, y, batches, params, lr, betas, eps, weight_decay, clip_norm):
    """torch.optim.AdamW after torch.nn.utils.clip_grad_norm_, written out in float64."""
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, idx in enumerate(batches, 1):
        grads = list(gradient(x[idx], y[idx], *params))
        norm = np.sqrt(sum((g * g).sum() for g in grads))
        factor = min(1.0, clip_norm / (norm + 1e-6))
        for k, g in enumerate(grads):
            g = g * factor
            params[k] = params[k] * (1 - lr * weight_decay)
            m[k] = betas[0] * m[k] + (1 - betas[0]) * g
            v[k] = betas[1] * v[k] + (1 - betas[1]) * g * g
            denom = np.sqrt(v[k]) / np.sqrt(1 - betas[1] ** t) + eps
            params[k] = params[k] - lr / (1 - betas[0] ** t) * m[k] / denom
    return params, factor


def data(rng, rows=60):
    x = rng.standard_normal((rows, 4))
    y = x @ rng.standard_normal((4, 2)) + 0.1 * rng.standard_normal((rows, 2))
    batches = [rng.choice(rows, size=size, replace=False) for size in (20, 14, 26, 10, 18, 12)]
    return x, y, batches


def run(step, x, y, batches, group, before_each=None):
    xd, yd = synk.data(x), synk.data(y)
    for s, idx in enumerate(batches):
        if before_each:
            before_each(s)
        step(xd, yd, np.float64(group / len(idx)), batch=idx)


def test_set_lr_between_steps(group, rng):
    model = synk.compile(MODEL.format(w0=0, rule="momentum(lr=0.1, momentum=0.5)"))
    step = model.train_step("train")
    assert step.hyper_names == ["lr", "momentum"]
    assert step.hyper("lr") == 0.1 and step.hyper("momentum") == 0.5
    x, y, batches = data(rng)
    lrs = [0.1, 0.1, 0.1, 0.02, 0.02, 0.05]
    run(step, x, y, batches, group, lambda s: step.set_lr(lrs[s]))
    assert step.hyper("lr") == 0.05
    assert list(synk.gather(model.shared("opt_lr"))) == [0.05] * group   # every rank
    w, b = momentum_reference(x, y, batches, lrs)
    for r in range(group):
        assert np.allclose(model.shared("w").get_value(r), w, rtol=1e-10, atol=1e-12)
        assert np.allclose(model.shared("b").get_value(r), b, rtol=1e-10, atol=1e-12)
    # The constant lr would have ended elsewhere: the change took effect.
    w_const, _ = momentum_reference(x, y, batches, [0.1] * 6)
    assert not np.allclose(w, w_const, rtol=1e-6)
    step.set_hyper("momentum", 0.25)
    assert step.hyper("momentum") == 0.25


def test_schedule_sets_lr_from_the_step_count(group, rng):
    schedule = synk.Schedule.step_decay(0.1, 2, 0.5).with_warmup(1)
    assert [schedule(s) for s in range(6)] == [0.1, 0.1, 0.1, 0.05, 0.05, 0.025]
    assert "step_decay(lr=0.1, every=2, gamma=0.5) after warmup(1)" in repr(schedule)
    model = synk.compile(MODEL.format(w0=0, rule="momentum(lr=0.3, momentum=0.5)"))
    step = model.train_step("train")
    step.set_schedule(schedule)
    x, y, batches = data(rng)
    run(step, x, y, batches, group)
    assert step.step_index == 6 and step.hyper("lr") == 0.025
    w, b = momentum_reference(x, y, batches, [schedule(s) for s in range(6)])
    assert np.allclose(model.shared("w").get_value(1), w, rtol=1e-10, atol=1e-12)
    step.step_index = 0
    step.clear_schedule()
    assert step.step_index == 0


def test_a_schedule_that_leaves_the_finite_numbers_is_refused_before_the_step(group, rng):
    """step_decay with gamma > 1 grows; once its lr overflows the step is a UsageError that names the
    schedule and changes nothing (it used to fail in set_hyper, after the gradient call had run)."""
    model = synk.compile(MODEL.format(w0=0, rule="momentum(lr=0.3, momentum=0.5)"))
    step = model.train_step("train")
    step.set_schedule(synk.Schedule.step_decay(0.1, 1, 1e200))
    x, y, batches = data(rng)
    x, y, scale = synk.data(x), synk.data(y), np.float64(1.0)
    step(x, y, scale, batch=batches[0])
    step(x, y, scale, batch=batches[1])              # lr = 1e199 there: finite
    w = model.shared("w").get_value()
    with pytest.raises(synk.UsageError, match="its schedule gives lr = inf at step 2"):
        step(x, y, scale, batch=batches[2])
    assert step.step_index == 2 and np.array_equal(model.shared("w").get_value(), w)


@pytest.mark.parametrize("clip_norm", [0.05, 1e6])
def test_adamw_with_clipping_matches_pytorch_formulas(group, rng, clip_norm):
    # w starts at 0.5, so that the decay has something to do.
    model = synk.compile(MODEL.format(w0=0.5, rule=f"adamw(lr=0.01, weight_decay=0.1, clip_norm={clip_norm})"))
    step = model.train_step("train")
    assert step.hyper_names == ["lr", "beta1", "beta2", "epsilon", "weight_decay", "clip_norm"]
    x, y, batches = data(rng)
    run(step, x, y, batches, group)
    ref, last_factor = adamw_reference(x, y, batches, [np.full((4, 2), 0.5), np.zeros(2)], 0.01, (0.9, 0.999),
                                       1e-8, 0.1, clip_norm)
    assert (last_factor < 1) == (clip_norm < 1), "the small threshold clips, the large one does not"
    assert np.allclose(model.shared("w").get_value(1), ref[0], rtol=1e-9, atol=1e-12)
    assert np.allclose(model.shared("b").get_value(), ref[1], rtol=1e-9, atol=1e-12)


def test_bad_keywords_and_values(group):
    model = synk.compile(MODEL.format(w0=0, rule="sgd(lr=0.1)"))
    step = model.train_step("train")
    with pytest.raises(synk.UsageError, match="no hyper-parameter 'beta1'.*has: lr"):
        step.set_hyper("beta1", 0.5)
    with pytest.raises(synk.UsageError, match="declare clip_norm=0"):
        step.hyper("clip_norm")
    with pytest.raises(synk.UsageError, match="'lr' must be a finite number >= 0, got -1"):
        step.set_lr(-1)
    with pytest.raises(synk.UsageError, match="lr must be a finite number > 0"):
        synk.Schedule.constant(0)
    assert step.hyper("lr") == 0.1
