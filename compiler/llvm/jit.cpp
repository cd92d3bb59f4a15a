// The in-process native compiler and the process-wide ORC LLJIT (see jit.h). The Clang half
// follows toolchain.md section 7, approach A: cc1 arguments straight into a CompilerInvocation
// (no driver), the source remapped from memory, EmitLLVMOnlyAction, then an LLVM pass pipeline
// (ours, see kKernelPipeline, or Clang's -O3), then our own TargetMachine writes the object
// file that the cache stores and LLJIT links.
#include "compiler/llvm/jit.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/Triple.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <fmt/format.h>

#include "compiler/llvm/clang_cc1.h"
#include "compiler/backend/failure_files.h"
#include "compiler/backend/kernel_cache.h"
#include "base/diagnostics.h"

#ifndef SYNK_CLANG_RESOURCE_DIR
#error "SYNK_CLANG_RESOURCE_DIR must be defined by the build (compiler/CMakeLists.txt)"
#endif

namespace synk::compiler {
namespace {

thread_local CompileTimes tls_times;

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Bump when the code generator changes in a way the source text does not show (it always
// does today, but the cache key should not depend on that).
constexpr const char* kCodegenVersion = "synk-cpu-codegen-1";

}  // namespace

void init_native_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

namespace {

// Saves source that Clang or LLVM rejected so the internal error can name it.
std::string save_failed_source(const std::string& source, const std::string& name_hint) {
  return save_failure_file(source, name_hint, "cpp");
}

[[noreturn]] void fail(const std::string& what, const std::string& details, const std::string& source,
                       const std::string& name_hint) {
  std::string path = save_failed_source(source, name_hint);
  synk::internal_error(fmt::format("{} for '{}' (generated source saved to {}){}{}", what, name_hint,
                                  path, details.empty() ? "" : ":\n", details));
}

std::string error_text(llvm::Error err) { return llvm::toString(std::move(err)); }

// LLVM reports through its context what our pass pipeline has to say (e.g. "loop not
// vectorized" when a `vectorize(enable)` pragma cannot be honoured). Those are remarks about
// performance, not failures: keep them off stderr unless SYNK_JIT_DIAGNOSTICS is set. Errors
// still surface as failed compiles.
void quiet_diagnostics(const llvm::DiagnosticInfo& info, void*) {
  if (info.getSeverity() != llvm::DS_Error && !std::getenv("SYNK_JIT_DIAGNOSTICS")) return;
  llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
  llvm::errs() << "synk JIT (LLVM): ";
  info.print(printer);
  llvm::errs() << "\n";
}

void make_quiet(llvm::LLVMContext& ctx) { ctx.setDiagnosticHandlerCallBack(quiet_diagnostics, nullptr); }

// Which LLVM optimisation pipeline runs on the generated IR. Clang's -O3 pipeline is made for
// arbitrary C++ and costs ~25 ms per kernel; our kernels are simple loop nests over restrict
// pointers, for which a short pipeline (promote to registers, inline the helpers, clean up,
// hoist, canonicalise loops, vectorise) gives the same inner loops several times faster.
// SYNK_JIT_PIPELINE=O3 selects Clang's pipeline instead (for comparisons).
bool use_clang_o3_pipeline() {
  const char* p = std::getenv("SYNK_JIT_PIPELINE");
  return p && std::string(p) == "O3";
}

constexpr const char* kKernelPipeline =
    "function(sroa,early-cse<memssa>,instcombine,simplifycfg),"
    "cgscc(inline),"
    "function(sroa,early-cse<memssa>,instcombine,simplifycfg,"
    "loop-mssa(licm),loop-rotate,indvars,loop-vectorize,loop-load-elim,instcombine,simplifycfg,"
    "loop-mssa(licm),instcombine)";

// LLVM's code generation level. Measured on the 10-op benchmark function (bench/codegen_jit):
// "less" costs ~22-24 ms of CPU against ~28-30 ms for "aggressive", with the same kernel speed
// (bench/codegen_pointwise within run-to-run noise): the loops are vectorised by the IR pipeline,
// and the extra machine passes find nothing to improve in them. SYNK_JIT_CODEGEN=none, less,
// default or aggressive overrides it (part of the cache key).
std::string codegen_level_name() {
  const char* p = std::getenv("SYNK_JIT_CODEGEN");
  std::string v = p ? p : "";
  return v == "none" || v == "default" || v == "aggressive" ? v : "less";
}

llvm::CodeGenOpt::Level codegen_opt_level() {
  std::string v = codegen_level_name();
  if (v == "none") return llvm::CodeGenOpt::None;
  if (v == "default") return llvm::CodeGenOpt::Default;
  if (v == "aggressive") return llvm::CodeGenOpt::Aggressive;
  return llvm::CodeGenOpt::Less;
}

std::vector<std::string> cc1_options() {
  // -disable-llvm-passes when we run our own pipeline (the IR keeps -O3's attributes and TBAA).
  std::vector<std::string> o = cc1_kernel_options();
  if (!use_clang_o3_pipeline()) {
    o.push_back("-disable-llvm-passes");
    o.push_back(std::string("-synk-pipeline=") + kKernelPipeline);   // cache key only; removed below
  }
  return o;
}

class Compiler {
 public:
  Compiler() {
    init_native_llvm();
    target_.triple = llvm::sys::getProcessTriple();
    target_.cpu = llvm::sys::getHostCPUName().str();
    // LLVM 14 calls x86 CPUs newer than it knows (AMD Zen 4/5) "generic", a name Clang's x86 front
    // end rejects; the baseline x86-64 plus the host's features, which it does detect, is that CPU.
    if (target_.cpu == "generic" && llvm::Triple(target_.triple).isX86()) target_.cpu = "x86-64";
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features)) {
      std::vector<std::string> names;
      for (auto& f : features) if (f.getValue()) names.push_back("+" + f.getKey().str());
      std::sort(names.begin(), names.end());
      target_.features = std::move(names);
    }
    target_.compiler_version = std::string("LLVM ") + LLVM_VERSION_STRING + " " + kCodegenVersion;
    for (const std::string& o : cc1_options()) options_ += o + " ";
    options_ += "codegen=" + codegen_level_name();
  }

  const JitTarget& target() const { return target_; }
  const std::string& options() const { return options_; }

  // Source -> optimised LLVM module (in ctx). Throws an internal error on failure.
  std::unique_ptr<llvm::Module> frontend(const std::string& source, const std::string& name_hint,
                                         llvm::LLVMContext& ctx) {
    double t0 = thread_cpu_seconds();
    std::vector<std::string> args = {"-triple", target_.triple, "-target-cpu", target_.cpu};
    for (const std::string& f : target_.features) { args.push_back("-target-feature"); args.push_back(f); }
    for (const std::string& o : cc1_options())
      if (o.rfind("-synk-", 0) != 0) args.push_back(o);
    std::string diag_text;
    clang::EmitLLVMOnlyAction action(&ctx);
    Cc1Result result = run_cc1(source, args, action, diag_text);
    if (std::getenv("SYNK_JIT_DIAGNOSTICS") && !diag_text.empty())
      llvm::errs() << "synk JIT diagnostics for " << name_hint << ":\n" << diag_text;
    if (result == Cc1Result::OptionsRejected) fail("clang rejected its options", diag_text, source, name_hint);
    if (result == Cc1Result::Failed) fail("clang failed to compile generated code", diag_text, source, name_hint);
    std::unique_ptr<llvm::Module> mod = action.takeModule();
    if (!mod) fail("clang produced no module", diag_text, source, name_hint);
    double t1 = thread_cpu_seconds();
    tls_times.frontend = t1 - t0;
    if (!use_clang_o3_pipeline()) optimize(*mod, source, name_hint);
    tls_times.optimize = thread_cpu_seconds() - t1;
    return mod;
  }

  // A TargetMachine is not documented as safe for concurrent pass pipelines: each compile in
  // flight borrows one of its own from a pool (made on demand, kept for the next compile), so
  // the units of one function compile on several threads at once.
  class BorrowedMachine {
   public:
    BorrowedMachine(Compiler& c, std::unique_ptr<llvm::TargetMachine> tm) : c_(c), tm_(std::move(tm)) {}
    ~BorrowedMachine() {
      std::lock_guard<std::mutex> lock(c_.tm_mutex_);
      c_.idle_machines_.push_back(std::move(tm_));
    }
    llvm::TargetMachine* operator->() const { return tm_.get(); }
    llvm::TargetMachine* get() const { return tm_.get(); }

   private:
    Compiler& c_;
    std::unique_ptr<llvm::TargetMachine> tm_;
  };

  BorrowedMachine borrow_machine(const std::string& source, const std::string& name_hint) {
    {
      std::lock_guard<std::mutex> lock(tm_mutex_);
      if (!idle_machines_.empty()) {
        std::unique_ptr<llvm::TargetMachine> tm = std::move(idle_machines_.back());
        idle_machines_.pop_back();
        return BorrowedMachine(*this, std::move(tm));
      }
    }
    std::string err;
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target_.triple, err);
    if (!t) fail("no LLVM target for " + target_.triple, err, source, name_hint);
    std::string features;
    for (const std::string& f : target_.features) features += (features.empty() ? "" : ",") + f;
    std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(target_.triple, target_.cpu, features,
                                                                   llvm::TargetOptions(), llvm::Reloc::PIC_,
                                                                   llvm::None, codegen_opt_level()));
    if (!tm) fail("could not create an LLVM target machine", "", source, name_hint);
    return BorrowedMachine(*this, std::move(tm));
  }

  void optimize(llvm::Module& mod, const std::string& source, const std::string& name_hint) {
    BorrowedMachine machine = borrow_machine(source, name_hint);
    llvm::TargetMachine* tm = machine.get();
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    if (llvm::Error err = pb.parsePassPipeline(mpm, kKernelPipeline))
      fail("bad LLVM pass pipeline", error_text(std::move(err)), source, name_hint);
    mpm.run(mod, mam);
  }

  std::vector<char> emit(llvm::Module& mod, llvm::CodeGenFileType kind, const std::string& source,
                         const std::string& name_hint) {
    BorrowedMachine tm = borrow_machine(source, name_hint);
    mod.setDataLayout(tm->createDataLayout());
    llvm::SmallVector<char, 0> out;
    llvm::raw_svector_ostream os(out);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, kind))
      fail("the LLVM target cannot emit this file type", "", source, name_hint);
    pm.run(mod);
    return std::vector<char>(out.begin(), out.end());
  }

 private:
  JitTarget target_;
  std::string options_;
  std::mutex tm_mutex_;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_machines_;
};

Compiler& compiler() {
  static Compiler* c = new Compiler();   // never destroyed: kernels may run during exit
  return *c;
}

// The process-wide JIT, created on first use.
class Jit {
 public:
  Jit() {
    init_native_llvm();
    // Generated code calls libm (expf, logf, ...) and LLVM may emit memset/memcpy calls.
    llvm::sys::DynamicLibrary::LoadLibraryPermanently(nullptr);
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) synk::internal_error("LLJIT: cannot describe the host: " + error_text(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) synk::internal_error("LLJIT: cannot create the JIT: " + error_text(jit.takeError()));
    jit_ = std::move(*jit);
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix());
    if (!gen) synk::internal_error("LLJIT: no process symbol generator: " + error_text(gen.takeError()));
    jit_->getMainJITDylib().addGenerator(std::move(*gen));
  }

  std::string add(const std::vector<const std::vector<char>*>& objects, const std::string& name_hint) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string name = fmt::format("{}#{}", name_hint, next_id_++);
    auto jd = jit_->createJITDylib(name);
    if (!jd) synk::internal_error("LLJIT: cannot create JITDylib " + name + ": " + error_text(jd.takeError()));
    jd->addToLinkOrder(jit_->getMainJITDylib());
    for (const std::vector<char>* object : objects) {
      auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object->data(), object->size()), name);
      if (llvm::Error err = jit_->addObjectFile(*jd, std::move(buffer)))
        synk::internal_error("LLJIT: cannot load the object for " + name + ": " + error_text(std::move(err)));
    }
    return name;
  }

  void* lookup(const std::string& dylib, const std::string& symbol) {
    std::lock_guard<std::mutex> lock(mutex_);
    llvm::orc::JITDylib* jd = jit_->getExecutionSession().getJITDylibByName(dylib);
    if (!jd) synk::internal_error("LLJIT: no JITDylib named " + dylib);
    auto sym = jit_->lookup(*jd, symbol);
    if (!sym) synk::internal_error("LLJIT: symbol " + symbol + " not found in " + dylib + ": " + error_text(sym.takeError()));
    return reinterpret_cast<void*>(sym->getAddress());
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  uint64_t next_id_ = 0;
};

Jit& jit() {
  static Jit* j = new Jit();   // never destroyed, like the code it owns
  return *j;
}

std::mutex memory_cache_mutex;
std::map<std::string, std::shared_ptr<LoadedObject>>& memory_cache() {
  static auto* m = new std::map<std::string, std::shared_ptr<LoadedObject>>();
  return *m;
}

// A cache entry holds one object file as it is, or several in a container: the magic, their
// count, then each length (u64) and its bytes. An ELF object starts with 0x7f 'E' 'L' 'F', so
// the two never look alike.
constexpr char kObjectsMagic[8] = {'S', 'Y', 'N', 'K', 'O', 'B', 'J', 'S'};

std::vector<char> pack_objects(const std::vector<std::vector<char>>& objects) {
  if (objects.size() == 1) return objects[0];
  std::vector<char> out(kObjectsMagic, kObjectsMagic + sizeof kObjectsMagic);
  auto put_u64 = [&out](uint64_t v) { out.insert(out.end(), reinterpret_cast<char*>(&v), reinterpret_cast<char*>(&v) + 8); };
  put_u64(objects.size());
  for (const std::vector<char>& o : objects) {
    put_u64(o.size());
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

// nullopt for a container that does not parse (the cache checked its checksum, so only a
// different writer could produce one): treated as a miss.
std::optional<std::vector<std::vector<char>>> unpack_objects(const std::vector<char>& payload) {
  if (payload.size() < sizeof kObjectsMagic || std::memcmp(payload.data(), kObjectsMagic, sizeof kObjectsMagic) != 0)
    return std::vector<std::vector<char>>{payload};
  size_t at = sizeof kObjectsMagic;
  auto get_u64 = [&](uint64_t& v) {
    if (payload.size() - at < 8) return false;
    std::memcpy(&v, payload.data() + at, 8);
    at += 8;
    return true;
  };
  uint64_t count = 0;
  if (!get_u64(count) || count == 0 || count > 64) return std::nullopt;
  std::vector<std::vector<char>> objects;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t n = 0;
    if (!get_u64(n) || payload.size() - at < n) return std::nullopt;
    objects.emplace_back(payload.begin() + long(at), payload.begin() + long(at + n));
    at += n;
  }
  if (at != payload.size()) return std::nullopt;
  return objects;
}

// Compiles each unit on a thread of its own (the first on this one); the compile times of this
// thread become the sums over the units.
std::vector<std::vector<char>> compile_units(const std::vector<std::string>& units, const std::string& name_hint) {
  std::vector<std::vector<char>> objects(units.size());
  std::vector<CompileTimes> times(units.size());
  std::vector<std::exception_ptr> errors(units.size());
  auto compile_one = [&](size_t i) {
    try {
      objects[i] = compile_to_object(units[i], units.size() == 1 ? name_hint : fmt::format("{}_unit{}", name_hint, i));
      times[i] = tls_times;
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < units.size(); ++i) threads.emplace_back(compile_one, i);
  compile_one(0);
  for (std::thread& th : threads) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  CompileTimes sum;
  for (const CompileTimes& c : times) {
    sum.frontend += c.frontend;
    sum.optimize += c.optimize;
    sum.codegen += c.codegen;
  }
  tls_times = sum;
  return objects;
}

}  // namespace

const JitTarget& host_target() { return compiler().target(); }
const std::string& jit_options_string() { return compiler().options(); }

std::vector<char> compile_to_object(const std::string& source, const std::string& name_hint) {
  llvm::LLVMContext ctx;
  make_quiet(ctx);
  std::unique_ptr<llvm::Module> mod = compiler().frontend(source, name_hint, ctx);
  double t0 = thread_cpu_seconds();
  std::vector<char> object = compiler().emit(*mod, llvm::CGFT_ObjectFile, source, name_hint);
  tls_times.codegen = thread_cpu_seconds() - t0;
  return object;
}

std::string compile_to_assembly(const std::string& source, const std::string& name_hint) {
  llvm::LLVMContext ctx;
  make_quiet(ctx);
  std::unique_ptr<llvm::Module> mod = compiler().frontend(source, name_hint, ctx);
  std::vector<char> text = compiler().emit(*mod, llvm::CGFT_AssemblyFile, source, name_hint);
  return std::string(text.begin(), text.end());
}

CompileTimes last_compile_times() { return tls_times; }

void* LoadedObject::lookup(const std::string& symbol) const { return jit().lookup(dylib_name_, symbol); }

std::shared_ptr<LoadedObject> load_object(const std::vector<char>& object, const std::string& name_hint) {
  auto loaded = std::make_shared<LoadedObject>();
  loaded->dylib_name_ = jit().add({&object}, name_hint);
  return loaded;
}

std::shared_ptr<LoadedObject> load_objects(const std::vector<std::vector<char>>& objects, const std::string& name_hint) {
  std::vector<const std::vector<char>*> list;
  for (const std::vector<char>& o : objects) list.push_back(&o);
  auto loaded = std::make_shared<LoadedObject>();
  loaded->dylib_name_ = jit().add(list, name_hint);
  return loaded;
}

int jit_compile_threads() {
  if (const char* v = std::getenv("SYNK_JIT_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 1 && n <= 16) return int(n);
  }
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cpus, 1, 4);
}

CachedCompile compile_cached(const std::string& source, const std::string& name_hint, bool use_disk_cache) {
  return compile_cached(std::vector<std::string>{source}, name_hint, use_disk_cache);
}

CachedCompile compile_cached(const std::vector<std::string>& units, const std::string& name_hint, bool use_disk_cache) {
  if (units.empty()) synk::internal_error("compile_cached: no translation units for " + name_hint);
  const JitTarget& t = host_target();
  std::string features, source;
  for (const std::string& f : t.features) features += f + ",";
  for (const std::string& u : units) source += u;
  CachedCompile result;
  result.key = cache_key({source, jit_options_string(), t.triple, t.cpu, features, t.compiler_version});
  {
    std::lock_guard<std::mutex> lock(memory_cache_mutex);
    auto it = memory_cache().find(result.key);
    if (it != memory_cache().end()) {
      result.object = it->second;
      result.outcome = CacheOutcome::MemoryHit;
      return result;
    }
  }
  std::optional<std::vector<std::vector<char>>> objects;
  KernelCache cache;
  if (use_disk_cache)
    if (std::optional<std::vector<char>> payload = cache.get(result.key)) objects = unpack_objects(*payload);
  result.outcome = objects ? CacheOutcome::DiskHit : CacheOutcome::Compiled;
  if (!objects) {
    objects = compile_units(units, name_hint);
    if (use_disk_cache) cache.put(result.key, pack_objects(*objects));
  }
  result.object = load_objects(*objects, name_hint);
  std::lock_guard<std::mutex> lock(memory_cache_mutex);
  memory_cache().emplace(result.key, result.object);
  return result;
}

void clear_memory_cache_for_tests() {
  std::lock_guard<std::mutex> lock(memory_cache_mutex);
  memory_cache().clear();
}

std::vector<std::string> cc1_kernel_options() {
  std::string rd = SYNK_CLANG_RESOURCE_DIR;
  // -vectorize-loops / -vectorize-slp are what the driver adds at -O2 and above (cc1 does not
  // imply them). math-errno is off in cc1 unless asked for, so sqrt etc. become instructions.
  // -w: the code is ours; warnings would only print "N warnings generated.".
  return {"-O3", "-w", "-vectorize-loops", "-vectorize-slp", "-std=c++17", "-fno-rtti",
          "-mrelocation-model", "pic", "-pic-level", "2", "-ffp-contract=on",
          "-resource-dir", rd, "-internal-isystem", rd + "/include", "-x", "c++"};
}

Cc1Result run_cc1(const std::string& source, const std::vector<std::string>& args, clang::FrontendAction& action,
                  std::string& diagnostics) {
  init_native_llvm();
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back("synk_kernels.cpp");
  llvm::raw_string_ostream diag_os(diagnostics);
  auto ci = std::make_unique<clang::CompilerInstance>();
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts = new clang::DiagnosticOptions();
  ci->createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, diag_opts.get()), true);
  if (!clang::CompilerInvocation::CreateFromArgs(ci->getInvocation(), argv, ci->getDiagnostics())) {
    diag_os.flush();
    return Cc1Result::OptionsRejected;
  }
  // Recreate the diagnostics with the invocation's options so that -w takes effect.
  ci->createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, &ci->getDiagnosticOpts()), true);
  ci->getPreprocessorOpts().addRemappedFile(
      "synk_kernels.cpp", llvm::MemoryBuffer::getMemBufferCopy(source, "synk_kernels.cpp").release());
  // ExecuteAction reports "N warnings generated." on this stream; the text goes with errors.
  ci->setVerboseOutputStream(diag_os);
  bool ok = ci->ExecuteAction(action) && !ci->getDiagnostics().hasErrorOccurred();
  diag_os.flush();
  return ok ? Cc1Result::Ok : Cc1Result::Failed;
}

}  // namespace synk::compiler
