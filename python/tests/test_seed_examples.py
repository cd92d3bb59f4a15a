"""The two worked examples of the Synkhronos guide (seed 000, sections 2 and 3) in Python, with
synk in place of Theano: .synk source in place of Theano graphs, Function.as_local in place of
as_theano. Each asserts the values the guide prints, on 2 ranks as in the guide.
"""
import numpy as np

import synk

INTRO = """
fn f(scatter x: f32[n, 10], bcast y: f32[10]) {
  out z: avg = mean(x @ y, axis=0);
}
"""

SHARED = """
shared s: f32[2] = ones;
fn f(scatter x: f32[n, 2]) {
  update s = sum(x * s, axis=0);
}
"""


def test_introductory_example(group, rng):
    f = synk.compile(INTRO).function("f")
    x_dat = rng.standard_normal((100, 10)).astype("float32")
    y_dat = rng.standard_normal(10).astype("float32")
    x_synk = synk.data(x_dat)
    y_synk = synk.data(y_dat)
    r_local = f.as_local(x_dat, y_dat)        # the guide's theano.function, on one process
    r = f(x_synk, y_synk)
    assert np.allclose(r, r_local, rtol=1e-5, atol=1e-6)   # float32 sums in another order
    assert np.allclose(r, np.mean(x_dat.astype(np.float64) @ y_dat.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert isinstance(r, np.ndarray) and r.dtype == np.float32 and r.shape == ()


def test_shared_variable_example(group):
    m = synk.compile(SHARED)
    f = m.function("f")
    s = m.shared("s")
    s_init = np.ones(2, dtype="float32")
    x_dat = synk.data(np.array([[1, 1], [2, 2], [3, 3], [4, 4]]).astype("float32"))
    assert s.get_value().tolist() == [1, 1]                      # s initial

    f.as_local(x_dat.data)                                       # one process, as Theano
    assert s.get_value().tolist() == [10, 10]

    s.set_value(s_init)
    f(x_dat)
    assert s.get_value().tolist() == [3, 3]                      # local s after a synk call
    assert synk.gather(s, nd_up=1).tolist() == [[3, 3], [7, 7]]

    synk.reduce(s, op="sum")
    assert s.get_value().tolist() == [10, 10]                    # local s after in-place reduce
    assert synk.gather(s, nd_up=1).tolist() == [[10, 10], [7, 7]]

    synk.broadcast(s, s_init)
    f(x_dat)
    synk.all_reduce(s, op="sum")
    assert synk.gather(s, nd_up=1).tolist() == [[10, 10], [10, 10]]
    assert f.update_modes == ["avg"] and f.output_modes == []
