// NVRTC, the CUDA run-time compiler, loaded with dlopen("libnvrtc.so.13") (never linked, so synkc
// and the tests start on machines without CUDA): generated CUDA C++ to CUBIN for one GPU
// architecture, or to PTX that the driver compiles for a device newer than this NVRTC knows.
// Results go through the shared on-disk kernel cache (kernel_cache.h), keyed by the source, the
// options, the target and the NVRTC version. A compile failure is an internal error (synk
// generated bad code): the source and NVRTC's log are saved to files that the message names.
//
// Environment: SYNK_CUDA_LIB_DIR (where to look for libnvrtc.so.13 first),
// SYNK_CUDA_INCLUDE_DIR (overrides the toolkit include directory found at configure time; the
// generated kernels include nothing, but user options may), SYNK_NVRTC_OPTIONS (extra options,
// space-separated, validated), SYNK_CUDA_FAST_MATH=1 (--use_fast_math).
#pragma once

#include <string>
#include <vector>

namespace synk::compiler {

// What NVRTC compiles for.
struct CudaTarget {
  int sm = 90;          // 90 for sm_90 / compute_90
  bool cubin = true;    // false: PTX, JIT-compiled by the driver at load time
  bool arch_specific = false;   // sm_90a: CUBIN that runs on exactly this compute capability
  std::string arch_option() const;   // "-arch=sm_90", "-arch=sm_90a" or "-arch=compute_90"
  std::string str() const;           // "sm_90 (cubin)" or "compute_90 (ptx)"
};

struct NvrtcOptions {
  bool fast_math = false;            // --use_fast_math (approximate exp/log/div); off by default
  bool line_info = false;            // -lineinfo (for profilers and compute-sanitizer)
  std::vector<std::string> extra;    // validated by validate_nvrtc_options
};
// Defaults from the environment (SYNK_CUDA_FAST_MATH, SYNK_NVRTC_OPTIONS).
NvrtcOptions nvrtc_options_from_env();

// Whether libnvrtc can be loaded; `reason` says why not. Never throws.
bool nvrtc_available(std::string* reason = nullptr);
// "13.0". Throws synk::UserError when NVRTC cannot be loaded (the message says why).
std::string nvrtc_version();
// The SM numbers NVRTC can produce CUBIN for (75 80 86 ... for NVRTC 13).
std::vector<int> nvrtc_supported_archs();

// The target for a device of compute capability major.minor: CUBIN for it when NVRTC supports its
// architecture, else PTX for the newest supported architecture below it (the driver JIT-compiles
// PTX forward). Throws synk::UserError when the device is older than every supported architecture.
CudaTarget choose_cuda_target(int cc_major, int cc_minor);

// Rejects options NVRTC does not accept or synk does not allow (NVRTC has no -O flags: it always
// optimises; -arch is chosen by synk). Throws synk::UserError naming the option.
void validate_nvrtc_options(const std::vector<std::string>& options);
// The full option list for a compile (architecture, C++ standard, include path, flags).
std::vector<std::string> nvrtc_option_list(const CudaTarget& target, const NvrtcOptions& options);

// The toolkit include directory: $SYNK_CUDA_INCLUDE_DIR, else the one found at configure time,
// else empty.
std::string cuda_include_dir();
// ptxas from the toolkit found at configure time ($SYNK_PTXAS overrides), or empty. For tests.
std::string configured_ptxas_path();

struct CudaBinary {
  CudaTarget target;
  std::vector<char> image;   // CUBIN (ELF) bytes, or PTX text with its terminating NUL
  std::string log;           // NVRTC's log (warnings), usually empty
};

// Compiles without the cache. `name_hint` names the program and the saved files on failure.
CudaBinary nvrtc_compile(const std::string& source, const std::string& name_hint, const CudaTarget& target,
                         const NvrtcOptions& options = {});

struct CachedCudaBinary {
  CudaBinary binary;
  bool from_disk_cache = false;
  std::string key;
};
// Same through the on-disk kernel cache (use_disk_cache false: always compile, still stores).
CachedCudaBinary nvrtc_compile_cached(const std::string& source, const std::string& name_hint, const CudaTarget& target,
                                      const NvrtcOptions& options = {}, bool use_disk_cache = true);

}  // namespace synk::compiler
