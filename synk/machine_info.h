// What synk finds on this machine, as ordered (key, text) pairs: the CPU and the CPUs this
// process may use, the JIT's target, the BLAS and its kernels (and whether synk corrected
// OpenBLAS's choice), oneDNN and its instruction set, the GPU backend's verdict, /dev/shm, and
// the kernel cache. For a user who wonders why synk is slow or where it will run, and for bug
// reports: `synkc info` prints it, Python's `synk.info()` returns it as a dict. Reads only;
// starts no process group and initialises no GPU.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace synk {

// Keys, in order: "synk", "cpu", "vectors", "usable_cpus", "jit_target", "blas", "onednn", "gpu",
// "shared_memory", "kernel_cache".
std::vector<std::pair<std::string, std::string>> machine_info();

}  // namespace synk
