// `synkc info`: what synk finds on this machine, for a user who wonders why it is slow or where
// it will run, and for bug reports: the CPU and the CPUs this process may use (fork(0) starts one
// rank per CPU), what the JIT compiles for, the BLAS and its kernels (and whether synk had to
// correct OpenBLAS's choice), oneDNN and its instruction set, the GPU backend's verdict, the
// room in /dev/shm, and the kernel cache. Reads only; starts no process group.
#include <sched.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "compiler/backend/kernel_cache.h"
#include "compiler/cpu/openblas_core.h"
#include "compiler/dnn/dnn.h"
#include "compiler/llvm/jit.h"
#include "runtime/group/backend.h"
#include "tools/synkc/driver.h"

namespace synkc {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

std::string vector_features() {
  const synk::compiler::CpuVectorFeatures f = synk::compiler::detect_cpu_vector_features();
  std::string out;
  auto add = [&](bool has, const char* name) {
    if (has) out += out.empty() ? name : fmt::format(" {}", name);
  };
  add(f.avx, "avx");
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512, "avx512");
  add(f.avx512_bf16, "avx512_bf16");
  return out.empty() ? "none of avx, avx2, fma, avx512" : out;
}

int usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return 0;
  return CPU_COUNT(&mask);
}

std::string blas_line() {
  const synk::compiler::OpenBlasCoreReport& blas = synk::compiler::ensure_openblas_core();
  if (!blas.is_openblas) return "not OpenBLAS (no run-time kernel choice to check)";
  std::string line = fmt::format("{}; kernels: {}", blas.config.empty() ? "OpenBLAS" : blas.config, blas.in_use);
  if (blas.switched)
    line += fmt::format(" (OpenBLAS chose {} for {}; synk switched them: docs/runtime.md, \"BLAS kernels\")",
                        blas.chosen_by_library, synk::compiler::cpu_identity());
  return line;
}

std::string shm_line() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return "/dev/shm cannot be read: shared memory is unavailable";
  const double gib = double(fs.f_bavail) * double(fs.f_frsize) / double(1ull << 30);
  return fmt::format("{:.1f} GiB free in /dev/shm (inputs and collectives' staging live there)", gib);
}

std::string cache_line() {
  synk::compiler::KernelCache cache;
  const std::string refusal = cache.refusal();
  return refusal.empty() ? cache.dir() : fmt::format("{} (not used: {})", cache.dir(), refusal);
}

}  // namespace

int run_info(const DriverOptions&) {
  const int cpus = usable_cpus();
  const synk::compiler::JitTarget& jit = synk::compiler::host_target();
  const synk::rt::GpuProbe gpu = synk::rt::probe_gpus();
  std::cout << "synk " << SYNK_VERSION << "\n";
  const std::string identity = synk::compiler::cpu_identity();   // "this CPU (family F, model M)"
  const size_t open = identity.find('('), close = identity.rfind(')');
  std::cout << "CPU:          " << cpu_model_name()
            << (open != std::string::npos && close > open ? ", " + identity.substr(open + 1, close - open - 1) : "")
            << "\n";
  std::cout << "  vectors:    " << vector_features() << "\n";
  std::cout << "  usable:     " << cpus << " CPU" << (cpus == 1 ? "" : "s")
            << " (fork(0) on the CPU backend starts one rank per CPU)\n";
  std::cout << "JIT target:   " << jit.triple << ", cpu " << jit.cpu << " (" << jit.compiler_version << ")\n";
  std::cout << "BLAS:         " << blas_line() << "\n";
  std::cout << "oneDNN:       " << synk::compiler::dnn::onednn::version_text() << ", isa " << synk::compiler::dnn::onednn::isa_text() << "\n";
  std::cout << "GPU backend:  "
            << (gpu.usable ? fmt::format("{} GPU{} usable", gpu.device_count, gpu.device_count == 1 ? "" : "s")
                           : fmt::format("not usable: {}", gpu.reason))
            << "\n";
  std::cout << "shared mem:   " << shm_line() << "\n";
  std::cout << "kernel cache: " << cache_line() << "\n";
  return kOk;
}

}  // namespace synkc
