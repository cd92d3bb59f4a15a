// Clang's cc1 run on generated kernel source held in memory. The JIT (jit.cpp: to LLVM IR for
// our own pass pipeline) and portable artifacts (aot_object.cpp: Clang's -O3 straight to an
// object for a named CPU) compile the same kind of source with the same language options; this
// is the one place that sets them and drives a CompilerInstance.
#pragma once

#include <string>
#include <vector>

namespace clang {
class FrontendAction;
}

namespace synk::compiler {

// The cc1 options of every kernel compile, before the target (-triple, -target-cpu, features)
// and the pipeline choice: C++17 without RTTI, -O3 IR, loop and SLP vectorisation, PIC, fused
// multiply-add contraction, no warnings, Clang's own resource directory.
std::vector<std::string> cc1_kernel_options();

// LLVM's native target, assembly printer and parser, initialised once per process.
void init_native_llvm();

enum class Cc1Result { Ok, OptionsRejected, Failed };

// Runs cc1 with `args` (options only: the source is appended as synk_kernels.cpp, mapped from
// `source`) and executes `action`. `diagnostics` receives everything Clang printed.
Cc1Result run_cc1(const std::string& source, const std::vector<std::string>& args, clang::FrontendAction& action,
                  std::string& diagnostics);

}  // namespace synk::compiler
