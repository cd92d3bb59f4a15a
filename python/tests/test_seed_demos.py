"""The basic demos the Synkhronos guide points to (demos/demo_1.py ... demo_5.py of its
repository), in Python with synk: reductions and slicing, synk.Data, shared-variable
collectives, `batch` (and minibatch inputs), `batch_s`. Where the demos compare with a Theano
function, these compare with Function.as_local (one process) and with a numpy float64 reference
on fresh random inputs; the Data demo asserts the sizes its comments state.
"""
import numpy as np
import pytest

import synk

DEMO1 = """
fn f(scatter x: f32[n, 10], bcast y: f32[10, 5]) {
  let xy = x @ y;
  out z_avg: avg = mean(xy, axis=0);
  out z_sum: sum = sum(xy, axis=0);
  out z_max: max = max(xy, axis=0);
}
"""

DEMO3 = """
shared s_x: f32[m, 4] sliceable;
shared s_y: f32[4, 5];
fn f() {
  out z: avg = mean(s_x @ s_y, axis=0);
}
"""

DEMO5 = """
shared s_x: f32[m, 10] sliceable;
shared s_y: f32[10, 5];
fn f() {
  out z: sum = sum(s_x @ s_y, axis=0);
}
"""

MINIBATCH = """
fn weighted(scatter x: f64[n, 4], minibatch w: f64[n], bcast v: f64[4]) {
  let scores = x @ v;
  out weighted_mean: avg = mean(scores * w);
  out weight_total: sum = sum(w);
  out weighted_scores: gather = scores * w;
}
"""


def f64(a):
    return np.asarray(a, dtype=np.float64)


def close(a, b):
    """Equal up to float32 rounding (sums of many terms in another order: ranks, slices)."""
    return np.allclose(a, b, rtol=1e-4, atol=1e-5)


def test_demo1_reductions_and_slices(group, rng):
    f = synk.compile(DEMO1).function("f")
    assert f.output_modes == ["avg", "sum", "max"]
    x_dat = (0.01 * rng.standard_normal((1000, 10))).astype("float32")
    y_dat = rng.standard_normal((10, 5)).astype("float32")
    r_avg, r_sum, r_max = f.as_local(x_dat, y_dat)          # one process, like Theano
    x_synk, y_synk = f.build_inputs(x_dat, y_dat)
    r_avg_synk, r_sum_synk, r_max_synk = f(x_synk, y_synk)
    assert close(r_avg, r_avg_synk) and close(r_sum, r_sum_synk) and close(r_max, r_max_synk)
    ref = f64(x_dat) @ f64(y_dat)
    assert np.allclose(r_avg_synk, ref.mean(0), rtol=1e-4, atol=1e-6)
    assert np.allclose(r_sum_synk, ref.sum(0), rtol=1e-4, atol=1e-5)
    assert np.allclose(r_max_synk, ref.max(0), rtol=1e-5, atol=1e-6)
    r = f(x_synk, y_synk, num_slices=4)                       # workers compute over slices
    assert close(r["z_avg"], r_avg) and close(r["z_sum"], r_sum) and close(r["z_max"], r_max)
    assert r.names == ("z_avg", "z_sum", "z_max")


def test_demo2_data(group, rng):
    x_dat = [rng.standard_normal(s).astype("float32") for s in [(5, 4), (5, 4), (2000, 10), (2100, 10), (100, 8)]]
    x_dat_5 = rng.standard_normal((100, 8))                  # float64
    x = synk.data(x_dat[0])
    assert isinstance(x.data, np.ndarray) and np.array_equal(x.data, x_dat[0])
    assert x.shape == (5, 4) and len(x) == 5 and x.alloc_size == 20 and x.dtype == np.float32
    assert np.array_equal(x[2:4], x_dat[0][2:4])
    x[3] = 0
    assert not x.data[3].any()
    x[:] = x_dat[1]
    assert np.array_equal(x.data, x_dat[1])
    x.set_value(x_dat[2], oversize=1.1)                       # larger: re-allocates
    assert x.size == 20000 and x.alloc_size == 22000
    x.set_value(x_dat[3])                                     # fits in the allocation
    assert x.size == 21000 and len(x) == 2100 and x.alloc_size == 22000
    x.set_length(len(x_dat[2]))
    x[:] = x_dat[2]
    assert len(x) == 2000 and np.array_equal(x.data, x_dat[2])
    x.set_value(x_dat[4])                                     # smaller: same allocation
    assert x.shape == (100, 8) and x.alloc_size == 22000
    x.free_memory()
    assert x.alloc_size == 0 and x.shape == (0, 0)
    x.set_value(x_dat[4])
    assert x.alloc_size == 800
    with pytest.raises(synk.UsageError, match="force_cast"):
        x.set_value(x_dat_5)                                   # float64 into float32 is not safe
    x.set_value(x_dat_5, force_cast=True)
    assert x.dtype == np.float32 and np.allclose(x.data, x_dat_5, rtol=1e-6, atol=1e-6)


def test_demo3_shared_variable_collectives(group, rng):
    n = group
    m = synk.compile(DEMO3)
    f, s_x, s_y = m.function("f"), m.shared("s_x"), m.shared("s_y")
    assert synk.get_lengths(s_x) == [0] * n
    x_dat = rng.standard_normal((8 * n, 4)).astype("float32")
    y_dat = rng.standard_normal((4, 5)).astype("float32")
    synk.scatter(s_x, x_dat)
    synk.broadcast(s_y, y_dat)
    assert synk.get_shapes(s_x) == [(8, 4)] * n
    assert np.array_equal(synk.gather(s_x, nd_up=0), x_dat)            # scatter-gather equivalency
    assert np.array_equal(synk.get_value(1, s_x), x_dat[8:16])
    for y in synk.gather(s_y):
        assert np.array_equal(y, y_dat)
    r_ref = (f64(x_dat) @ f64(y_dat)).mean(0)
    assert np.allclose(f(), r_ref, rtol=1e-4, atol=1e-5)
    assert np.allclose(f(num_slices=2), r_ref, rtol=1e-4, atol=1e-5)
    x_values = synk.gather(s_x, nd_up=1)
    assert x_values.shape == (n, 8, 4)
    synk.all_reduce(s_x, op="avg")
    for v in synk.gather(s_x, nd_up=1):
        assert np.allclose(v, x_values.mean(axis=0))
    synk.set_value(rank=1, shared_vars=s_x, values=x_values[1])     # reset rank 1
    assert np.array_equal(synk.get_value(1, s_x), x_values[1])
    synk.all_gather(s_x)                                              # every rank holds every row
    assert synk.get_shapes(s_x) == [(8 * n, 4)] * n


def test_demo4_batch(group, rng):
    f = synk.compile(DEMO1).function("f")
    x_dat = (0.01 * rng.standard_normal((1000, 10))).astype("float32")
    y_dat = rng.standard_normal((10, 5)).astype("float32")
    x_synk, y_synk = f.build_inputs(x_dat, y_dat)
    selections = [100, slice(10, 100), slice(100, 1000), rng.integers(0, 999, size=100),
                  list(rng.integers(0, 1000, size=37)), range(5, 905)]
    for batch in selections:
        rows = x_dat[:batch] if isinstance(batch, int) else x_dat[batch] if not isinstance(batch, range) \
            else x_dat[batch.start:batch.stop]
        r_local = f.as_local(rows, y_dat)
        r = f(x_synk, y_synk, batch=batch)
        ref = f64(rows) @ f64(y_dat)
        for got, want, exact in zip(r, (ref.mean(0), ref.sum(0), ref.max(0)), r_local):
            assert close(got, exact)
            assert np.allclose(got, want, rtol=1e-4, atol=1e-5)
    # An index synk.Data: every rank reads its indices in place.
    idx = synk.data(np.array([999, 0, 500, 500, 3], dtype=np.int64))
    assert np.allclose(f(x_synk, y_synk, batch=idx)["z_sum"], (f64(x_dat[idx.data]) @ f64(y_dat)).sum(0), rtol=1e-4)


def test_minibatch_inputs(group, rng):
    f = synk.compile(MINIBATCH).function("weighted")
    x_dat = rng.standard_normal((50, 4))
    v_dat = rng.standard_normal(4)
    x = synk.data(x_dat)
    v = synk.data(v_dat)
    for batch, rows in [(range(40, 50), np.arange(40, 50)), ([5, 1, 1, 9, 30, 2], np.array([5, 1, 1, 9, 30, 2]))]:
        w_dat = rng.standard_normal(len(rows))
        w = synk.data(w_dat)                       # role minibatch: read by position in the batch
        r = f(x, w, v, batch=batch)
        scores = x_dat[rows] @ v_dat
        assert np.allclose(r["weighted_mean"], np.mean(scores * w_dat))
        assert np.allclose(r["weight_total"], w_dat.sum())
        assert np.allclose(r["weighted_scores"], scores * w_dat)
    # A Data flagged minibatch pairs by position too, even with a scatter role.
    g = synk.compile(DEMO1).function("f")
    xs = rng.standard_normal((30, 10)).astype("float32")
    ys = rng.standard_normal((10, 5)).astype("float32")
    big, small = synk.data(np.zeros((100, 10), "float32")), synk.data(xs, minibatch=True)
    assert small.minibatch
    r = g(small, ys, batch=range(60, 90))
    assert np.allclose(r["z_sum"], (f64(xs) @ f64(ys)).sum(0), rtol=1e-4, atol=1e-5)
    del big


def test_demo5_batch_s(group, rng):
    n = group
    dat = 200                                           # rows of s_x on each rank
    m = synk.compile(DEMO5)
    f, s_x, s_y = m.function("f"), m.shared("s_x"), m.shared("s_y")
    x_dat = (0.01 * rng.standard_normal((dat * n, 10))).astype("float32")
    y_dat = rng.standard_normal((10, 5)).astype("float32")
    synk.scatter(s_x, x_dat)
    synk.broadcast(s_y, y_dat)
    slice_1 = slice(100, 200)
    list_2 = rng.integers(0, dat, size=100)
    slices_3 = [slice(0 + i, 100 + i) for i in range(n)]
    lists_4 = [rng.integers(0, dat, size=100) for _ in range(n)]
    # The rows each selection picks: batch_s applies after scattering, on every rank's own rows.
    x_1 = np.concatenate([x_dat[i * dat + slice_1.start:i * dat + slice_1.stop] for i in range(n)])
    x_2 = np.concatenate([x_dat[i * dat + list_2] for i in range(n)])
    x_3 = np.concatenate([x_dat[i * dat + s.start:i * dat + s.stop] for i, s in enumerate(slices_3)])
    x_4 = np.concatenate([x_dat[i * dat + lst] for i, lst in enumerate(lists_4)])
    for sel, rows in [(slice_1, x_1), (list_2, x_2), (slices_3, x_3), (lists_4, x_4)]:
        ref = (f64(rows) @ f64(y_dat)).sum(0)
        assert np.allclose(f(batch_s=sel), ref, rtol=1e-4, atol=1e-5)
        assert np.allclose(f(batch_s=sel, num_slices=4), ref, rtol=1e-4, atol=1e-5)
