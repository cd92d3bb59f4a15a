// The CUDA driver API, loaded with dlopen("libcuda.so.1") at run time and never linked, so every
// synk binary starts on a machine without a GPU (or without a driver) and says why it runs on the
// CPU. Only the entry points synk uses are resolved; their types are declared here (the driver
// ABI has been stable for these calls since CUDA 4), so nothing needs cuda.h to build.
//
// Two ways in:
// - cuda_status() / cuda_available(): may this process use a GPU? Never throws. The probe runs in
//   a short-lived child process, because a process that has called cuInit cannot fork workers
//   that use CUDA (SEMANTICS.md section 1: no CUDA before the fork).
// - cuda_driver(): the driver loaded and initialised in THIS process, for code that is about to
//   use the GPU (a rank after the fork). Throws CudaError with the reason when it cannot.
// CudaDevice binds the process to one device through its primary context, the context the CUDA
// runtime inside cuBLAS uses too, so synk's kernels and cuBLAS calls share memory and streams.
//
// Environment: SYNK_DISABLE_CUDA=1 forces the CPU; SYNK_CUDA_LIB_DIR is searched for
// libcuda.so.1 after the loader's default path; SYNK_CUDA_DEVICE picks the device ordinal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace synk::rt::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;
inline constexpr CUresult kCudaErrorNoDevice = 100;

// CUdevice_attribute values synk reads.
enum class DeviceAttribute : int {
  MaxThreadsPerBlock = 1,
  MaxGridDimX = 5,
  MaxGridDimY = 6,
  MaxSharedMemoryPerBlock = 8,
  MultiprocessorCount = 16,
  L2CacheSize = 38,
  ComputeCapabilityMajor = 75,
  ComputeCapabilityMinor = 76,
};

inline constexpr unsigned kStreamNonBlocking = 1;   // CU_STREAM_NON_BLOCKING
inline constexpr int kJitErrorLogBuffer = 5;        // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferSize = 6;    // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

// The resolved entry points (the versioned symbols cuda.h 13 maps each name to).
struct DriverApi {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemGetInfo)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;
  CUresult (*cuMemFreeHost)(void* ptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options, int* options,
                                 void** option_values) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra) = nullptr;
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
};

// A failed driver call. code() is the CUresult (or -1 when the driver could not be loaded).
class CudaError : public Error {
 public:
  CudaError(const std::string& message, CUresult code) : Error(message), code_(code) {}
  CUresult code() const { return code_; }
  bool out_of_memory() const { return code_ == kCudaErrorOutOfMemory; }

 private:
  CUresult code_;
};

// Whether this process may use a GPU, and if not, why. Never throws.
struct CudaStatus {
  bool available = false;
  std::string reason;          // empty when available; else one line ("libcuda.so.1: cannot open ...")
  int device_count = 0;
  int driver_version = 0;      // 13000 for CUDA 13.0; 0 when unknown
  std::string library;         // the libcuda path that was loaded, when one was
  std::vector<int> device_sm;  // per device ordinal: compute capability as major*10+minor (90)
};

// The fork-safe probe (see the file comment); the answer is computed once per process. When this
// process has already initialised the driver, it answers from that instead of forking.
const CudaStatus& cuda_status();
bool cuda_available(std::string* reason = nullptr);

// The driver, loaded and initialised in this process. Throws CudaError when it cannot be.
const DriverApi& cuda_driver();
// Whether cuda_driver() already ran in this process (successfully or not). A process that
// initialised CUDA cannot fork workers that use it, so the runtime refuses a GPU group then.
bool cuda_initialized_here();

// "CUDA_ERROR_OUT_OF_MEMORY" / "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; usable even when the
// driver is not loaded (then the number is printed).
std::string cuda_error_name(CUresult code);
std::string cuda_error_text(CUresult code);

// Throws CudaError("<what>: <error text>") unless code is success.
void cuda_check(CUresult code, std::string_view what);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;    // compute capability (9.0 for H100/H200)
  int sm_count = 0;
  int max_threads_per_block = 0;
  int max_grid_y = 0;
  int l2_bytes = 0;
  size_t total_memory = 0;
  std::string arch() const;          // "sm_90"
};

// The device this process computes on (one per process: each rank binds its own).
class CudaDevice {
 public:
  // The bound device, binding on first use: the ordinal given to select(), else
  // $SYNK_CUDA_DEVICE, else 0. Throws CudaError when there is no usable device.
  static CudaDevice& get();
  // Chooses the ordinal before first use (the runtime calls it in each rank after the fork).
  // Throws CudaError when this process is already bound to another device or the ordinal is bad.
  static void select(int ordinal);
  // The ordinal given to select(), if any (the rank binding), without touching the driver.
  static std::optional<int> selected();

  const DeviceInfo& info() const { return info_; }
  CUcontext context() const { return context_; }
  // Makes the primary context current in the calling thread (cheap when it already is).
  void make_current() const;
  // Free and total device memory in bytes.
  void memory_info(size_t* free_bytes, size_t* total_bytes) const;

 private:
  explicit CudaDevice(int ordinal);
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

// Device memory that grows on demand and is reused across calls. reserve() throws CudaError
// (out_of_memory() true) with a message naming the requested size and what it was for.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  // Ensures at least `bytes` are allocated (contents are not kept when it grows). Returns true
  // when it (re)allocated. `what` names the use in the out-of-memory message.
  bool reserve(size_t bytes, std::string_view what);
  CUdeviceptr ptr() const { return ptr_; }
  size_t capacity() const { return capacity_; }
  void release();

 private:
  CUdeviceptr ptr_ = 0;
  size_t capacity_ = 0;
};

// dlopen()s a CUDA library by soname ("libnvrtc.so.13"): first in $SYNK_CUDA_LIB_DIR when set, then
// through the loader's default path, then in each of `extra_dirs` (':'-separated). Returns the
// handle, or null with `error` saying what was tried and why each failed. Never throws.
void* open_cuda_library(const char* soname, std::string_view extra_dirs, std::string* error, std::string* path = nullptr);

// "1.50 GiB (1610612736 bytes)".
std::string format_bytes(size_t bytes);

}  // namespace synk::rt::cuda
