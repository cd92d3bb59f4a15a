"""The collectives on shared variables from Python, against numpy references on fresh random
values: every reduction op on float, integer and bool variables (each algorithm), gather with
nd_up 0 and 1, scatter with every kind of batch, all_gather, set_value/get_value on each rank
(with batch), get_lengths/get_shapes, synk.Data as values, and the collective defaults.
"""
import numpy as np
import pytest

import synk

SOURCE = """
shared a: f64[5];
shared b: f32[2, 3];
shared k: i32[4];
shared flag: bool[3];
shared rows: f32[m, 2] sliceable;
shared ids: i64[m] sliceable;
fn touch() { out s: sum = sum(a); }
"""

NUMPY_OPS = {"avg": np.mean, "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


@pytest.fixture(scope="module")
def mod(group):
    return synk.compile(SOURCE)


def set_per_rank(var, values):
    for r, v in enumerate(values):
        synk.set_value(r, var, v)


@pytest.mark.parametrize("algorithm", ["auto", "rsag", "hierarchical"])
def test_reductions(mod, group, rng, algorithm):
    a, b = mod.shared("a"), mod.shared("b")
    for op, npop in NUMPY_OPS.items():
        va = rng.standard_normal((group, 5))
        vb = rng.standard_normal((group, 2, 3)).astype("float32")
        set_per_rank(a, va)
        set_per_rank(b, vb)
        got_a, got_b = synk.reduce([a, b], op=op, in_place=False, algorithm=algorithm, num_packs=2)
        assert np.allclose(got_a, npop(va, axis=0)) and np.allclose(got_b, npop(vb.astype(np.float64), axis=0), rtol=1e-5)
        assert np.array_equal(a.get_value(), va[0])                       # not in place: unchanged
        synk.reduce(a, op=op)                                              # in place on the master only
        assert np.allclose(a.get_value(), npop(va, axis=0)) and np.array_equal(a.get_value(1), va[1])
        set_per_rank(a, va)
        synk.all_reduce([a, b], op=op, algorithm=algorithm, chunk_bytes=64)
        for r in range(group):
            assert np.allclose(a.get_value(r), npop(va, axis=0))
            assert np.allclose(b.get_value(r), npop(vb.astype(np.float64), axis=0), rtol=1e-5)


@pytest.mark.parametrize("algorithm", ["auto", "rsag", "hierarchical"])
def test_max_and_min_propagate_a_nan_from_any_rank(mod, group, rng, algorithm):
    """As numpy's max/min and the functions' max/min outputs do. Before, a NaN was kept only when
    rank 0 held it (the combine kept its left operand when a comparison with NaN was false)."""
    a = mod.shared("a")
    for nan_rank in range(group):
        va = rng.standard_normal((group, 5))
        va[nan_rank, 1] = np.nan
        va[(nan_rank + 1) % group, 3] = np.nan
        va[0, 4], va[group - 1, 4] = -np.inf, np.inf
        for op, npop in [("max", np.max), ("min", np.min)]:
            set_per_rank(a, va)
            want = npop(va, axis=0)
            assert np.array_equal(synk.reduce(a, op=op, in_place=False, algorithm=algorithm), want, equal_nan=True)
            synk.all_reduce(a, op=op, algorithm=algorithm)
            for r in range(group):
                assert np.array_equal(a.get_value(r), want, equal_nan=True), (op, nan_rank, r)


def test_integer_and_bool_reductions(mod, group, rng):
    k, flag = mod.shared("k"), mod.shared("flag")
    vk = rng.integers(-1000, 1000, size=(group, 4)).astype("int32")
    set_per_rank(k, vk)
    assert np.array_equal(synk.reduce(k, "sum", in_place=False), vk.sum(0))
    assert np.array_equal(synk.reduce(k, "max", in_place=False), vk.max(0))
    with pytest.raises(synk.UsageError, match="avg"):
        synk.all_reduce(k, "avg")
    vf = np.array([[True, False, False], [True, True, False]])[:group]
    set_per_rank(flag, vf)
    assert synk.reduce(flag, "max", in_place=False).tolist() == vf.any(0).tolist()
    synk.all_reduce(flag, "min")
    assert synk.get_value(1, flag).tolist() == vf.all(0).tolist()


def test_scatter_gather(mod, group, rng):
    rows, ids = mod.shared("rows"), mod.shared("ids")
    table = rng.standard_normal((7, 2)).astype("float32")
    labels = np.arange(7, dtype=np.int64) * 10
    synk.scatter([rows, ids], [table, labels])
    split = [7 * r // group for r in range(group + 1)]
    assert synk.get_lengths([rows, ids]) == [[split[r + 1] - split[r] for r in range(group)]] * 2
    assert np.array_equal(synk.gather(rows, nd_up=0), table)
    parts = synk.get_value(1, [rows, ids])
    assert np.array_equal(parts[0], table[split[1]:split[2]]) and np.array_equal(parts[1], labels[split[1]:split[2]])
    for batch, picked in [(4, table[:4]), (slice(2, 6), table[2:6]), ([6, 0, 0, 3], table[[6, 0, 0, 3]]),
                          (np.array([1, 5]), table[[1, 5]]), (synk.data(np.array([3, 2, 1])), table[[3, 2, 1]])]:
        synk.scatter(rows, synk.data(table), batch=batch)                  # a Data value
        assert np.array_equal(synk.gather(rows, nd_up=0), picked)
    synk.all_gather(rows)
    assert synk.get_shapes(rows) == [(3, 2)] * group
    stacked = synk.gather(rows, nd_up=1)
    assert stacked.shape == (group, 3, 2) and np.array_equal(stacked[1], table[[3, 2, 1]])
    synk.scatter(rows, table)                                              # unequal lengths again
    with pytest.raises(synk.UsageError, match="different shapes on different ranks"):
        synk.gather(rows, nd_up=1)


def test_set_value_and_broadcast(mod, group, rng):
    b = mod.shared("b")
    big = rng.standard_normal((5, 2, 3)).astype("float32")
    synk.set_value(1, [b], [big[3]])
    assert np.array_equal(b.get_value(1), big[3]) and np.array_equal(synk.get_value(1, [b])[0], big[3])
    synk.set_value(1, b, big[4], batch=[1, 0])                             # rows of the value, reordered
    assert np.array_equal(b.get_value(1), big[4][[1, 0]])
    with pytest.raises(synk.UsageError, match="expected a value with 2 dimensions|shape"):
        synk.set_value(1, b, big[4], batch=1)                              # one row for a [2, 3] variable
    with pytest.raises(synk.UsageError, match=r"set_value: value for 'b': batch: index 5 is out of bounds"):
        synk.set_value(1, b, big[4], batch=[0, 5])                         # numpy's IndexError before
    with pytest.raises(synk.UsageError, match="negative indices are not rows"):
        synk.set_value(1, b, big[4], batch=[1, -1])                        # numpy would take the last row
    synk.broadcast(b)                                                      # the master's value everywhere
    assert np.array_equal(b.get_value(1), b.get_value(0))
    synk.broadcast([b], [synk.data(big[0])])
    assert all(np.array_equal(v, big[0]) for v in synk.gather(b))
    b.set_value(big[1], rank=1)
    assert np.array_equal(b.get_value(1), big[1]) and b.shape == (2, 3) and b.dtype == np.float32


def test_defaults():
    before = synk.collective_defaults()
    assert before == {"algorithm": "auto", "num_packs": 1, "chunk_bytes": 0, "group_size": 0}
    synk.set_collective_defaults(algorithm="hierarchical", num_packs=3)
    try:
        assert synk.collective_defaults()["algorithm"] == "hierarchical"
        assert synk.collective_defaults()["num_packs"] == 3
    finally:
        synk.set_collective_defaults(algorithm="auto", num_packs=1)
    assert synk.collective_defaults() == before


def test_weighted_average_with_weights_whose_sum_overflows(mod, group, rng):
    """Finite weights are allowed however large: two of 1e308 sum to inf, which made every share
    0 (the result was all zeros). They are now scaled by the largest first."""
    a = mod.shared("a")
    va = rng.standard_normal((group, 5))
    set_per_rank(a, va)
    synk.all_reduce_weighted(a, [1e308] * group)
    for r in range(group):
        assert np.allclose(a.get_value(r), va.mean(axis=0))
    weights = [1e308] + [1.0] * (group - 1)           # one rank outweighs every other
    set_per_rank(a, va)
    synk.all_reduce_weighted(a, weights)
    assert np.allclose(a.get_value(1), va[0])


def test_a_module_made_after_fork_gives_every_rank_what_the_master_loaded(group, tmp_path):
    """The workers used to read load()'s file again at their first use of the module: a file
    changed in between gave them other values than the master's (and a file removed since made
    every collective on the module fail). They now take the master's values."""
    path = tmp_path / "w.npy"
    np.save(path, np.array([1, 2, 3], dtype=np.float32))
    rows = tmp_path / "rows.npy"
    np.save(rows, np.arange(4, dtype=np.float32).reshape(4, 1))
    text = (f'shared w: f32[3] = load("{path}");\nshared c: f32[m, 1] = load("{rows}") sliceable;\n'
            'fn f(scatter x: f32[n]) { out z: sum = sum(x) + sum(w); }\n'
            'fn g() { out t: sum = sum(w) + sum(c); }')
    late = synk.compile(text)
    np.save(path, np.array([100, 200, 300], dtype=np.float32))
    np.save(rows, np.zeros((2, 1), dtype=np.float32))
    f = late.function("f")
    x = synk.data(np.ones(2 * group, dtype=np.float32))
    assert f(x) == pytest.approx(2 * group + 6 * group)   # each rank adds its own sum(w) = 6
    gathered = synk.gather(late.shared("w"), nd_up=1)
    assert np.array_equal(gathered, np.tile([1, 2, 3], (group, 1)))
    path.unlink()
    rows.unlink()                                          # g is compiled on the workers after this
    assert late.function("g")() == pytest.approx(group * (6 + 6))
    synk.all_reduce(late.shared("w"), op="sum")
    assert np.array_equal(late.shared("w").get_value(group - 1), np.array([1, 2, 3]) * group)
