"""synk.info(): what synk finds on this machine (synk/machine_info.h), the dict `synkc info` prints.
Checks its keys and their order, values that must hold on any machine CI runs on, that it works
before and after fork() without starting or disturbing a group, and that the BLAS kernels are not
OpenBLAS's SSE3 fallback on a CPU with AVX (docs/runtime.md, "BLAS kernels")."""
import os
import re

import synk

KEYS = ["synk", "cpu", "vectors", "usable_cpus", "jit_target", "blas", "onednn", "gpu", "shared_memory",
        "kernel_cache"]


def check(info):
    assert list(info) == KEYS
    assert info["synk"] == synk.__version__
    assert re.match(r"\d+ CPUs? \(fork\(0\)", info["usable_cpus"])
    assert int(info["usable_cpus"].split()[0]) == len(os.sched_getaffinity(0))
    assert re.search(r", cpu [\w.-]+ \(LLVM 14", info["jit_target"])
    assert re.match(r"\d+\.\d+\.\d+ runtime=\w+, isa \w+", info["onednn"])
    assert re.match(r"(not usable: .+|\d+ GPUs? usable)$", info["gpu"])
    assert re.match(r"[\d.]+ GiB free in /dev/shm", info["shared_memory"])
    assert info["kernel_cache"].startswith("/")
    if "avx" in info["vectors"].split():
        assert "kernels: Prescott" not in info["blas"], info["blas"]


def test_info_before_and_after_fork():
    before = synk.info()
    check(before)
    assert not synk.forked()
    synk.fork(2)
    try:
        after = synk.info()
        check(after)
        assert after["blas"] == before["blas"]   # the ranks inherit the kernels chosen at load time
        assert synk.size() == 2
    finally:
        synk.close()
