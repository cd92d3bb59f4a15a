"""The PyTorch baselines' BLAS kernels, chosen as synk chooses its own (docs/runtime.md, "BLAS kernels").

Debian's PyTorch 1.13 calls the system OpenBLAS for its matrix products. On a CPU that OpenBLAS
0.3.21 does not know it runs the SSE3 "Prescott" kernels, which synk replaces at load time with
the ones the CPU's features call for. A baseline left on Prescott would be slower than PyTorch
can be; match_synk() gives it the same correction, by the same route (OpenBLAS's own
re-initialisation with OPENBLAS_CORETYPE), after `import torch` and before any product. Nothing
changes where OpenBLAS chose anything else or the user set OPENBLAS_CORETYPE.
"""
import ctypes
import os
import sys


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cores_for(flags):
    """OPENBLAS_CORETYPE names these CPU flags can run, best first (compiler/cpu/openblas_core.cpp)."""
    cores = []
    avx512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags
    if avx512 and {"avx2", "fma"} <= flags:
        if "avx512_bf16" in flags:
            cores.append("Cooperlake")
        cores.append("SkylakeX")
    if {"avx2", "fma"} <= flags:
        cores.append("Haswell")
    if "avx" in flags:
        cores.append("Sandybridge")
    return cores


def match_synk():
    """Returns the core in use afterwards, or None where this process has no OpenBLAS to correct."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=ctypes.RTLD_GLOBAL)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        quit_, init = lib.gotoblas_dynamic_quit, lib.gotoblas_dynamic_init
    except (OSError, AttributeError):
        return None
    core = lib.openblas_get_corename().decode()
    if "OPENBLAS_CORETYPE" in os.environ or core.lower() != "prescott":
        return core
    for wanted in cores_for(_cpu_flags()):
        os.environ["OPENBLAS_CORETYPE"] = wanted
        quit_()
        init()
        del os.environ["OPENBLAS_CORETYPE"]
        core = lib.openblas_get_corename().decode()
        if core.lower() != "prescott":
            print(f"openblas_core: OpenBLAS had chosen Prescott for this CPU; now {core}, as synk does",
                  file=sys.stderr)
            break
    return core
