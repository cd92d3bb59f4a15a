// The backend choice of a process group (see backend.h).
#include "runtime/group/backend.h"

#include <mutex>

#include <fmt/format.h>

#include "gpu/driver.h"
#include "base/enum_names.h"
#include "base/errors.h"

namespace synk::rt {

namespace {
std::mutex probe_mutex;
std::optional<GpuProbe> probe_override;
Backend g_active_backend = Backend::Cpu;
constexpr EnumName<Backend> kBackendNames[] = {{Backend::Cpu, "cpu"}, {Backend::Gpu, "gpu"}, {Backend::Auto, "auto"}};
}  // namespace

const char* backend_name(Backend backend) { return enum_name(kBackendNames, backend, "unknown"); }

GpuProbe probe_gpus() {
  {
    std::lock_guard lock(probe_mutex);
    if (probe_override) return *probe_override;
  }
  const cuda::CudaStatus& status = cuda::cuda_status();
  GpuProbe probe;
  probe.usable = status.available && status.device_count > 0;
  probe.reason = probe.usable ? "" : (status.reason.empty() ? "the CUDA driver reports no device" : status.reason);
  probe.device_count = probe.usable ? status.device_count : 0;
  return probe;
}

void override_gpu_probe_for_testing(std::optional<GpuProbe> probe) {
  std::lock_guard lock(probe_mutex);
  probe_override = std::move(probe);
}

GroupBackend choose_group_backend(Backend requested, int nranks) {
  GroupBackend choice;
  if (requested == Backend::Cpu) return choice;
  if (requested != Backend::Gpu && requested != Backend::Auto)
    throw UsageError(fmt::format("fork: backend {} is not one of Backend::Cpu, Backend::Gpu, Backend::Auto",
                                 int(requested)));
  bool overridden = false;
  {
    std::lock_guard lock(probe_mutex);
    overridden = probe_override.has_value();
  }
  GpuProbe probe = probe_gpus();
  std::string why_not = probe.usable ? "" : "no CUDA GPU: " + probe.reason;
  // A CUDA context does not survive fork(): a master that initialised the driver (a GPU group
  // ran in this process before, or the program used CUDA itself) cannot have GPU workers.
  if (why_not.empty() && nranks > 1 && !overridden && cuda::cuda_initialized_here())
    why_not = "CUDA was initialised in this process before the fork (an earlier GPU group, or direct use of "
              "CUDA), and forked workers cannot use it; start GPU groups from a process that has not used CUDA";
  if (why_not.empty()) {
    choice.backend = Backend::Gpu;
    choice.device_count = probe.device_count;
    return choice;
  }
  if (requested == Backend::Gpu) throw UsageError("fork: Backend::Gpu: " + why_not);
  choice.reason = why_not;
  return choice;
}

Backend active_backend() { return g_active_backend; }
void set_active_backend(Backend backend) { g_active_backend = backend; }

}  // namespace synk::rt
