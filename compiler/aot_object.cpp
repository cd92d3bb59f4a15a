// Kernel objects for a named target CPU (`synkc --target-cpu x86-64-v3`): the JIT's compiler
// (jit.h) always targets the host, which is right for the JIT and the default for artifacts, but
// a portable artifact needs a CPU chosen by the user. This is Clang's own cc1 -O3 pipeline
// straight to an object file (EmitObjAction), with the JIT's language options; only the CPU and
// its features differ from compile_to_object().
#include "compiler/aot_object.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include "compiler/jit.h"
#include "dsl/diagnostics.h"

#ifndef SYNK_CLANG_RESOURCE_DIR
#error "SYNK_CLANG_RESOURCE_DIR must be defined by the build (compiler/CMakeLists.txt)"
#endif

namespace synk::compiler::aot {
namespace {

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

}  // namespace

bool is_known_target_cpu(const std::string& cpu) {
  init_llvm_once();
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
  init_llvm_once();
  std::string rd = SYNK_CLANG_RESOURCE_DIR;
  std::vector<std::string> args = {"-triple", llvm::sys::getProcessTriple(), "-target-cpu", cpu,
                                   "-O3", "-w", "-vectorize-loops", "-vectorize-slp", "-std=c++17", "-fno-rtti",
                                   "-mrelocation-model", "pic", "-pic-level", "2", "-ffp-contract=on",
                                   "-resource-dir", rd, "-internal-isystem", rd + "/include", "-x", "c++",
                                   "-emit-obj", "-o", scratch_path, "synk_kernels.cpp"};
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::string diag_text;
  llvm::raw_string_ostream diag_os(diag_text);
  auto ci = std::make_unique<clang::CompilerInstance>();
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts = new clang::DiagnosticOptions();
  ci->createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, diag_opts.get()), true);
  bool ok = clang::CompilerInvocation::CreateFromArgs(ci->getInvocation(), argv, ci->getDiagnostics());
  if (ok) {
    ci->createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, &ci->getDiagnosticOpts()), true);
    ci->getPreprocessorOpts().addRemappedFile(
        "synk_kernels.cpp", llvm::MemoryBuffer::getMemBufferCopy(source, "synk_kernels.cpp").release());
    ci->setVerboseOutputStream(diag_os);
    clang::EmitObjAction action;
    ok = ci->ExecuteAction(action) && !ci->getDiagnostics().hasErrorOccurred();
  }
  diag_os.flush();
  std::ifstream in(scratch_path, std::ios::binary);
  std::vector<char> object{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ::unlink(scratch_path.c_str());
  if (!ok || object.empty()) {
    std::string saved = scratch_path + ".cpp";
    std::ofstream(saved) << source;
    dsl::internal_error(fmt::format("clang failed to compile the kernels of '{}' for CPU '{}' (source saved to {}):\n{}",
                                    name_hint, cpu, saved, diag_text));
  }
  return object;
}

}  // namespace synk::compiler::aot
