// Kernel objects of ahead-of-time artifacts (aot.h): for the host, exactly the JIT's
// compile_to_object(); for a CPU named with `synkc --target-cpu`, Clang's cc1 -O3 for that CPU.
#pragma once

#include <string>
#include <vector>

namespace synk::compiler::aot {

// Whether LLVM knows `cpu` ("x86-64-v3", "skylake-avx512", "generic", ...) for the host triple.
bool is_known_target_cpu(const std::string& cpu);

// An ELF relocatable object of `source`. cpu empty: the host (compile_to_object). scratch_path
// is a file the compile may write (and removes). An internal error names the saved source.
std::vector<char> compile_object_for_cpu(const std::string& source, const std::string& cpu,
                                         const std::string& name_hint, const std::string& scratch_path);

}  // namespace synk::compiler::aot
