// NVRTC through dlopen, option validation, target choice and the cached compile (see nvrtc.h).
#include "compiler/cuda/nvrtc.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/backend/failure_files.h"
#include "compiler/backend/kernel_cache.h"
#include "base/diagnostics.h"
#include "gpu/dl.h"
#include "gpu/driver.h"

#ifndef SYNK_CUDA_DEFAULT_INCLUDE_DIR
#define SYNK_CUDA_DEFAULT_INCLUDE_DIR ""
#endif
#ifndef SYNK_CUDA_DEFAULT_LIB_DIR
#define SYNK_CUDA_DEFAULT_LIB_DIR ""
#endif
#ifndef SYNK_CUDA_PTXAS
#define SYNK_CUDA_PTXAS ""
#endif

namespace synk::compiler {
namespace {

// Bumped whenever the way kernels are compiled changes, so that old cache entries are not reused.
constexpr const char* kNvrtcPipelineVersion = "synk-nvrtc-1";

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int* major, int* minor) = nullptr;
  nvrtcResult (*GetNumSupportedArchs)(int* count) = nullptr;
  nvrtcResult (*GetSupportedArchs)(int* archs) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram* prog, const char* src, const char* name, int num_headers,
                               const char* const* headers, const char* const* include_names) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram* prog) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram prog, int num_options, const char* const* options) = nullptr;
  nvrtcResult (*GetPTXSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetPTX)(nvrtcProgram prog, char* ptx) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram prog, char* cubin) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram prog, char* log) = nullptr;
};

struct LoadedNvrtc {
  NvrtcApi api;
  std::string error;
  std::string version;
  std::vector<int> archs;
};

LoadedNvrtc load_nvrtc() {
  LoadedNvrtc l;
  void* h = rt::cuda::open_cuda_library("libnvrtc.so.13", SYNK_CUDA_DEFAULT_LIB_DIR, &l.error);
  if (!h) return l;
  rt::cuda::SymbolTable table(h, "libnvrtc.so.13");
  auto get = [&](auto& fn, const char* name) { table.resolve(fn, name); };
  get(l.api.GetErrorString, "nvrtcGetErrorString");
  get(l.api.Version, "nvrtcVersion");
  get(l.api.GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  get(l.api.GetSupportedArchs, "nvrtcGetSupportedArchs");
  get(l.api.CreateProgram, "nvrtcCreateProgram");
  get(l.api.DestroyProgram, "nvrtcDestroyProgram");
  get(l.api.CompileProgram, "nvrtcCompileProgram");
  get(l.api.GetPTXSize, "nvrtcGetPTXSize");
  get(l.api.GetPTX, "nvrtcGetPTX");
  get(l.api.GetCUBINSize, "nvrtcGetCUBINSize");
  get(l.api.GetCUBIN, "nvrtcGetCUBIN");
  get(l.api.GetProgramLogSize, "nvrtcGetProgramLogSize");
  get(l.api.GetProgramLog, "nvrtcGetProgramLog");
  if (!table.ok()) {
    l.error = table.error();
    return l;
  }
  int major = 0, minor = 0;
  if (nvrtcResult r = l.api.Version(&major, &minor); r != 0) {
    l.error = fmt::format("nvrtcVersion failed: {}", l.api.GetErrorString(r));
    return l;
  }
  l.version = fmt::format("{}.{}", major, minor);
  int n = 0;
  if (l.api.GetNumSupportedArchs(&n) == 0 && n > 0) {
    l.archs.resize(size_t(n));
    if (l.api.GetSupportedArchs(l.archs.data()) != 0) l.archs.clear();
  }
  std::sort(l.archs.begin(), l.archs.end());
  return l;
}

const LoadedNvrtc& nvrtc() {
  static const LoadedNvrtc l = load_nvrtc();
  return l;
}

const NvrtcApi& api() {
  const LoadedNvrtc& l = nvrtc();
  if (!l.error.empty())
    throw synk::UserError("the CUDA backend needs NVRTC (libnvrtc.so.13), which cannot be loaded: " + l.error +
                         " (set SYNK_CUDA_LIB_DIR to the directory that holds it)");
  return l.api;
}

bool directory_exists(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string program_log(const NvrtcApi& a, nvrtcProgram prog) {
  size_t n = 0;
  if (a.GetProgramLogSize(prog, &n) != 0 || n <= 1) return {};
  std::string log(n, '\0');
  if (a.GetProgramLog(prog, log.data()) != 0) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::string CudaTarget::arch_option() const {
  return fmt::format("-arch={}_{}{}", cubin ? "sm" : "compute", sm, arch_specific ? "a" : "");
}

std::string CudaTarget::str() const {
  return fmt::format("{}_{}{} ({})", cubin ? "sm" : "compute", sm, arch_specific ? "a" : "", cubin ? "cubin" : "ptx");
}

NvrtcOptions nvrtc_options_from_env() {
  NvrtcOptions o;
  if (const char* fm = std::getenv("SYNK_CUDA_FAST_MATH"); fm && *fm && std::strcmp(fm, "0") != 0) o.fast_math = true;
  if (const char* extra = std::getenv("SYNK_NVRTC_OPTIONS"); extra && *extra) {
    std::istringstream in(extra);
    std::string opt;
    while (in >> opt) o.extra.push_back(opt);
    validate_nvrtc_options(o.extra);
  }
  return o;
}

bool nvrtc_available(std::string* reason) {
  const LoadedNvrtc& l = nvrtc();
  if (reason) *reason = l.error;
  return l.error.empty();
}

std::string nvrtc_version() {
  api();
  return nvrtc().version;
}

std::vector<int> nvrtc_supported_archs() {
  api();
  return nvrtc().archs;
}

CudaTarget choose_cuda_target(int cc_major, int cc_minor) {
  const int sm = cc_major * 10 + cc_minor;
  std::vector<int> archs = nvrtc_supported_archs();
  if (archs.empty()) return CudaTarget{sm, true};   // NVRTC did not say: try the device's own
  if (std::find(archs.begin(), archs.end(), sm) != archs.end()) return CudaTarget{sm, true};
  int best = -1;
  for (int a : archs)
    if (a <= sm) best = a;
  if (best < 0)
    throw synk::UserError(fmt::format("this GPU (sm_{}) is older than every architecture NVRTC {} supports (oldest: sm_{})",
                                     sm, nvrtc_version(), archs.front()));
  return CudaTarget{best, false};
}

void validate_nvrtc_options(const std::vector<std::string>& options) {
  static const char* const exact[] = {"--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info",
                                      "-default-device", "--device-as-default-execution-space",
                                      "--extra-device-vectorization", "-extra-device-vectorization", "-G",
                                      "--device-debug", "-w", "--disable-warnings", "-restrict", "--restrict"};
  static const char* const prefixed[] = {"-I", "--include-path=", "-D", "--define-macro=", "-U", "--undefine-macro=",
                                         "-maxrregcount=", "--maxrregcount=", "-ftz=", "--ftz=", "-prec-div=",
                                         "--prec-div=", "-prec-sqrt=", "--prec-sqrt=", "-fmad=", "--fmad=",
                                         "-std=", "--std="};
  for (const std::string& o : options) {
    if (std::find_if(std::begin(exact), std::end(exact), [&](const char* e) { return o == e; }) != std::end(exact)) continue;
    if (std::find_if(std::begin(prefixed), std::end(prefixed), [&](const char* p) {
          return starts_with(o, p) && o.size() > std::strlen(p);
        }) != std::end(prefixed))
      continue;
    if (starts_with(o, "-O") || starts_with(o, "--optimize"))
      throw synk::UserError(fmt::format("NVRTC option '{}' is not accepted: NVRTC has no -O flag (it always optimises)", o));
    if (starts_with(o, "-arch") || starts_with(o, "--gpu-architecture"))
      throw synk::UserError(fmt::format("NVRTC option '{}' is not accepted: synk chooses the architecture from the GPU", o));
    throw synk::UserError(fmt::format(
        "NVRTC option '{}' is not accepted (allowed: --use_fast_math, -lineinfo, -I<dir>, -D<macro>, -maxrregcount=N, "
        "-ftz=, -prec-div=, -prec-sqrt=, -fmad=, -std=, -G, -w)", o));
  }
}

std::string cuda_include_dir() {
  if (const char* env = std::getenv("SYNK_CUDA_INCLUDE_DIR"); env && *env) return env;
  return SYNK_CUDA_DEFAULT_INCLUDE_DIR;
}

std::string configured_ptxas_path() {
  if (const char* env = std::getenv("SYNK_PTXAS"); env && *env) return env;
  std::string p = SYNK_CUDA_PTXAS;
  if (!p.empty() && ::access(p.c_str(), X_OK) == 0) return p;
  return {};
}

std::vector<std::string> nvrtc_option_list(const CudaTarget& target, const NvrtcOptions& options) {
  validate_nvrtc_options(options.extra);
  std::vector<std::string> list = {target.arch_option(), "-std=c++17"};
  if (std::string inc = cuda_include_dir(); directory_exists(inc)) list.push_back("-I" + inc);
  if (options.fast_math) list.push_back("--use_fast_math");
  if (options.line_info) list.push_back("-lineinfo");
  for (const std::string& o : options.extra) list.push_back(o);
  return list;
}

CudaBinary nvrtc_compile(const std::string& source, const std::string& name_hint, const CudaTarget& target,
                         const NvrtcOptions& options) {
  const NvrtcApi& a = api();
  std::vector<std::string> opts = nvrtc_option_list(target, options);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcProgram prog = nullptr;
  std::string program_name = name_hint + ".cu";
  if (nvrtcResult r = a.CreateProgram(&prog, source.c_str(), program_name.c_str(), 0, nullptr, nullptr); r != 0)
    synk::internal_error(fmt::format("nvrtcCreateProgram for '{}' failed: {}", name_hint, a.GetErrorString(r)));
  struct Destroy {
    const NvrtcApi& a;
    nvrtcProgram* p;
    ~Destroy() { a.DestroyProgram(p); }
  } destroy{a, &prog};
  nvrtcResult r = a.CompileProgram(prog, int(argv.size()), argv.data());
  CudaBinary out;
  out.target = target;
  out.log = program_log(a, prog);
  if (r != 0) {
    std::string src_path = save_failure_file(source, name_hint, "cu");
    std::string log_path = save_failure_file(fmt::format("options: {}\n{}\n", fmt::join(opts, " "), out.log), name_hint, "log");
    std::string head = out.log.substr(0, 2000);
    synk::internal_error(fmt::format("NVRTC {} could not compile the generated CUDA for '{}' ({}; {}): source saved to "
                                    "{}, compiler log to {}:\n{}",
                                    nvrtc().version, name_hint, target.str(), a.GetErrorString(r), src_path, log_path,
                                    head));
  }
  size_t n = 0;
  if (target.cubin) {
    if (nvrtcResult e = a.GetCUBINSize(prog, &n); e != 0 || n == 0)
      synk::internal_error(fmt::format("NVRTC produced no CUBIN for '{}' ({})", name_hint, target.str()));
    out.image.resize(n);
    if (nvrtcResult e = a.GetCUBIN(prog, out.image.data()); e != 0)
      synk::internal_error(fmt::format("nvrtcGetCUBIN for '{}' failed: {}", name_hint, a.GetErrorString(e)));
  } else {
    if (nvrtcResult e = a.GetPTXSize(prog, &n); e != 0 || n == 0)
      synk::internal_error(fmt::format("NVRTC produced no PTX for '{}' ({})", name_hint, target.str()));
    out.image.resize(n);
    if (nvrtcResult e = a.GetPTX(prog, out.image.data()); e != 0)
      synk::internal_error(fmt::format("nvrtcGetPTX for '{}' failed: {}", name_hint, a.GetErrorString(e)));
  }
  return out;
}

CachedCudaBinary nvrtc_compile_cached(const std::string& source, const std::string& name_hint, const CudaTarget& target,
                                      const NvrtcOptions& options, bool use_disk_cache) {
  std::vector<std::string> opts = nvrtc_option_list(target, options);
  std::string joined = fmt::format("{}", fmt::join(opts, "\x1f"));
  std::string version = nvrtc_version();
  CachedCudaBinary result;
  result.key = cache_key({"cuda", kNvrtcPipelineVersion, version, target.str(), joined, source});
  KernelCache cache;
  if (use_disk_cache) {
    if (std::optional<std::vector<char>> hit = cache.get(result.key)) {
      result.binary.target = target;
      result.binary.image = std::move(*hit);
      result.from_disk_cache = true;
      return result;
    }
  }
  result.binary = nvrtc_compile(source, name_hint, target, options);
  cache.put(result.key, result.binary.image);
  return result;
}

}  // namespace synk::compiler
