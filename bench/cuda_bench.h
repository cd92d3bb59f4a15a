// What the GPU benchmarks share (header-only, bench use only): on a machine without a usable CUDA
// GPU they print one "skipped: no CUDA GPU (<reason>)" line and exit 0, so that scripts that run
// every benchmark (scripts/gpu-check.sh) pass on CPU-only machines.
#pragma once

#include <string>

#include <fmt/format.h>

#include "gpu/driver.h"

namespace synk::bench {

// True, after printing why, where there is no CUDA GPU to benchmark.
inline bool skip_without_gpu() {
  std::string reason;
  if (rt::cuda::cuda_available(&reason)) return false;
  fmt::print("skipped: no CUDA GPU ({})\n", reason);
  return true;
}

}  // namespace synk::bench
