"""Modules compiled ahead of time, from Python (docs/python.md, "Modules"): `synkc MODEL.synk -o
libMODEL.so` writes a loadable library and synk.load_library gives the same Module interface as
synk.load, with the library's kernels instead of the JIT. Checked here: a library loaded after the
fork (the workers load it themselves) trains bit for bit like the JIT module of the same source,
validation with num_slices included; one loaded before the fork is inherited; the .npy files of
load() initialisers are built in; checkpoints; and every bad library is a UsageError naming what is
wrong. synkc comes from the build tree (SYNK_BUILD_DIR, set by CTest).
"""
import gc
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import synk

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "fashion_mnist" / "mlp.synk"


def synkc():
    build = os.environ.get("SYNK_BUILD_DIR")
    if not build:
        pytest.skip("SYNK_BUILD_DIR is not set (CTest sets it): no synkc to build libraries with")
    path = Path(build) / "tools" / "synkc" / "synkc"
    assert path.is_file(), f"{path} is missing: build the target synkc"
    return path


def build(source, out, *flags):
    result = subprocess.run([str(synkc()), str(source), "-o", str(out), *flags], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot")
    (d / "other").mkdir()
    # The default architectures when NVRTC is there: the library carries GPU images and runs on the CPU here.
    return {"mlp": build(MLP, d / "libmlp.so"),
            "evaluate_only": build(MLP, d / "other" / "libmlp.so", "--fn", "evaluate", "--cuda-arch", "none")}


def train(module, images, labels, steps=3):
    step = module.train_step("train")
    for s in range(steps):
        loss = step(images, labels, batch=np.arange(s * 50, s * 50 + 64))
    return float(loss), [module.shared(n).get_value(r) for n in ("w1", "b3", "w1_velocity")
                         for r in range(synk.size())]


def test_a_library_loaded_after_fork_trains_like_the_jit_bit_for_bit(group, rng, libraries):
    images = synk.data(rng.integers(0, 256, (300, 784), dtype=np.uint8))
    labels = synk.data(rng.integers(0, 10, 300).astype(np.int64))
    aot = synk.load_library(libraries["mlp"])
    jit = synk.load(MLP)
    assert aot.function_names == jit.function_names
    assert aot.train_step_names == ["train", "train_device"]
    loss_aot, state_aot = train(aot, images, labels)
    loss_jit, state_jit = train(jit, images, labels)
    assert loss_aot == loss_jit
    for a, b in zip(state_aot, state_jit):
        assert np.array_equal(a, b)
    for slices in (1, 3):
        got = aot.function("evaluate")(images, labels, num_slices=slices)
        want = jit.function("evaluate")(images, labels, num_slices=slices)
        assert got["loss"] == want["loss"] and got["accuracy"] == want["accuracy"]


def test_loading_again_returns_the_same_module_and_checkpoints_work(group, libraries, tmp_path):
    first = synk.load_library(libraries["mlp"])
    again = synk.load_library(str(libraries["mlp"]))
    assert first == again and hash(first) == hash(again) and len({first, again}) == 1
    assert first != synk.compile("fn f(bcast x: f32) { out y: none = x; }") and first != "mlp"
    first.shared("b3").set_value_all(np.arange(10, dtype=np.float32))
    assert np.array_equal(again.shared("b3").get_value(1), np.arange(10, dtype=np.float32))
    first.save_checkpoint(tmp_path / "ckpt", metadata={"epoch": 2})
    first.shared("b3").set_value_all(np.zeros(10, dtype=np.float32))
    assert again.load_checkpoint(tmp_path / "ckpt") == {"epoch": "2"}
    assert np.array_equal(first.shared("b3").get_value(1), np.arange(10, dtype=np.float32))


def test_every_handle_of_a_library_shares_its_step_index(group, rng, libraries, tmp_path):
    # The library's variables outlive its handles, and so does the count of steps they took: a
    # second handle, or one loaded after the first was dropped, reads and checkpoints that count.
    images = synk.data(rng.integers(0, 256, (300, 784), dtype=np.uint8))
    labels = synk.data(rng.integers(0, 10, 300).astype(np.int64))
    first = synk.load_library(libraries["mlp"])
    before = first.train_step("train").step_index
    train(first, images, labels, steps=2)
    again = synk.load_library(libraries["mlp"])
    assert again.train_step("train").step_index == before + 2
    again.save_checkpoint(tmp_path / "ckpt")
    del first, again
    gc.collect()
    reloaded = synk.load_library(libraries["mlp"])
    assert reloaded.train_step("train").step_index == before + 2
    train(reloaded, images, labels, steps=1)
    reloaded.load_checkpoint(tmp_path / "ckpt")
    assert synk.load_library(libraries["mlp"]).train_step("train").step_index == before + 2


def test_bad_libraries_are_usage_errors(group, libraries, tmp_path):
    with pytest.raises(synk.UsageError, match="no such file"):
        synk.load_library(tmp_path / "libnothing.so")
    (tmp_path / "text.so").write_text("not an ELF file\n")
    with pytest.raises(synk.UsageError, match="cannot load"):
        synk.load_library(tmp_path / "text.so")
    with pytest.raises(synk.UsageError, match="is not a synk library"):
        synk.load_library(synk._synk.__file__)
    with pytest.raises(synk.UsageError, match=r"a .synk source \(synk.load"):
        synk.load_library(MLP)
    with pytest.raises(synk.UsageError, match="not a regular file"):
        synk.load_library(tmp_path)
    # Another library holding a module of the same name: refused, naming the one already loaded.
    synk.load_library(libraries["mlp"])
    with pytest.raises(synk.UsageError, match="module 'mlp'.*already loaded from '.*libmlp.so'"):
        synk.load_library(libraries["evaluate_only"])
    with pytest.raises(synk.UsageError, match="no function named 'nope'"):
        synk.load_library(libraries["mlp"]).function("nope")


def test_a_library_with_some_functions_and_embedded_data(tmp_path):
    # A fresh interpreter: the library is loaded before the fork (workers inherit it), its module
    # has a load() initialiser whose file is deleted before the run (the library holds a copy),
    # and a function left out with --fn is a UsageError saying so.
    np.save(tmp_path / "w.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
    (tmp_path / "model.synk").write_text(textwrap.dedent("""
        shared w: f32[3, 2] = load("w.npy");
        fn project(scatter x: f32[n, 3]) { out y: gather = x @ w; }
        fn total(scatter x: f32[n, 3]) { out s: sum = sum(x @ w); }
    """))
    lib = build(tmp_path / "model.synk", tmp_path / "libmodel.so", "--fn", "project", "--cuda-arch", "none")
    (tmp_path / "w.npy").unlink()
    script = textwrap.dedent(f"""
        import numpy as np, synk
        m = synk.load_library({str(lib)!r})
        project = m.function("project")
        synk.fork(2)
        x = np.arange(15, dtype=np.float32).reshape(5, 3)
        assert np.array_equal(project(x), x @ np.arange(6, dtype=np.float32).reshape(3, 2))
        try:
            m.function("total")
        except synk.UsageError as e:
            assert "left out of this artifact" in str(e), e
        else:
            raise AssertionError("no error for a function left out with --fn")
        synk.close()
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_the_example_of_python_md_runs(tmp_path):
    text = (REPO / "docs" / "python.md").read_text()
    section = text[text.index("A loadable library is built once"):]
    code = section[section.index("```python\n") + 10:section.index("```", section.index("```python\n") + 10)]
    code = code.replace('"synkc"', repr(str(synkc()))).replace('"libmlp.so"', repr(str(tmp_path / "libmlp.so")))
    code += "\nimport numpy as np\nx = np.zeros((8, 784), np.uint8)\nprint(float(step(x, np.zeros(8, np.int64))))\nsynk.close()\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert abs(float(result.stdout.split()[-1]) - 8 * np.log(10)) < 1.0   # the loss sum of 8 rows near chance
