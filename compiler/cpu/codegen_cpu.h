// CPU code generation (`synkc --emit=cpp`): one translation unit of plain C++ per function, with
// no std headers (only clang's freestanding <stddef.h>/<stdint.h> and builtins), so the
// in-process Clang compiles it in milliseconds. Every kernel of the plan except float matrix
// products (which call BLAS from the host side, cpu_function.cpp) becomes an `extern "C"` entry
//   int64_t synk_<fn>_<kernel>(void* const* bufs, const int64_t* syms, int64_t* err)
// where bufs holds the kernel's output buffers then its input buffers (KernelPlan order), syms
// the values of the plan's symbols, and err receives details when the result is nonzero
// (KernelError). Symbolic sizes are runtime arguments; everything else is a compile-time
// constant, so loops over static shapes are fully known to LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/passes/kernel_plan.h"

namespace synk::compiler {

// Nonzero results of a kernel entry; err[1..3] hold (position, value, limit).
enum class KernelError : int64_t {
  Ok = 0,
  IndexOutOfRange = 1,   // take: index err[2] at position err[1] outside [0, err[3])
  LabelOutOfRange = 2,   // cross_entropy / one_hot: label err[2] of row err[1] outside [0, err[3])
  EmptyReduction = 3,    // max / min / argmax over an empty axis (no identity)
  CastOutOfRange = 4,    // a float-to-integer cast of NaN, an infinity or a value out of range
};

// Kernels that run as BLAS calls from the host and therefore have no generated code.
bool kernel_uses_blas(const KernelPlan& plan, const Kernel& kernel);

// The buffers a generated kernel receives in `bufs`, in order: its outputs, then its inputs,
// each once.
std::vector<int> kernel_buffer_params(const Kernel& kernel);

// "synk_<function>_<kernel>"; with a module prefix (ahead-of-time artifacts, where kernels of
// several modules share one binary) "synk_<prefix>__<function>_<kernel>". The JIT uses none.
std::string cpu_kernel_symbol(const KernelPlan& plan, const Kernel& kernel, std::string_view module_prefix = {});

// The whole translation unit for the plan's function (entry names as cpu_kernel_symbol).
std::string generate_cpu_source(const ir::Module& module, const KernelPlan& plan,
                                std::string_view module_prefix = {});

// The same source in pieces: the head (a comment and the prelude) and each kernel's text (a BLAS
// kernel's is a comment only); head + every kernel in order is generate_cpu_source().
struct CpuSourceParts {
  std::string head;
  std::vector<std::string> kernels;
  std::string joined() const;
};
CpuSourceParts generate_cpu_source_parts(const ir::Module& module, const KernelPlan& plan,
                                         std::string_view module_prefix = {});

// At most `units` translation units that together define every kernel, each the head followed
// by a contiguous run of kernels, balanced by text length (so that the JIT can compile them on
// several threads). One unit (joined()) when units <= 1 or there is too little to share.
std::vector<std::string> split_translation_units(const CpuSourceParts& parts, int units);

}  // namespace synk::compiler
