// OpenBLAS's choice of kernels for this CPU, checked once per process before synk's first BLAS
// call. Debian's OpenBLAS 0.3.21 (built with DYNAMIC_ARCH) picks its kernels from the CPU's
// family and model; a model it does not know (an Emerald Rapids Xeon, family 6 model 207, or any
// CPU newer than the library) gets its SSE3 "Prescott" kernels, which run sgemm about 3x slower
// than the AVX-512 ones on the same core (OpenBLAS issue 4267, fixed in 0.3.25 by choosing from
// the CPU's features). When the library reports Prescott on a CPU with AVX or better and the
// user has not set OPENBLAS_CORETYPE, synk asks OpenBLAS to choose again with the core type the
// features call for, through the library's own re-initialisation (gotoblas_dynamic_quit/init:
// the path OPENBLAS_CORETYPE takes at load time). Any other BLAS, or an OpenBLAS built for one
// CPU, is left alone.
#pragma once

#include <string>
#include <vector>

namespace synk::compiler {

// The x86 vector extensions that decide which OpenBLAS kernels suit a CPU (usable ones: the
// operating system saves their registers).
struct CpuVectorFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512 = false;       // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
  bool avx512_bf16 = false;
};

// "family 6, model 207": the CPU as OpenBLAS's model table sees it (empty where cpuid cannot say).
std::string cpu_family_model();

// What this process's CPU offers.
CpuVectorFeatures detect_cpu_vector_features();

// The OpenBLAS core types (OPENBLAS_CORETYPE values) these features can run, best first; empty
// when nothing better than Prescott applies. An older library may not know the first ones.
std::vector<std::string> openblas_cores_for(const CpuVectorFeatures& features);

// What ensure_openblas_core() found and did.
struct OpenBlasCoreReport {
  bool is_openblas = false;    // the BLAS synk calls has OpenBLAS's run-time core selection
  std::string config;          // openblas_get_config(): version and build options
  std::string chosen_by_library;   // the core OpenBLAS chose on its own ("Prescott", "Haswell", ...)
  std::string in_use;          // the core in use afterwards
  bool switched = false;       // synk asked OpenBLAS to choose again
  std::string note;            // what was done, one line; empty when there is nothing to say
  bool note_is_warning = false;   // printed always (BLAS stays slow), not only with SYNK_VERBOSE
};

// Checks OpenBLAS's choice and corrects the Prescott fallback, once per process (later calls
// return the first report). Call before the first BLAS call; thread-safe.
const OpenBlasCoreReport& ensure_openblas_core();

}  // namespace synk::compiler
