# lit configuration for synk: every .synk and .test file under test/ is a test whose RUN lines
# call %synkc and check its output with FileCheck. GPU tests say `REQUIRES: cuda-gpu` and are
# reported UNSUPPORTED (with the reason printed below) where no GPU is present.
import os
import subprocess
import sys
import lit.formats

config.name = "synk"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".synk", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.synk_binary_dir, "test")

config.substitutions.append(("%synkc", config.synkc))
# The Python that runs lit (CTest passes the one with numpy) for generators in Inputs/.
config.substitutions.append(("%{python}", sys.executable))
config.substitutions.append(("%examples", os.path.join(config.synk_source_dir, "examples")))
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, os.path.dirname(config.synkc), config.environment.get("PATH", "")])
# Kernel cache per test run, so tests never see a stale user cache.
config.environment["SYNK_CACHE_DIR"] = os.path.join(config.test_exec_root, "kernel-cache")

if config.have_cuda_toolkit:
    config.available_features.add("cuda-toolkit")

def _gpu_present():
    try:
        import ctypes
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        return cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False

if _gpu_present():
    config.available_features.add("cuda-gpu")
else:
    lit_config.note("no CUDA GPU found (libcuda.so.1 missing or no device): tests marked "
                    "'REQUIRES: cuda-gpu' are skipped")

# Ahead-of-time artifacts (test/aot): a C++ compiler, synk's headers and what a program links
# after a bundled libNAME.a (asked from synkc, so the tests link what users are told to).
config.substitutions.append(("%synk_include", config.synk_source_dir))
config.substitutions.append(("%cxx", os.environ.get("CXX", "c++")))
try:
    _aot_link_flags = subprocess.run([config.synkc, "--print-link-flags"], capture_output=True,
                                     text=True, check=True).stdout.strip()
except (OSError, subprocess.CalledProcessError):
    _aot_link_flags = "--synkc-print-link-flags-failed"
config.substitutions.append(("%aot_link_flags", _aot_link_flags))
