// The run-time half of ahead-of-time modules (aot_runtime.h): a per-process table of the modules
// linked into the binary, their front-end result built once, and CpuFunctions whose kernel
// entries come from the stub's static symbol table. The kernel source is regenerated here (same
// lower(), same code generator) only to compare its hash with the one synkc baked in: a binary
// whose objects and stub disagree fails loudly instead of running kernels of another plan.
#include "synk/aot_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"
#include "compiler/aot/aot.h"
#include "compiler/backend/signature.h"
#include "compiler/backend_function.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/lower.h"
#include "compiler/pipeline.h"
#include "base/npy_format.h"
#include "runtime/data/npy.h"

namespace synk::aot {

static_assert(std::string_view(kLibrarySymbol) == std::string_view(compiler::aot::kLibraryEntrySymbol),
              "synkc writes the library's entry under the name load_library looks up");

namespace {

// What one process knows of one linked module.
struct ModuleState {
  const ModuleDef* def = nullptr;
  int definitions = 0;                        // > 1: two artifacts with one name
  std::shared_ptr<const ir::Module> ir;       // built on first use
  synk::Module runtime;                       // registered on first use (master side)
  bool runtime_registered = false;
  std::string library;                        // the loadable library it came from (load_library), if any
  std::map<std::string, synk::Function, std::less<>> functions;
  synk::detail::StepCounts step_counts;       // shared by the TrainSteps made for each training function
};

std::mutex& table_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::map<std::string, ModuleState, std::less<>>& table() {
  static auto* t = new std::map<std::string, ModuleState, std::less<>>();
  return *t;
}

// Whether the module reads a load() file from disk at run time (built with --no-embed-data):
// the only input of the front end that can change after synkc.
bool reads_files_at_run_time(const ModuleDef& def) {
  static const std::regex load_call(R"re(\bload\s*\(\s*"([^"]*)")re");
  const std::string text = def.text;
  for (std::sregex_iterator it(text.begin(), text.end(), load_call), end; it != end; ++it) {
    const std::filesystem::path path((*it)[1].str());
    const std::filesystem::path full = path.is_absolute() ? path : std::filesystem::path(def.base_dir) / path;
    if (!synk::is_embedded_npy(full.string())) return true;
  }
  return false;
}

// The module as synkc saw it, from the source baked into the stub. It compiled then, so an error
// now is the user's only when a load() file on disk changed or went away since; otherwise synk's.
ir::Module front_end(const ModuleDef& def) {
  try {
    return synk::compiler::prepare_module(def.source_name, def.text, def.base_dir);
  } catch (const synk::UserError& e) {
    if (reads_files_at_run_time(def))
      throw synk::UserError(fmt::format("aot module '{}' (built with --no-embed-data, so it reads its load() files "
                                        "at run time): {}", def.name, e.what()));
    throw synk::InternalError(fmt::format("aot module '{}': its baked source {} no longer compiles:\n{}", def.name,
                                          def.source_name, e.what()));
  }
}

// The state of a registered module; the caller holds table_mutex().
ModuleState& state_locked(const ModuleDef& def) {
  auto it = table().find(def.name);
  if (it == table().end()) {
    register_module(&def);   // a ModuleDef used without its stub's initialiser (tests)
    it = table().find(def.name);
  }
  ModuleState& s = it->second;
  if (s.definitions > 1)
    throw synk::InternalError(fmt::format("aot module '{}' is linked into this program {} times (two artifacts "
                                          "with one module name; rename one .synk file or pass --name)",
                                          def.name, s.definitions));
  if (!s.ir) s.ir = std::make_shared<const ir::Module>(front_end(*s.def));
  return s;
}

// The linked CPU version, checked against the code regenerated from the baked source.
std::unique_ptr<rt::CompiledFunction> build_cpu_function(const ModuleDef& def, const ir::Module& module,
                                                         const ir::Function& fn, const FunctionTable* table_entry) {
  compiler::KernelPlan plan = compiler::lower(module, fn, compiler::cpu_lower_options());
  std::string source = compiler::generate_cpu_source(module, plan, def.name);
  uint64_t hash = source_hash(source);
  if (hash != table_entry->source_hash)
    throw synk::InternalError(fmt::format(
        "aot module '{}', function '{}': the linked kernels were generated from other code (hash {:016x}, this "
        "program's synk regenerates {:016x}); rebuild the artifact with the synkc of the synk it links",
        def.name, fn.name, table_entry->source_hash, hash));
  compiler::KernelCode code;
  code.lookup = [&def, table_entry](const std::string& symbol) -> void* {
    for (size_t i = 0; i < table_entry->kernel_count; ++i)
      if (symbol == table_entry->kernels[i].name) return reinterpret_cast<void*>(table_entry->kernels[i].entry);
    throw synk::InternalError(fmt::format("aot module '{}', function '{}': no linked kernel '{}'", def.name,
                                          table_entry->name, symbol));
  };
  return std::make_unique<compiler::CpuFunction>(module, std::move(plan), std::move(source), std::move(code));
}

// The stub's GPU images as the CUDA backend's image set (pointing into the stub's static data).
std::shared_ptr<const compiler::CudaImageSet> gpu_images(const FunctionTable& entry) {
  auto set = std::make_shared<compiler::CudaImageSet>();
  set->function = entry.name;
  set->source_hash = entry.cuda_source_hash;
  for (size_t i = 0; i < entry.gpu_image_count; ++i) {
    const GpuImage& g = entry.gpu_images[i];
    compiler::CudaImage image;
    image.sm = g.sm;
    image.ptx = g.kind == GpuImageKind::Ptx;
    image.arch_specific = g.kind == GpuImageKind::ArchSpecificCubin;
    image.min_driver = g.min_driver;
    image.data = g.begin;
    image.size = size_t(g.end - g.begin);
    set->images.push_back(std::move(image));
  }
  return set;
}

// The function: the linked CPU kernels, and with GPU images a version per backend.
std::shared_ptr<rt::CompiledFunction> build_function(const ModuleDef& def, std::shared_ptr<const ir::Module> module,
                                                     const std::string& name) {
  const ir::Function* fn = module->find_function(name);
  const FunctionTable* table_entry = nullptr;
  for (size_t i = 0; i < def.function_count; ++i)
    if (name == def.functions[i].name) table_entry = &def.functions[i];
  if (!fn || !table_entry)
    throw synk::InternalError(fmt::format("aot module '{}': function '{}' is {}", def.name, name,
                                          fn ? "not in the linked kernel table" : "not in the baked source"));
  if (table_entry->gpu_image_count == 0) return build_cpu_function(def, *module, *fn, table_entry);
  compiler::CudaCompileOptions cuda;
  cuda.prebuilt = gpu_images(*table_entry);
  const ir::Module* raw = module.get();
  return std::make_shared<compiler::BackendFunction>(
      module, name, [&def, raw, fn, table_entry] { return build_cpu_function(def, *raw, *fn, table_entry); },
      std::move(cuda));
}

// Payload of an "aot" function: module name, '\0', function name, and for a module of a loadable
// library '\0' and the library's path (a worker forked before the library was loaded loads it).
std::string encode_payload(const ModuleState& s, const std::string& function_name) {
  std::string payload = std::string(s.def->name) + '\0' + function_name;
  if (!s.library.empty()) payload += '\0' + s.library;
  return payload;
}

std::shared_ptr<rt::CompiledFunction> load_in_worker(const std::string& payload) {
  size_t zero = payload.find('\0');
  if (zero == std::string::npos) throw synk::InternalError("aot loader: a malformed payload");
  size_t second = payload.find('\0', zero + 1);
  std::string module_name = payload.substr(0, zero), function_name = payload.substr(zero + 1, second - zero - 1);
  if (second != std::string::npos) load_library(payload.substr(second + 1));
  std::shared_ptr<const ir::Module> module;
  const ModuleDef* def = nullptr;
  {
    std::lock_guard lock(table_mutex());
    auto it = table().find(module_name);
    if (it == table().end())
      throw synk::InternalError(fmt::format("aot loader: module '{}' is not linked into this worker", module_name));
    ModuleState& s = state_locked(*it->second.def);
    module = s.ir;
    def = s.def;
  }
  return build_function(*def, module, function_name);
}

std::string names_or(const std::vector<std::string>& names, const char* none) {
  return names.empty() ? std::string(none) : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

bool embed_data(const char* path, const char* begin, const char* end) {
  embed_npy(path, begin, size_t(end - begin));
  rt::npy::embed(path, begin, size_t(end - begin));
  return true;
}

void register_loader() {
  static const bool registered = [] {
    synk::register_loader(kLoaderKind, load_in_worker);
    return true;
  }();
  (void)registered;
}

bool register_module(const ModuleDef* def) {
  register_loader();
  std::lock_guard lock(table_mutex());
  ModuleState& s = table()[def->name];
  if (s.def != def) {
    s.definitions++;
    if (!s.def) s.def = def;
  }
  return true;
}

const ModuleDef& load_library(const std::string& path) {
  refuse_nul_in_path(path, "load_library");
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec).lexically_normal();
  if (!std::filesystem::is_regular_file(absolute, ec))
    throw UsageError(fmt::format("load_library: cannot read '{}': {}", path,
                                 std::filesystem::exists(absolute, ec) ? "not a regular file" : "no such file"));
  const std::string ext = absolute.extension().string();
  if (ext == ".synk" || ext == ".a")
    throw UsageError(fmt::format("load_library: '{}' is {}; build a loadable library with `synkc {} -o libNAME.so`",
                                 path, ext == ".synk" ? "a .synk source (synk.load / jit::load_file compile it)"
                                                      : "a static archive, for C++ programs that link it",
                                 ext == ".synk" ? path : std::string("MODEL.synk")));
  // Never closed: the runtime keeps pointers into the library's tables and kernels.
  void* handle = ::dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw UsageError(fmt::format("load_library: cannot load '{}': {}", path, ::dlerror()));
  struct CloseUnlessKept {   // a library refused below is unloaded again
    void* handle;
    ~CloseUnlessKept() { if (handle) ::dlclose(handle); }
  } guard{handle};
  using Entry = const LibraryDef* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, kLibrarySymbol));
  if (!entry)
    throw UsageError(fmt::format("load_library: '{}' is not a synk library (no symbol {}; build one with "
                                 "`synkc MODEL.synk -o libMODEL.so`)", path, kLibrarySymbol));
  const LibraryDef* library = entry();
  if (!library || library->abi != kLibraryAbi || library->module_def_size != sizeof(ModuleDef))
    throw UsageError(fmt::format("load_library: '{}' was written by a synkc of another synk version (library "
                                 "format {}, this synk reads {}); rebuild it with this synk's synkc", path,
                                 library ? library->abi : 0, kLibraryAbi));
  const ModuleDef& def = *library->module;
  {
    std::lock_guard lock(table_mutex());
    auto it = table().find(def.name);
    if (it != table().end() && it->second.def != &def)
      throw UsageError(fmt::format("load_library: '{}' holds module '{}', and a module of that name is already {} "
                                   "(rename one .synk file, or pass synkc --name)", path, def.name,
                                   it->second.library.empty() ? "linked into this program"
                                                              : "loaded from '" + it->second.library + "'"));
    guard.handle = nullptr;
    if (it != table().end()) return def;   // this library, loaded before
  }
  for (size_t i = 0; i < library->data_count; ++i)
    embed_data(library->data[i].path, library->data[i].begin, library->data[i].end);
  register_module(&def);
  std::lock_guard lock(table_mutex());
  table()[def.name].library = absolute.string();
  return def;
}

const ir::Module& prepared_module(const ModuleDef& def) {
  std::lock_guard lock(table_mutex());
  return *state_locked(def).ir;   // built once, never replaced
}

synk::Module runtime_module(const ModuleDef& def) {
  std::lock_guard lock(table_mutex());
  ModuleState& s = state_locked(def);
  if (!s.runtime_registered) {
    // Every dtype must exist in the runtime before anything is registered.
    for (const ir::SharedVar& v : s.ir->shareds) (void)compiler::runtime_dtype(v.type.dtype);
    s.runtime = synk::module(compiler::module_spec(*s.ir, def.base_dir));
    s.runtime_registered = true;
  }
  return s.runtime;
}

synk::Function function(const ModuleDef& def, const std::string& name) {
  synk::Module runtime = runtime_module(def);
  std::shared_ptr<const ir::Module> module;
  std::string payload;
  {
    std::lock_guard lock(table_mutex());
    ModuleState& s = state_locked(def);
    if (auto it = s.functions.find(name); it != s.functions.end()) return it->second;
    module = s.ir;
    payload = encode_payload(s, name);
  }
  bool linked = false;
  for (size_t i = 0; i < def.function_count; ++i) linked |= name == def.functions[i].name;
  if (module->find_function(name) && !linked)
    throw UsageError(fmt::format("aot module '{}': function '{}' was left out of this artifact (synkc --fn); it has: {}",
                                 def.name, name, names_or(function_names(def), "no functions")));
  if (!linked)
    throw UsageError(fmt::format("aot module '{}': no function named '{}'{} (the module has: {})", def.name, name,
                                 did_you_mean(name, function_names(def)), names_or(function_names(def), "no functions")));
  synk::Function f = synk::function(build_function(def, module, name), runtime, kLoaderKind, payload);
  std::lock_guard lock(table_mutex());
  return table()[def.name].functions.emplace(name, f).first->second;
}

void load_all(const ModuleDef& def) {
  for (const std::string& name : function_names(def)) function(def, name);
}

std::vector<std::string> function_names(const ModuleDef& def) {
  std::vector<std::string> names;
  for (size_t i = 0; i < def.function_count; ++i) names.push_back(def.functions[i].name);
  return names;
}

namespace {
std::vector<synk::Function> all_functions(const ModuleDef& def) {
  std::vector<synk::Function> out;
  for (const std::string& name : function_names(def)) out.push_back(function(def, name));
  return out;
}

std::vector<std::string> train_function_names(const ModuleDef& def) {
  std::vector<std::string> names;
  for (const ir::TrainStep& step : prepared_module(def).train_steps) names.push_back(step.function);
  return names;
}
}  // namespace

synk::TrainStep train_step(const ModuleDef& def, synk::TrainStep made) {
  std::lock_guard lock(table_mutex());
  synk::detail::share_step_count(made, state_locked(def).step_counts.of(made.name()));
  return made;
}

void save_checkpoint(const ModuleDef& def, const std::string& dir, const CheckpointMetadata& metadata) {
  const std::vector<std::string> trainable = train_function_names(def);
  StepIndices steps;
  {
    std::lock_guard lock(table_mutex());
    steps = state_locked(def).step_counts.saved(trainable);
  }
  synk::save_checkpoint(runtime_module(def), all_functions(def), dir, metadata, steps,
                        synk::detail::gradient_buffers(prepared_module(def)));
}

CheckpointMetadata load_checkpoint(const ModuleDef& def, const std::string& dir) {
  const ScratchVariables scratch = synk::detail::gradient_buffers(prepared_module(def));
  return synk::detail::load_with_step_counts(
      runtime_module(def), dir, scratch, train_function_names(def),
      [&](const std::vector<std::string>&) { return all_functions(def); },
      [&](const StepIndices& steps) {
        std::lock_guard lock(table_mutex());
        state_locked(def).step_counts.restore(steps);
      });
}

std::vector<std::string> shared_names(const ModuleDef& def) {
  std::lock_guard lock(table_mutex());
  std::vector<std::string> names;
  for (const ir::SharedVar& v : state_locked(def).ir->shareds) names.push_back(v.name);
  return names;
}

Shared shared(const ModuleDef& def, const std::string& name) {
  std::vector<std::string> names = shared_names(def);
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw UsageError(fmt::format("aot module '{}': no shared variable named '{}'{} (the module has: {})", def.name,
                                 name, did_you_mean(name, names), names_or(names, "no shared variables")));
  return Shared(runtime_module(def), name);
}

}  // namespace synk::aot
