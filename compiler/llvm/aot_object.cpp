// Kernel objects for a named target CPU (`synkc --target-cpu x86-64-v3`): the JIT's compiler
// (jit.h) always targets the host, which is right for the JIT and the default for artifacts, but
// a portable artifact needs a CPU chosen by the user. This is Clang's own cc1 -O3 pipeline
// straight to an object file (EmitObjAction), with the JIT's language options; only the CPU and
// its features differ from compile_to_object().
#include "compiler/llvm/aot_object.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include <clang/CodeGen/CodeGenAction.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>

#include <fmt/format.h>

#include "compiler/llvm/clang_cc1.h"
#include "compiler/llvm/jit.h"
#include "base/diagnostics.h"

namespace synk::compiler::aot {

bool is_known_target_cpu(const std::string& cpu) {
  init_native_llvm();
  std::string triple = llvm::sys::getProcessTriple(), error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return false;
  // Asked with the empty CPU: asking with an unknown one prints a warning to stderr.
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  return info && info->isCPUStringValid(cpu);
}

std::vector<char> compile_object_for_cpu(const std::string& source, const std::string& cpu,
                                         const std::string& name_hint, const std::string& scratch_path) {
  if (cpu.empty()) return compile_to_object(source, name_hint);
  // Clang's own -O3 pipeline (no -disable-llvm-passes): the object is built once, not per run.
  std::vector<std::string> args = {"-triple", llvm::sys::getProcessTriple(), "-target-cpu", cpu};
  for (const std::string& o : cc1_kernel_options()) args.push_back(o);
  for (const char* o : {"-emit-obj", "-o"}) args.push_back(o);
  args.push_back(scratch_path);
  std::string diag_text;
  clang::EmitObjAction action;
  bool ok = run_cc1(source, args, action, diag_text) == Cc1Result::Ok;
  std::ifstream in(scratch_path, std::ios::binary);
  std::vector<char> object{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ::unlink(scratch_path.c_str());
  if (!ok || object.empty()) {
    std::string saved = scratch_path + ".cpp";
    std::ofstream(saved) << source;
    synk::internal_error(fmt::format("clang failed to compile the kernels of '{}' for CPU '{}' (source saved to {}):\n{}",
                                    name_hint, cpu, saved, diag_text));
  }
  return object;
}

}  // namespace synk::compiler::aot
