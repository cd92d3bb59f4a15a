// machine_info(): see machine_info.h.
#include "synk/machine_info.h"

#include <sched.h>

#include <cstdint>
#include <fstream>

#include <fmt/format.h>

#include "compiler/backend/kernel_cache.h"
#include "compiler/cpu/openblas_core.h"
#include "compiler/dnn/dnn.h"
#include "compiler/llvm/jit.h"
#include "runtime/group/backend.h"
#include "runtime/group/process_group.h"
#include "runtime/group/shm.h"

namespace synk {

namespace {

std::string cpu_line() {
  std::string model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
      break;
    }
  const std::string family_model = compiler::cpu_family_model();
  return family_model.empty() ? model : fmt::format("{}, {}", model, family_model);
}

std::string vector_features() {
  const compiler::CpuVectorFeatures f = compiler::detect_cpu_vector_features();
  std::vector<const char*> names;
  if (f.avx) names.push_back("avx");
  if (f.avx2) names.push_back("avx2");
  if (f.fma) names.push_back("fma");
  if (f.avx512) names.push_back("avx512");
  if (f.avx512_bf16) names.push_back("avx512_bf16");
  return names.empty() ? "none of avx, avx2, fma, avx512" : fmt::format("{}", fmt::join(names, " "));
}

// As fork(0) counts them (ProcessGroup::start).
std::string usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) CPU_SET(0, &mask);
  const size_t n = rt::allowed_cpus(mask).size();
  return fmt::format("{} CPU{} (fork(0) on the CPU backend starts one rank per CPU)", n, n == 1 ? "" : "s");
}

std::string blas_line() {
  const compiler::OpenBlasCoreReport& blas = compiler::ensure_openblas_core();
  if (!blas.is_openblas) return "not OpenBLAS (no run-time kernel choice to check)";
  std::string line = fmt::format("{}; kernels: {}", blas.config.empty() ? "OpenBLAS" : blas.config, blas.in_use);
  if (blas.switched)
    line += fmt::format(" (OpenBLAS chose {} for this CPU ({}); synk switched them: docs/runtime.md, \"BLAS kernels\")",
                        blas.chosen_by_library, compiler::cpu_family_model());
  return line;
}

std::string gpu_line() {
  const rt::GpuProbe gpu = rt::probe_gpus();
  if (!gpu.usable) return fmt::format("not usable: {}", gpu.reason);
  return fmt::format("{} GPU{} usable", gpu.device_count, gpu.device_count == 1 ? "" : "s");
}

// What a segment is checked against when it is created (shm::free_space: SYNK_SHM_LIMIT_BYTES included).
std::string shm_line() {
  try {
    const rt::shm::Space space = rt::shm::free_space();
    if (space.free_bytes == INT64_MAX) return "/dev/shm cannot be read (statvfs failed): free space unknown";
    const double gib = double(space.free_bytes) / double(1ull << 30);
    return fmt::format("{:.1f} GiB free in /dev/shm{} (inputs and collectives' staging live there)", gib,
                       space.limit >= 0 ? fmt::format(" (limited by SYNK_SHM_LIMIT_BYTES={})", space.limit) : "");
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string cache_line() {
  compiler::KernelCache cache;
  const std::string refusal = cache.refusal();
  return refusal.empty() ? cache.dir() : fmt::format("{} (not used: {})", cache.dir(), refusal);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> machine_info() {
  const compiler::JitTarget& jit = compiler::host_target();
  return {
      {"synk", SYNK_VERSION},
      {"cpu", cpu_line()},
      {"vectors", vector_features()},
      {"usable_cpus", usable_cpus()},
      {"jit_target", fmt::format("{}, cpu {} ({})", jit.triple, jit.cpu, jit.compiler_version)},
      {"blas", blas_line()},
      {"onednn", fmt::format("{}, isa {}", compiler::dnn::onednn::version_text(), compiler::dnn::onednn::isa_text())},
      {"gpu", gpu_line()},
      {"shared_memory", shm_line()},
      {"kernel_cache", cache_line()},
  };
}

}  // namespace synk
