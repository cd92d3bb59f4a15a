// Loading the CUDA driver with dlopen, the fork-safe availability probe, error texts, the
// per-process device binding and growable device buffers (see cuda_driver.h).
#include "gpu/driver.h"

#include "gpu/dl.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace synk::rt::cuda {
namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

struct LoadedDriver {
  DriverApi api;
  std::string library;
  std::string error;   // non-empty: loading or cuInit failed
  int device_count = 0;
  int driver_version = 0;
};

// Resolves every entry point; a missing one is a load failure naming it.
bool resolve(void* handle, DriverApi& api, std::string* error) {
  SymbolTable table(handle, "the CUDA driver");
  auto get = [&](auto& fn, std::initializer_list<const char*> names) { table.resolve(fn, names); };
  get(api.cuInit, {"cuInit"});
  get(api.cuDriverGetVersion, {"cuDriverGetVersion"});
  get(api.cuDeviceGetCount, {"cuDeviceGetCount"});
  get(api.cuDeviceGet, {"cuDeviceGet"});
  get(api.cuDeviceGetName, {"cuDeviceGetName"});
  get(api.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  get(api.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"});
  get(api.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  get(api.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  get(api.cuCtxSetCurrent, {"cuCtxSetCurrent"});
  get(api.cuCtxSynchronize, {"cuCtxSynchronize"});
  get(api.cuMemGetInfo, {"cuMemGetInfo_v2"});
  get(api.cuMemAlloc, {"cuMemAlloc_v2"});
  get(api.cuMemFree, {"cuMemFree_v2"});
  get(api.cuMemHostAlloc, {"cuMemHostAlloc"});
  get(api.cuMemFreeHost, {"cuMemFreeHost"});
  get(api.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
  get(api.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
  get(api.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
  get(api.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"});
  get(api.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"});
  get(api.cuMemsetD8Async, {"cuMemsetD8Async"});
  get(api.cuStreamCreate, {"cuStreamCreate"});
  get(api.cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"});
  get(api.cuStreamSynchronize, {"cuStreamSynchronize"});
  get(api.cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  get(api.cuModuleUnload, {"cuModuleUnload"});
  get(api.cuModuleGetFunction, {"cuModuleGetFunction"});
  get(api.cuLaunchKernel, {"cuLaunchKernel"});
  get(api.cuEventCreate, {"cuEventCreate"});
  get(api.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
  get(api.cuEventRecord, {"cuEventRecord"});
  get(api.cuEventSynchronize, {"cuEventSynchronize"});
  get(api.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  get(api.cuGetErrorName, {"cuGetErrorName"});
  get(api.cuGetErrorString, {"cuGetErrorString"});
  if (!table.ok()) *error = table.error();
  return table.ok();
}

// Loads and initialises the driver in this process; the result (success or the reason) is kept.
LoadedDriver load_driver() {
  LoadedDriver d;
  if (env_flag("SYNK_DISABLE_CUDA")) {
    d.error = "disabled by SYNK_DISABLE_CUDA";
    return d;
  }
  void* handle = open_cuda_library("libcuda.so.1", "", &d.error, &d.library);
  if (!handle) return d;
  if (!resolve(handle, d.api, &d.error)) return d;
  if (CUresult r = d.api.cuInit(0); r != kCudaSuccess) {
    d.error = "cuInit failed: " + cuda_error_text(r);
    return d;
  }
  d.api.cuDriverGetVersion(&d.driver_version);
  if (CUresult r = d.api.cuDeviceGetCount(&d.device_count); r != kCudaSuccess) {
    d.error = "cuDeviceGetCount failed: " + cuda_error_text(r);
    return d;
  }
  if (d.device_count <= 0) d.error = "the CUDA driver reports no device";
  return d;
}

std::once_flag driver_once;
std::atomic<LoadedDriver*> loaded_driver{nullptr};   // set once; never freed (the driver stays loaded)

LoadedDriver& driver_in_process() {
  std::call_once(driver_once, [] { loaded_driver.store(new LoadedDriver(load_driver()), std::memory_order_release); });
  return *loaded_driver.load(std::memory_order_acquire);
}

// The driver when cuda_driver() already ran in this process, else null (never loads it).
const LoadedDriver* driver_if_loaded() { return loaded_driver.load(std::memory_order_acquire); }

// Compute capabilities (major*10+minor) of every device, or empty on any failure.
std::vector<int> device_sms(const LoadedDriver& d) {
  std::vector<int> sms;
  for (int i = 0; i < d.device_count; ++i) {
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (d.api.cuDeviceGet(&dev, i) != kCudaSuccess ||
        d.api.cuDeviceGetAttribute(&major, int(DeviceAttribute::ComputeCapabilityMajor), dev) != kCudaSuccess ||
        d.api.cuDeviceGetAttribute(&minor, int(DeviceAttribute::ComputeCapabilityMinor), dev) != kCudaSuccess)
      return {};
    sms.push_back(major * 10 + minor);
  }
  return sms;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    size_t tab = text.find(separator, start);
    fields.push_back(text.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

// The probe runs in a child; its answer comes back as one line of tab-separated fields:
// ok, device count, driver version, comma-separated SMs, library path, reason.
CudaStatus probe_in_child() {
  CudaStatus status;
  int fds[2];
  if (pipe(fds) != 0) {
    status.reason = fmt::format("cannot probe for CUDA: pipe() failed: {}", std::strerror(errno));
    return status;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    status.reason = fmt::format("cannot probe for CUDA: fork() failed: {}", std::strerror(errno));
    return status;
  }
  if (pid == 0) {
    close(fds[0]);
    LoadedDriver d = load_driver();
    std::string sms;
    if (d.error.empty())
      for (int sm : device_sms(d)) sms += (sms.empty() ? "" : ",") + std::to_string(sm);
    std::string line = fmt::format("{}\t{}\t{}\t{}\t{}\t{}", d.error.empty() ? 1 : 0, d.device_count, d.driver_version, sms,
                                   d.library, d.error);
    for (char& c : line) if (c == '\n') c = ' ';
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = write(fds[1], line.data() + off, line.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[512];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) { text.append(buf, size_t(n)); continue; }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
  std::vector<std::string> f = split(text, '\t');
  if (f.size() != 6) {
    status.reason = WIFSIGNALED(wstatus)
                        ? fmt::format("the CUDA probe process died with signal {}", WTERMSIG(wstatus))
                        : "the CUDA probe process gave no answer";
    return status;
  }
  status.available = f[0] == "1";
  status.device_count = std::atoi(f[1].c_str());
  status.driver_version = std::atoi(f[2].c_str());
  for (const std::string& sm : split(f[3], ','))
    if (!sm.empty()) status.device_sm.push_back(std::atoi(sm.c_str()));
  status.library = f[4];
  status.reason = f[5];
  if (status.available && int(status.device_sm.size()) != status.device_count) {
    status.available = false;
    status.reason = "the CUDA probe could not read every device's compute capability";
  }
  return status;
}

}  // namespace

void* open_cuda_library(const char* soname, std::string_view extra_dirs, std::string* error, std::string* path) {
  std::vector<std::string> tried;
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("SYNK_CUDA_LIB_DIR"); dir && *dir) candidates.push_back(fmt::format("{}/{}", dir, soname));
  candidates.push_back(soname);
  size_t start = 0;
  while (start < extra_dirs.size()) {
    size_t end = extra_dirs.find(':', start);
    if (end == std::string_view::npos) end = extra_dirs.size();
    if (end > start) candidates.push_back(fmt::format("{}/{}", extra_dirs.substr(start, end - start), soname));
    start = end + 1;
  }
  for (const std::string& c : candidates) {
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      if (path) *path = c;
      return h;
    }
    tried.push_back(dl_error());
  }
  if (error) {
    *error = tried.front();
    for (size_t i = 1; i < tried.size(); ++i) *error += "; " + tried[i];
  }
  return nullptr;
}

const CudaStatus& cuda_status() {
  static const CudaStatus status = [] {
    if (const LoadedDriver* driver_state = driver_if_loaded()) {   // already initialised here: no fork needed
      CudaStatus s;
      s.available = driver_state->error.empty();
      s.reason = driver_state->error;
      s.device_count = driver_state->device_count;
      s.driver_version = driver_state->driver_version;
      s.library = driver_state->library;
      if (s.available) s.device_sm = device_sms(*driver_state);
      return s;
    }
    if (env_flag("SYNK_DISABLE_CUDA")) {
      CudaStatus s;
      s.reason = "disabled by SYNK_DISABLE_CUDA";
      return s;
    }
    return probe_in_child();
  }();
  return status;
}

bool cuda_available(std::string* reason) {
  const CudaStatus& s = cuda_status();
  if (reason) *reason = s.reason;
  return s.available;
}

const DriverApi& cuda_driver() {
  LoadedDriver& d = driver_in_process();
  if (!d.error.empty()) throw CudaError("CUDA is not usable in this process: " + d.error, -1);
  return d.api;
}

bool cuda_initialized_here() { return driver_if_loaded() != nullptr; }

std::string cuda_error_name(CUresult code) {
  const LoadedDriver* driver_state = driver_if_loaded();
  if (driver_state && driver_state->api.cuGetErrorName) {
    const char* name = nullptr;
    if (driver_state->api.cuGetErrorName(code, &name) == kCudaSuccess && name) return name;
  }
  switch (code) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return fmt::format("CUDA error {}", code);
  }
}

std::string cuda_error_text(CUresult code) {
  std::string name = cuda_error_name(code);
  const LoadedDriver* driver_state = driver_if_loaded();
  if (driver_state && driver_state->api.cuGetErrorString) {
    const char* text = nullptr;
    if (driver_state->api.cuGetErrorString(code, &text) == kCudaSuccess && text) return fmt::format("{} ({})", name, text);
  }
  return name;
}

void cuda_check(CUresult code, std::string_view what) {
  if (code != kCudaSuccess) throw CudaError(fmt::format("{}: {}", what, cuda_error_text(code)), code);
}

std::string DeviceInfo::arch() const { return fmt::format("sm_{}{}", cc_major, cc_minor); }

namespace {
std::mutex device_mutex;
std::optional<int> selected_ordinal;
CudaDevice* bound_device = nullptr;
}  // namespace

void CudaDevice::select(int ordinal) {
  std::lock_guard<std::mutex> lock(device_mutex);
  if (bound_device && bound_device->info_.ordinal != ordinal)
    throw CudaError(fmt::format("this process already computes on GPU {}; it cannot switch to GPU {}",
                                bound_device->info_.ordinal, ordinal), -1);
  selected_ordinal = ordinal;
}

std::optional<int> CudaDevice::selected() {
  std::lock_guard<std::mutex> lock(device_mutex);
  return selected_ordinal;
}

CudaDevice& CudaDevice::get() {
  std::lock_guard<std::mutex> lock(device_mutex);
  if (!bound_device) {
    int ordinal = 0;
    if (selected_ordinal) {
      ordinal = *selected_ordinal;
    } else if (const char* env = std::getenv("SYNK_CUDA_DEVICE"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v < 0) throw CudaError(fmt::format("SYNK_CUDA_DEVICE='{}' is not a device ordinal", env), -1);
      ordinal = int(v);
    }
    bound_device = new CudaDevice(ordinal);   // lives as long as the process (the context does too)
  }
  bound_device->make_current();
  return *bound_device;
}

CudaDevice::CudaDevice(int ordinal) {
  const DriverApi& api = cuda_driver();
  int count = 0;
  cuda_check(api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal >= count)
    throw CudaError(fmt::format("GPU {} was requested but this machine has {} GPU{}", ordinal, count, count == 1 ? "" : "s"),
                    kCudaErrorNoDevice);
  cuda_check(api.cuDeviceGet(&device_, ordinal), fmt::format("cuDeviceGet({})", ordinal));
  info_.ordinal = ordinal;
  char name[256] = {0};
  cuda_check(api.cuDeviceGetName(name, sizeof name - 1, device_), "cuDeviceGetName");
  info_.name = name;
  auto attr = [&](DeviceAttribute a) {
    int v = 0;
    cuda_check(api.cuDeviceGetAttribute(&v, int(a), device_), fmt::format("cuDeviceGetAttribute({})", int(a)));
    return v;
  };
  info_.cc_major = attr(DeviceAttribute::ComputeCapabilityMajor);
  info_.cc_minor = attr(DeviceAttribute::ComputeCapabilityMinor);
  info_.sm_count = attr(DeviceAttribute::MultiprocessorCount);
  info_.max_threads_per_block = attr(DeviceAttribute::MaxThreadsPerBlock);
  info_.max_grid_y = attr(DeviceAttribute::MaxGridDimY);
  info_.l2_bytes = attr(DeviceAttribute::L2CacheSize);
  cuda_check(api.cuDeviceTotalMem(&info_.total_memory, device_), "cuDeviceTotalMem");
  cuda_check(api.cuDevicePrimaryCtxRetain(&context_, device_), fmt::format("retaining the primary context of GPU {}", ordinal));
}

void CudaDevice::make_current() const {
  cuda_check(cuda_driver().cuCtxSetCurrent(context_), fmt::format("making GPU {}'s context current", info_.ordinal));
}

void CudaDevice::memory_info(size_t* free_bytes, size_t* total_bytes) const {
  make_current();
  cuda_check(cuda_driver().cuMemGetInfo(free_bytes, total_bytes), "cuMemGetInfo");
}

std::string format_bytes(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  if (u == 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.2f} {} ({} bytes)", v, units[u], bytes);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), capacity_(other.capacity_) {
  other.ptr_ = 0;
  other.capacity_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = other.ptr_;
    capacity_ = other.capacity_;
    other.ptr_ = 0;
    other.capacity_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() {
  const LoadedDriver* driver_state = driver_if_loaded();
  if (ptr_ && driver_state && driver_state->api.cuMemFree) driver_state->api.cuMemFree(ptr_);
  ptr_ = 0;
  capacity_ = 0;
}

bool DeviceBuffer::reserve(size_t bytes, std::string_view what) {
  if (bytes <= capacity_ && ptr_) return false;
  const DriverApi& api = cuda_driver();
  release();
  CUdeviceptr p = 0;
  // cuMemAlloc of 0 bytes is an error; keep one 256-byte granule so every buffer has an address.
  size_t want = bytes == 0 ? 256 : bytes;
  CUresult r = api.cuMemAlloc(&p, want);
  if (r == kCudaErrorOutOfMemory) {
    size_t free_bytes = 0, total_bytes = 0;
    api.cuMemGetInfo(&free_bytes, &total_bytes);
    throw CudaError(fmt::format("out of GPU memory: cannot allocate {} for {} ({} free of {})", format_bytes(want), what,
                                format_bytes(free_bytes), format_bytes(total_bytes)), r);
  }
  cuda_check(r, fmt::format("cuMemAlloc of {} for {}", format_bytes(want), what));
  ptr_ = p;
  capacity_ = want;
  return true;
}

}  // namespace synk::rt::cuda
