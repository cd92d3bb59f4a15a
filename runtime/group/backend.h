// Which device a process group computes on. fork() takes a Backend (cpu, gpu or auto); the choice
// rests on the fork-safe GPU probe (rt::cuda::cuda_status(): cuInit runs in a short-lived child
// process, so the master never holds a CUDA context before it forks). The chosen backend is
// recorded process-wide before the workers are forked, so every rank (the master included) can
// ask active_backend() which device its compiled functions must run on; a GPU rank r computes on
// GPU r % device_count (several ranks may share one GPU).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace synk::rt {

enum class Backend : uint8_t { Cpu, Gpu, Auto };

const char* backend_name(Backend backend);   // "cpu", "gpu", "auto"

// What the probe found: whether a GPU is usable here, and if not, why (one line).
struct GpuProbe {
  bool usable = false;
  std::string reason;
  int device_count = 0;
};
// The fork-safe probe (computed once per process). Never throws.
GpuProbe probe_gpus();
// Tests: replaces the probe's answer (std::nullopt: the real probe again), so that the GPU path
// of the runtime runs on the CUDA emulator. The CUDA-initialised-before-fork check is skipped too.
void override_gpu_probe_for_testing(std::optional<GpuProbe> probe);

// The backend a group of `nranks` ranks will use for `requested`, and why the CPU when "auto"
// did not pick the GPU. Throws UsageError for Backend::Gpu when no GPU is usable (naming the
// probe's reason) or when this process initialised CUDA already (its workers could not use it).
struct GroupBackend {
  Backend backend = Backend::Cpu;
  std::string reason;      // why the CPU under Backend::Auto; empty otherwise
  int device_count = 0;    // GPUs the ranks share (Backend::Gpu)
};
GroupBackend choose_group_backend(Backend requested, int nranks);

// The GPU ordinal rank `rank` computes on.
inline int gpu_for_rank(int rank, int device_count) { return device_count > 0 ? rank % device_count : 0; }

// The backend of the group this process is a rank of; Backend::Cpu when it is in none.
Backend active_backend();
// Set by ProcessGroup (before forking, so workers inherit it; back to Cpu when it closes).
void set_active_backend(Backend backend);

}  // namespace synk::rt
