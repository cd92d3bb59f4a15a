"""Differential tests: one function with an output of every reduce mode over a mix of ops, called
from Python on fresh random inputs (new seed each run; SYNK_TEST_SEED replays one) with random
batches, slices and output subsets on 1, 2 and 3 ranks, each result compared with a numpy float64
reference computed from the same rows; plus every rank's shared-variable update (accumulated over
slices) against the reference of that rank's own rows.
"""
import numpy as np
import pytest

import synk

SOURCE = """
shared acc: f64[3];
fn f(scatter x: f64[n, 5], scatter label: i64[n], bcast w: f64[5, 3], bcast t: f64) {
  let z = x @ w;
  out m: avg = mean(tanh(z) * t, axis=0);
  out s: sum = sum(exp(-(x * x)), axis=0);
  out hi: max = max(where(x > 0, x, -x), axis=0);
  out lo: min = min(sigmoid(z) - relu(z), axis=0);
  out p: prod = prod(1 + 0.01 * z, axis=0);
  out ce: avg = mean(cross_entropy(z, label));
  out hits: sum = sum(cast(argmax(softmax(z), axis=1) == label, i64));
  out rows: gather = log_softmax(z)[:, 0] + sqrt(abs(x[:, 1]));
  update acc = acc + mean(maximum(z, 0.5), axis=0);
}
"""
SOURCE = SOURCE.replace("log_softmax(z)[:, 0] + sqrt(abs(x[:, 1]))",
                        "reshape(slice(log_softmax(z), 0, 1, axis=1), [-1]) + "
                        "sqrt(abs(reshape(slice(x, 1, 2, axis=1), [-1])))")


def reference(x, label, w, t, acc):
    z = x @ w
    sig = 1 / (1 + np.exp(-z))
    log_soft = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    return {
        "m": (np.tanh(z) * t).mean(0), "s": np.exp(-(x * x)).sum(0), "hi": np.abs(x).max(0),
        "lo": (sig - np.maximum(z, 0)).min(0), "p": (1 + 0.01 * z).prod(0),
        "ce": -log_soft[np.arange(len(x)), label].mean(), "hits": (z.argmax(1) == label).sum(),
        "rows": log_soft[:, 0] + np.sqrt(np.abs(x[:, 1])),
    }


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_random_calls_match_numpy(rng, ranks):
    mod = synk.compile(SOURCE)
    f = mod.function("f")
    acc = mod.shared("acc")
    synk.fork(ranks)
    try:
        for trial in range(6):
            n = int(rng.integers(ranks, 60))
            x_dat = rng.standard_normal((n, 5))
            label_dat = rng.integers(0, 3, size=n)
            w_dat = rng.standard_normal((5, 3))
            t = float(rng.standard_normal())
            x, label = synk.data(x_dat), synk.data(label_dat)
            kind = trial % 3
            batch = None if kind == 0 else int(rng.integers(1, n + 1)) if kind == 1 else rng.integers(0, n, size=n + 3)
            rows = np.arange(n) if batch is None else np.arange(batch) if kind == 1 else batch
            num_slices = int(rng.integers(1, 4))
            names = list(f.output_names)
            subset = None if trial % 2 == 0 else list(rng.permutation(names)[:3])
            start = rng.standard_normal(3)
            for r in range(ranks):
                synk.set_value(r, acc, start)
            r = f(x, label, w_dat, t, batch=batch, num_slices=num_slices, output_subset=subset)
            ref = reference(x_dat[rows], label_dat[rows], w_dat, t, start)
            got = r.as_dict()
            for name in (subset or names):
                assert np.allclose(got[name], ref[name], rtol=1e-9, atol=1e-12), (name, trial, batch, num_slices)
            # Each rank updated its own acc from its own rows (rank r: positions [r*L/N, (r+1)*L/N)),
            # the mean over them whatever the slices; a rank without rows keeps its value.
            after = synk.gather(acc)
            for rank in range(ranks):
                own = rows[len(rows) * rank // ranks:len(rows) * (rank + 1) // ranks]
                want = start + np.maximum(x_dat[own] @ w_dat, 0.5).mean(0) if len(own) else start
                assert np.allclose(after[rank], want, rtol=1e-9, atol=1e-12), (rank, trial, num_slices)
            assert np.allclose(f.as_local(x_dat[rows], label_dat[rows], w_dat, t, output_subset=["m"]), ref["m"])
    finally:
        synk.close()
