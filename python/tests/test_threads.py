"""Several Python threads using synk at once: calls run without the GIL and are serialised by the
extension's one API lock, so concurrent calls, collectives, Data churn (which talks to the
workers) and compilation from different threads all give correct results and never deadlock.
"""
import threading

import numpy as np

import synk

SOURCE = """
shared acc: f64[3];
fn f(scatter x: f64[n, 3], bcast k: f64) {
  out s: sum = sum(x, axis=0) * k;
  update acc = acc + sum(x, axis=0);
}
"""


def test_concurrent_threads(group):
    m = synk.compile(SOURCE)
    f, acc = m.function("f"), m.shared("acc")
    errors = []

    def caller(seed):
        try:
            rng = np.random.default_rng(seed)
            x_dat = rng.standard_normal((50, 3))
            x = synk.data(x_dat)
            for i in range(150):
                k = float(i % 7)
                rows = rng.integers(0, 50, size=20) if i % 2 else np.arange(50)
                got = f(x, k, batch=rows) if i % 2 else f(x, k)
                assert np.allclose(got, x_dat[rows].sum(0) * k), (seed, i)
        except Exception as e:   # reported by the main thread
            errors.append(e)

    def churn():
        try:
            for i in range(200):
                d = synk.data(np.ones(1000 + i))          # creates and removes shared memory
                d.set_value(np.ones(5000 + i))
                synk.all_reduce(acc, "sum")
                del d
        except Exception as e:
            errors.append(e)

    def compiler():
        try:
            g = synk.compile("fn g(scatter x: f32[n]) { out t: max = max(x); }").function("g")
            assert g(np.arange(9, dtype=np.float32)) == 8
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(s,)) for s in (1, 2)]
    threads += [threading.Thread(target=churn), threading.Thread(target=compiler)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    x = synk.data(np.ones((4, 3)))
    assert np.array_equal(f(x, 2.0), [8, 8, 8])                # the group is fine afterwards
