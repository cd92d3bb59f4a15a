"""Errors: synk's C++ error hierarchy as Python exceptions with the same messages (a usage error
is a ValueError, a failure inside ranks a RuntimeError), and bad input of every kind to the
Python API giving a clear error that names what was wrong, never a crash or a hang; the group
stays usable afterwards.
"""
import os
import signal

import numpy as np
import pytest

import synk

SOURCE = """
shared w: f32[3] = ones;
fn f(scatter x: f32[n, 3], bcast y: f32[3]) {
  out z: sum = sum(x * y);
  out rows: gather = sum(x, axis=1);
  update w = w + sum(x, axis=0);
}
fn pick(scatter idx: i64[n], bcast table: f32[4]) {
  out v: gather = take(table, idx);
}
"""


@pytest.fixture(scope="module")
def mod(group):
    return synk.compile(SOURCE)


def test_hierarchy():
    assert issubclass(synk.UsageError, ValueError) and issubclass(synk.UsageError, synk.Error)
    assert issubclass(synk.RankError, RuntimeError) and issubclass(synk.RankError, synk.Error)
    assert issubclass(synk.InternalError, RuntimeError)
    assert issubclass(synk.LocatedUserError, synk.UserError) and not issubclass(synk.UserError, ValueError)
    assert issubclass(synk.ScatteredRowError, synk.UsageError)
    assert issubclass(synk.Error, Exception)


def test_program_errors():
    with pytest.raises(synk.LocatedUserError, match=r"prog\.synk:2:.*error") as e:
        synk.compile("fn f(scatter x: f32[n]) {\n  out z: avg = mean(x @ q);\n}", name="prog.synk")
    assert "q" in str(e.value)
    # The first error's place and its own text (the message holds every diagnostic with its caret).
    assert (e.value.line, e.value.column) == (2, 25), (e.value.line, e.value.column)
    assert "q" in e.value.message and "\n" not in e.value.message
    with pytest.raises(synk.UserError, match="no-such-file.synk"):
        synk.load("/nonexistent/no-such-file.synk")
    # A gradient the program cannot have is reported when it compiles, with the others, not at the
    # first call of the function that needs it (functions compile lazily).
    lazy = """shared w: f32[4, 3];
fn fine(scatter x: f32[n, 4]) { out z: gather = x @ w; }
fn train(scatter x: f32[n, 4], scatter y: i64[n]) {
  out g: avg = grad(sum(take(x @ w, y)), w);
}"""
    with pytest.raises(synk.UserError, match=r"lazy\.synk:4:25: error: cannot differentiate take\(x, idx\) where x "
                                             r"has a symbolic number of rows"):
        synk.compile(lazy, name="lazy.synk")


def test_a_reduction_over_the_rows_left_at_avg_is_a_warning_printed_once(group, capfd):
    """`out m = max(x)` over scattered rows averages the ranks' maxima (the default mode avg): a
    warning where the module is compiled, once (not again from the ranks that build it), naming
    the mode to write; the module compiles and runs as written."""
    m = synk.compile("fn f(scatter x: f32[n]) {\n  out m = max(x);\n  out ok: max = max(x);\n}", name="warn.synk")
    out = m.function("f")(np.array([1, 2, 3, 10], dtype="float32"))
    err = capfd.readouterr().err
    assert err.count("warning:") == 1, err
    assert "warn.synk:2:7: warning: output 'm' is a max over each rank's rows" in err, err
    assert "write 'out m: max = ...'" in err, err
    assert (float(out["m"]), float(out["ok"])) == ((2 + 10) / 2, 10.0)


def test_call_usage_errors(mod):
    f = mod.function("f")
    x = synk.data(np.ones((6, 3), "float32"))
    y = np.ones(3, "float32")
    cases = [
        (lambda: f(x), "input 'y' is missing"),
        (lambda: f(x, y, y), "takes 2 inputs, received 3"),
        (lambda: f(x, y, x=x), "given twice"),
        (lambda: f(x, y, bogus=1), "unknown keyword argument 'bogus'"),
        (lambda: f(x, [1.0, 2.0, 3.0]), "received a list, which numpy makes an array of float64; convert it with "
                                        "numpy.asarray"),
        (lambda: f(x, y, batch="rows"), "batch: expected an int"),
        (lambda: f(x, y, batch=slice(0, 4, 2)), "step None or 1"),
        (lambda: f(x, y, batch=slice(-2, 4)), "no negative indexing"),
        (lambda: f(x, y, batch=slice(2, None)), "integer start and stop"),
        (lambda: f(x, y, batch=np.array([True, False])), "np.flatnonzero"),
        (lambda: f(x, y, batch=[0, 1.5]), "index lists hold integers"),
        (lambda: f(x, y, batch=[0, 6]), "out of range"),
        (lambda: f(x, y, batch=7), "count 7 is larger than the 6 rows"),
        (lambda: f(x, y, num_slices=0), "num_slices"),
        (lambda: f(x, y, num_slices=1.5), "num_slices: expected an integer"),
        (lambda: f(x, y, output_subset=["nope"]), "nope"),
        (lambda: f(x, y, output_subset="z"), "write \\['z'\\]"),
        (lambda: f(x, y, output_subset=[]), "the list is empty"),
        (lambda: f(x, y, output_subset=[3]), "expected output names"),
        (lambda: f(x, y, batch_s=[slice(0, 1)] * 3), "exactly 2 selections"),
        (lambda: f(x, np.ones(4, "float32")), "y"),
        # float64 into f32: not safe; the message names the input and the conversion to write
        (lambda: f(x, np.ones(3, "float64")), "input 'y': expected dtype f32 .*float64.*astype\\('float32'\\)"),
        (lambda: f(x, np.ones(3, "complex64")), "complex64 is not supported"),
        (lambda: f(x, None), "received None"),
        (lambda: f(x, 1e40), "1e\\+40 does not fit in f32 \\(it would become inf\\)"),
        (lambda: f(np.ones((2, 3, 1), "float32"), y), "dimensions"),
        (lambda: f(x, [[1, 2], [3]]), "cannot make an array"),
    ]
    for call, pattern in cases:
        with pytest.raises(synk.UsageError, match=pattern):
            call()
    assert np.allclose(f(x, y, output_subset=["z"]), 18)             # still works


def test_conversions_that_work(mod):
    f = mod.function("f")
    x = np.arange(12, dtype=np.int16).reshape(4, 3)                   # int16 converts safely to f32
    assert f(x, y=np.ones(3, "float32"), output_subset=["z"]) == 66  # by name
    with pytest.raises(synk.UsageError, match="force_cast"):
        f(x, [1, 1, 1])                                                # an int64 list: i64 -> f32 is not safe
    assert f(x[::-1], np.array([1, 1, 1], ">f4"), output_subset=["z"]) == 66   # strided, big-endian


def test_weak_python_scalars():
    g = synk.compile("fn g(bcast a: f32, bcast k: i32) { out r: sum = a * cast(k, f32); }").function("g")
    assert g.as_local(0.5, 4) == 2.0                                   # Python scalars take the declared dtype
    with pytest.raises(synk.UsageError):
        g.as_local(0.5, 2.5)                                           # a float is no i32
    with pytest.raises(synk.UsageError, match=r"the integer 1099511627776 is out of range for i32 \[-2147483648"):
        g.as_local(0.5, 2 ** 40)                                       # out of i32's range
    with pytest.raises(synk.UsageError, match="does not fit in f32"):
        g.as_local(1e40, 4)                                            # would become inf
    assert g.as_local(float("inf"), 1) == float("inf")                 # inf itself is kept
    with pytest.raises(synk.UsageError):
        g.as_local(np.float64(0.5), 4)                                 # numpy scalars keep their dtype


def test_bad_value_in_a_scattered_row(mod):
    pick = mod.function("pick")
    table = np.arange(4, dtype="float32")
    # A failure inside the function is the rank's failure, naming the rank and the row among the
    # call's rows; the group stays usable.
    with pytest.raises(synk.RankError, match="rank 0: .*row 1 of the call's 6 scattered rows"):
        pick.as_local(np.array([0, 9, 2, 3, 1, 1]), table)
    for rank, row in [(0, 1), (1, 4)]:
        idx = np.array([0, 1, 2, 3, 1, 1])
        idx[row] = 9
        with pytest.raises(synk.RankError, match=f"rank {rank}: .*row {row} of the call's 6 scattered rows") as e:
            pick(idx, table)
        assert e.value.ranks == [rank] and not e.value.group_lost
    assert np.array_equal(pick(np.array([0, 1, 2, 3, 9, 1]), table, batch=4), [0, 1, 2, 3])


def test_a_minibatch_input_out_of_step_with_batch_s(group):
    """A minibatch input whose axis 0 is the symbol of a sliceable variable's axis 0 must give each
    rank as many rows as batch_s gives it: a UsageError on the master naming both and the length
    to pass (it was a RankError from every rank about the symbol)."""
    m = synk.compile("""
shared data: f32[rows, 4] sliceable;
fn score(minibatch wts: f32[rows]) { out s: sum = sum(sum(data, axis=1) * wts); }
""")
    synk.scatter(m.shared("data"), np.arange(40, dtype=np.float32).reshape(10, 4))
    score = m.function("score")
    for n in [2, 7]:
        with pytest.raises(synk.UsageError, match=r"score: input 'wts' and sliceable shared variable 'data' share "
                                                  r"axis 0 \('rows'\).*give 'wts' 4 rows"):
            score(np.ones(n, np.float32), batch_s=range(0, 2))
    # Ranks hold rows [0, 5) and [5, 10); range(0, 2) takes rows 0-1 and 5-6 of data.
    wts = np.array([1, 2, 3, 4], np.float32)
    expect = sum(w * np.arange(40, dtype=np.float32).reshape(10, 4)[row].sum() for w, row in zip(wts, [0, 1, 5, 6]))
    assert score(wts, batch_s=range(0, 2)) == pytest.approx(expect)


def test_data_errors():
    cases = [
        (lambda: synk.data(np.ones(3, "float16")), "float16 is not supported"),
        (lambda: synk.data(dtype="float32"), "ndim or shape"),
        (lambda: synk.data(ndim=2), "give dtype"),
        (lambda: synk.data(dtype="complex128", ndim=1), "not supported"),
        (lambda: synk.data(dtype="nonsense", ndim=1), "is not a dtype"),
        (lambda: synk.data(np.ones(3), ndim=2), "ndim=2"),
        (lambda: synk.data(np.ones(3), shape=(4,)), "shape"),
        (lambda: synk.data(np.ones(3), oversize=3), "oversize"),
        (lambda: synk.data(np.ones((2, 2)), shape="ab"), "shape must be a sequence of integers"),
        (lambda: synk.data(dtype="f32", shape=(-1, 2)), "negative"),
        (lambda: synk.data(np.ones(3)).set_value(np.ones((2, 2))), "dimensions"),
        (lambda: len(synk.data(np.float32(1))), "0-dimensional"),
        (lambda: synk.data(np.ones(3)).set_length(-1), "length must be >= 0"),
        (lambda: synk.load_npy("/nonexistent.npy"), "nonexistent.npy"),
    ]
    w = synk.compile("shared w: f32[2, 3];\nfn f() { out s: sum = sum(w); }").shared("w")
    cases += [(lambda: synk.data(var=w, dtype="i32"), "dtype i32 differs from the dtype of var 'w', f32"),
              (lambda: synk.data(var=w, ndim=1), "ndim 1 differs from var 'w', which has 2 dimensions")]
    assert synk.data(var=w, dtype="f32", ndim=2, shape=(0, 3)).dtype == np.float32   # agreeing is fine
    for call, pattern in cases:
        with pytest.raises(synk.UsageError, match=pattern):
            call()
    with pytest.raises(IndexError):
        synk.data(np.ones(3))[5]


def test_collective_errors(mod):
    w = mod.shared("w")
    for call, pattern in [
        (lambda: synk.all_reduce(w, "mean"), "op must be one of"),
        (lambda: synk.gather(w, nd_up=2), "nd_up"),
        (lambda: synk.broadcast("w"), "expected a shared variable"),
        (lambda: synk.broadcast([w, w]), "more than once|repeated|twice"),
        (lambda: synk.broadcast([w], np.ones(3, "float32")), "give a list"),
        (lambda: synk.broadcast(w, np.ones(4, "float32")), "w"),
        (lambda: synk.all_reduce(w, algorithm="fastest"), "algorithm must be one of"),
        (lambda: synk.all_reduce(w, num_packs=0), "num_packs"),
        (lambda: synk.get_value(5, w), "rank"),
        (lambda: synk.get_value(w), r"the first argument is the rank .*synk\.get_value\(0, vars\)"),
        (lambda: synk.get_value([w]), "the first argument is the rank"),
        (lambda: synk.set_value(w, np.ones(4, "float32")), r"synk\.set_value\(0, vars, values\)"),
        (lambda: synk.get_value(0), "no shared variables were given"),
        (lambda: synk.set_value(0, w), "no values were given"),
        (lambda: synk.get_value("0", w), "rank: expected an integer"),
        (lambda: mod.shared("nope"), "nope"),
        (lambda: w.set_value(np.ones((3, 1), "float32")), "w"),
    ]:
        with pytest.raises(synk.UsageError, match=pattern):
            call()


def test_argument_types(mod):
    f, w = mod.function("f"), mod.shared("w")
    x = np.ones((2, 3), "float32")
    for call, pattern in [
        (lambda: f(x, x[0], batch=2 ** 70), "out of the range of a 64-bit integer"),
        (lambda: f(x, x[0], batch=True), "batch: expected an int"),
        (lambda: f(x, x[0], batch=np.True_), "batch: expected an int"),          # once taken as 1
        (lambda: f(x, x[0], batch=np.array([2 ** 63 + 3], np.uint64)), r"index 9223372036854775811 at position 0 is out of range"),
        (lambda: f(x, x[0], output_subset=5), "output_subset: expected a list"),
        (lambda: f.build_inputs(x, x[0], oversize="big"), "oversize: expected a number"),
        (lambda: f.build_inputs(x, x[0], force_cast=1), "force_cast: expected True or False"),
        (lambda: w.set_value(np.ones(3, "float32"), rank="1"), "rank: expected an integer"),
        (lambda: synk.all_reduce(w, num_packs="2"), "num_packs: expected an integer"),
        (lambda: synk.data(dtype="f32", shape=[2, "a"]), "shape: expected an integer"),
        (lambda: synk.data(dtype="f32", ndim=99), r"ndim must be in \[0, 16\]"),
        (lambda: synk.fork(2, pin="yes"), "pin: expected True or False"),
        (lambda: synk.fork(2, spin_ns=1.5), "spin_ns: expected an integer"),
        (lambda: synk.fork(2, collective_staging_bytes=-1), "must be >= 0"),
        (lambda: synk.fork(2 ** 40), "n must be in"),
    ]:
        with pytest.raises(synk.UsageError, match=pattern):
            call()
    with pytest.raises(TypeError):          # a plainly typed parameter: pybind11's TypeError
        synk.gather(w, nd_up="1")


def test_group_errors():
    with pytest.raises(synk.UsageError, match="already running"):
        synk.fork(2)
    for call, pattern in [(lambda: synk.fork(-1), "n must be"), (lambda: synk.fork(True), "n must be"),
                          (lambda: synk.fork(2, backend="tpu"), "backend")]:
        synk.close()
        with pytest.raises(synk.UsageError, match=pattern):
            call()
    synk.close()
    f = synk.compile("fn f(scatter x: f32[n]) { out s: sum = sum(x); }").function("f")
    with pytest.raises(synk.UsageError, match=r"call synk::fork\(\) first"):
        f(np.ones(3, "float32"))
    with pytest.raises(synk.UsageError):
        synk.size()
    assert f.as_local(np.ones(3, "float32")) == 3                     # no group needed
    synk.fork(2)                                                      # for the tests after this one


def test_dead_worker_is_a_rank_error(mod):
    f = mod.function("f")
    x, y = synk.data(np.ones((4, 3), "float32")), synk.data(np.ones(3, "float32"))
    os.kill(synk.worker_pid(1), signal.SIGKILL)
    with pytest.raises(synk.RankError, match="rank 1") as e:
        for _ in range(1000):                                         # noticed within a poll slice
            f(x, y)
    assert e.value.group_lost and e.value.ranks == [1] and isinstance(e.value, RuntimeError)
    assert not synk.forked()
    synk.fork(2)                                                      # a fresh group works
    assert f(x, y, output_subset=["z"]) == 12


def test_paths_with_a_nul_byte_are_refused_and_path_objects_are_taken(tmp_path):
    """A str holding a NUL byte once named the shorter path before it (Python's open() refuses
    such a path); load_npy and save_npy take os.PathLike objects as synk.load does."""
    import pathlib
    path = tmp_path / "x.npy"
    d = synk.data(np.arange(3, dtype=np.float32))
    d.save_npy(pathlib.Path(path))                      # a Path, not only a str
    np.testing.assert_array_equal(np.asarray(synk.load_npy(pathlib.Path(path))), np.arange(3, dtype=np.float32))
    for call in (lambda: synk.load_npy(str(path) + "\0.bak"),
                 lambda: d.save_npy(str(path) + "\0.bak"),
                 lambda: synk.load(str(tmp_path / "m.synk") + "\0junk")):
        with pytest.raises(synk.UsageError, match="holds a NUL byte"):
            call()
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]
    # bytes paths, and names that are not UTF-8 (str with surrogate escapes), name the file the OS sees
    d.save_npy(os.fsencode(tmp_path / "b.npy"))
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff.npy")
    d.save_npy(odd)
    np.testing.assert_array_equal(np.asarray(synk.load_npy(odd)), np.load(odd))
    assert sorted(os.listdir(os.fsencode(tmp_path))) == [b"b.npy", b"x.npy", b"\xff.npy"]
