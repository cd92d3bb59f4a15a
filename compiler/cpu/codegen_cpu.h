// CPU code generation (`synkc --emit=cpp`): one translation unit of plain C++ per function, with
// no std headers (only clang's freestanding <stddef.h>/<stdint.h> and builtins), so the
// in-process Clang compiles it in milliseconds. Every kernel of the plan except float matrix
// products (which call BLAS from the host side, cpu_function.cpp) becomes an `extern "C"` entry
//   int64_t synk_<fn>_<kernel>(void* const* bufs, const int64_t* syms, int64_t* err)
// where bufs holds the kernel's output buffers then its input buffers (KernelPlan order), syms
// the values of the plan's symbols, and err receives details when the result is nonzero
// (KernelError, codegen/kernel_abi.h). Symbolic sizes are runtime arguments; everything else is a compile-time
// constant, so loops over static shapes are fully known to LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/kernel_abi.h"
#include "compiler/passes/kernel_plan.h"

namespace synk::compiler {

namespace cpu {
// The fixed start of every generated translation unit (prelude.cpp).
const std::string& cpu_prelude();
}  // namespace cpu

// The whole translation unit for the plan's function (entry names as kernel_symbol, codegen/kernel_abi.h).
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
