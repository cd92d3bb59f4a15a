// OpenBLAS's kernel choice, checked and corrected once per process (see openblas_core.h).
#include "compiler/cpu/openblas_core.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <strings.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace synk::compiler {

namespace {

// OpenBLAS's own entry points for its run-time core selection (DYNAMIC_ARCH builds only).
struct OpenBlasEntryPoints {
  char* (*corename)() = nullptr;
  char* (*config)() = nullptr;
  void (*dynamic_init)() = nullptr;
  void (*dynamic_quit)() = nullptr;
};

// Looked up in the library that holds the cblas_sgemm synk calls: under Python, synk's extension
// is loaded RTLD_LOCAL and its BLAS is not in the global scope.
OpenBlasEntryPoints find_openblas() {
  OpenBlasEntryPoints entry;
  Dl_info info{};
  void* library = nullptr;
  if (dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) != 0 && info.dli_fname)
    library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  void* scope = library ? library : RTLD_DEFAULT;
  entry.corename = reinterpret_cast<char* (*)()>(dlsym(scope, "openblas_get_corename"));
  entry.config = reinterpret_cast<char* (*)()>(dlsym(scope, "openblas_get_config"));
  entry.dynamic_init = reinterpret_cast<void (*)()>(dlsym(scope, "gotoblas_dynamic_init"));
  entry.dynamic_quit = reinterpret_cast<void (*)()>(dlsym(scope, "gotoblas_dynamic_quit"));
  // The handle only confirms the library is loaded; closing it drops the count dlopen added.
  if (library) dlclose(library);
  return entry;
}

}  // namespace

std::string cpu_family_model() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return "";
  const unsigned family = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
  const unsigned ext_family = (eax >> 20) & 0xff, ext_model = (eax >> 16) & 0xf;
  const unsigned shown_family = family == 0xf ? family + ext_family : family;
  const unsigned shown_model = family == 0x6 || family == 0xf ? (ext_model << 4) + model : model;
  return fmt::format("family {}, model {}", shown_family, shown_model);
#else
  return "";
#endif
}

namespace {

std::string cpu_identity() {
  const std::string family_model = cpu_family_model();
  return family_model.empty() ? "this CPU" : fmt::format("this CPU ({})", family_model);
}

// Fills the report and, where OpenBLAS fell back to Prescott on a vector CPU, has it choose again.
void correct(const OpenBlasEntryPoints& openblas, OpenBlasCoreReport& report) {
  if (!openblas.corename) return;
  report.is_openblas = true;
  report.chosen_by_library = openblas.corename();
  report.in_use = report.chosen_by_library;
  if (!openblas.dynamic_init || !openblas.dynamic_quit) return;   // built for one CPU
  if (std::getenv("OPENBLAS_CORETYPE")) return;                    // the user's choice
  if (strcasecmp(report.chosen_by_library.c_str(), "Prescott") != 0) return;
  const std::vector<std::string> candidates = openblas_cores_for(detect_cpu_vector_features());
  if (candidates.empty()) return;

  // OpenBLAS reads OPENBLAS_CORETYPE when it initialises (a library older than a name may end on
  // Prescott again: then the next name is tried); the variable is removed again so that programs
  // this one starts choose for themselves.
  for (const std::string& core : candidates) {
    setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    openblas.dynamic_quit();
    openblas.dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    report.in_use = openblas.corename();
    report.switched = true;
    if (strcasecmp(report.in_use.c_str(), "Prescott") != 0) break;
  }
  if (strcasecmp(report.in_use.c_str(), "Prescott") == 0) {
    report.note = fmt::format("synk: OpenBLAS chose its Prescott (SSE3) kernels for {} and took none of {}; "
                              "BLAS calls run at a fraction of this CPU's speed (OPENBLAS_CORETYPE overrides)",
                              cpu_identity(), fmt::join(candidates, ", "));
    report.note_is_warning = true;
  } else {
    report.note = fmt::format("synk: OpenBLAS did not recognise {} and chose its Prescott (SSE3) kernels; "
                              "synk switched it to its {} kernels, which this CPU's features call for "
                              "(OPENBLAS_CORETYPE overrides)",
                              cpu_identity(), report.in_use);
  }
}

OpenBlasCoreReport check_and_correct() {
  OpenBlasCoreReport report;
  const OpenBlasEntryPoints openblas = find_openblas();
  correct(openblas, report);
  if (report.is_openblas && openblas.config) report.config = openblas.config();   // names the core in use
  return report;
}

}  // namespace

CpuVectorFeatures detect_cpu_vector_features() {
  CpuVectorFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

std::vector<std::string> openblas_cores_for(const CpuVectorFeatures& f) {
  std::vector<std::string> cores;
  if (f.avx512 && f.avx2 && f.fma) {
    if (f.avx512_bf16) cores.push_back("Cooperlake");
    cores.push_back("SkylakeX");
  }
  if (f.avx2 && f.fma) cores.push_back("Haswell");
  if (f.avx) cores.push_back("Sandybridge");
  return cores;
}

// At load time as well, so that the check runs once, before main and before synk::fork(): the
// ranks inherit the kernels and a note prints once, not once per rank.
[[maybe_unused]] const bool checked_at_load = (ensure_openblas_core(), true);

const OpenBlasCoreReport& ensure_openblas_core() {
  static std::once_flag once;
  static OpenBlasCoreReport report;
  std::call_once(once, [] {
    report = check_and_correct();
    const char* verbose = std::getenv("SYNK_VERBOSE");
    const bool verbose_on = verbose && *verbose && std::string(verbose) != "0";
    if (!report.note.empty() && (report.note_is_warning || verbose_on))
      std::fprintf(stderr, "%s\n", report.note.c_str());
  });
  return report;
}

}  // namespace synk::compiler
