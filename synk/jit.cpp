// The JIT API (synk_jit.h): front end -> canonical module -> runtime registration, functions
// compiled on demand through the CPU pipeline and the kernel cache, and the "jit" loader that
// rebuilds them in workers forked before they existed.
//
// One text per module: a module is always the front end's result on some text (the user's
// source; for a module built in C++, its printed IR with load paths made absolute), and workers
// receive that text, its name and its directory and run the same front end on it. So both sides
// hold identical IR (source locations included), generate byte-identical kernel source, and the
// workers' compiles are kernel-cache hits.
#include "synk/jit.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"
#include "compiler/backend_function.h"
#include "compiler/backend/signature.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/grad/grad.h"
#include "compiler/grad/train.h"
#include "compiler/pipeline.h"
#include "dsl/frontend.h"
#include "synk/aot_module.h"

namespace synk::jit {

// What a worker needs to build exactly the module the master compiled: the text the front end
// read (the user's own source, or the printed IR of a module built in C++), the name it was read
// under (diagnostics and run-time messages quote it with line and column) and the absolute
// directory of relative load() paths.
struct ModuleSource {
  std::string name;
  std::string base_dir;
  std::string text;
};

namespace {

ir::Module read_source(const ModuleSource& source) {
  return compiler::prepare_module(source.name, source.text, source.base_dir);
}

// Runs on the backend of the group it is called in (compiler/backend_function.h).
std::shared_ptr<rt::CompiledFunction> make_function(std::shared_ptr<const ir::Module> module, const std::string& name,
                                                    const compiler::CpuCompileOptions& options) {
  compiler::CudaCompileOptions cuda;
  cuda.use_disk_cache = options.use_disk_cache;
  return std::make_shared<compiler::BackendFunction>(
      module, name, [module, name, options] { return compiler::compile_cpu_function(*module, name, options); }, cuda);
}

// Payload of a "jit" function: four length-prefixed fields (function, source name, base
// directory, text), each as "<decimal length>:<bytes>".
std::string encode_payload(const std::string& function, const ModuleSource& source) {
  std::string out;
  for (const std::string* field : {&function, &source.name, &source.base_dir, &source.text})
    out += std::to_string(field->size()) + ":" + *field;
  return out;
}

std::vector<std::string> decode_payload(const std::string& payload) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (pos < payload.size()) {
    size_t colon = payload.find(':', pos);
    if (colon == std::string::npos || colon == pos) break;
    size_t length = std::stoull(payload.substr(pos, colon - pos));
    if (colon + 1 + length > payload.size()) break;
    fields.push_back(payload.substr(colon + 1, length));
    pos = colon + 1 + length;
  }
  if (pos != payload.size() || fields.size() != 4)
    throw InternalError("jit loader: a malformed payload (" + std::to_string(payload.size()) + " bytes)");
  return fields;
}

std::shared_ptr<rt::CompiledFunction> load_in_worker(const std::string& payload) {
  std::vector<std::string> fields = decode_payload(payload);
  ModuleSource source{fields[1], fields[2], fields[3]};
  // Functions of one module arrive one by one; run the front end once per module and process.
  // Its functions keep the IR: once every one is released (registry.h) it goes, and its entry
  // with the next module's.
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const ir::Module>> modules;
  std::shared_ptr<const ir::Module> module;
  {
    std::lock_guard lock(mutex);
    const std::string key = source.name + '\0' + source.base_dir + '\0' + source.text;
    if (auto it = modules.find(key); it != modules.end()) module = it->second.lock();
    if (!module) {
      std::erase_if(modules, [](const auto& entry) { return entry.second.expired(); });
      // The master checked the module's load() files; this rank's values come from it.
      module = std::make_shared<const ir::Module>(
          compiler::prepare_module(source.name, source.text, source.base_dir, nullptr, dsl::LoadFiles::Trusted));
      modules[key] = module;
    }
  }
  return make_function(module, fields[0], {});
}

[[maybe_unused]] const bool g_loader_registered_at_startup = [] {
  register_loader();
  return true;
}();

}  // namespace

void register_loader() {
  static bool done = false;
  if (done) return;
  synk::register_loader(kLoaderKind, load_in_worker);
  aot::register_loader();   // libraries loaded after fork (load_library)
  done = true;
}

struct Module::State {
  ModuleSource source;
  ir::Module ir;                        // what the front end made of source
  std::string ir_text;                  // printed on demand
  synk::Module runtime;
  compiler::CpuCompileOptions compile_options;
  std::shared_ptr<const ir::Module> shared_ir;   // a copy of ir that functions keep for their other backend
  std::map<std::string, synk::Function, std::less<>> functions;
  synk::detail::StepCounts step_counts;   // shared by the TrainSteps made for each training function
  // Set for a loadable library's module (load_library): its functions come from there, and its
  // step counts and checkpoints are the library module's, shared by every handle of it.
  const aot::ModuleDef* library = nullptr;
};

Module::State& Module::state() const {
  if (!state_) throw UsageError("use of an empty synk::jit::Module handle (create it with jit::load_file or jit::compile)");
  return *state_;
}

synk::Function Module::function(const std::string& name) {
  State& s = state();
  if (auto it = s.functions.find(name); it != s.functions.end()) return it->second;
  if (!s.ir.find_function(name))
    throw UsageError(fmt::format("jit::Module::function: no function named '{}'{} (the module has: {})", name,
                                 did_you_mean(name, function_names()), function_names().empty() ? std::string("no functions")
                                                          : fmt::format("{}", fmt::join(function_names(), ", "))));
  synk::Function f;
  if (s.library) {
    f = aot::function(*s.library, name);
  } else {
    if (!s.shared_ir) s.shared_ir = std::make_shared<const ir::Module>(s.ir);
    std::shared_ptr<rt::CompiledFunction> compiled = make_function(s.shared_ir, name, s.compile_options);
    f = synk::function(std::move(compiled), s.runtime, kLoaderKind, encode_payload(name, s.source));
  }
  s.functions.emplace(name, f);
  return f;
}

void Module::save_checkpoint(const std::string& dir, const CheckpointMetadata& metadata) {
  State& s = state();
  if (s.library) return aot::save_checkpoint(*s.library, dir, metadata);
  std::vector<synk::Function> compiled;
  for (const auto& [name, f] : s.functions) compiled.push_back(f);
  synk::save_checkpoint(s.runtime, compiled, dir, metadata, s.step_counts.saved(train_step_names()),
                        synk::detail::gradient_buffers(s.ir));
}

CheckpointMetadata Module::load_checkpoint(const std::string& dir) {
  State& s = state();
  if (s.library) return aot::load_checkpoint(*s.library, dir);
  const ScratchVariables scratch = synk::detail::gradient_buffers(s.ir);
  auto functions_for = [&](const std::vector<std::string>& named) {
    for (const std::string& name : named)
      if (s.ir.find_function(name)) function(name);
    // Every compiled function: those the checkpoint names get its random state, the others step 0.
    std::vector<synk::Function> compiled;
    for (const auto& [name, f] : s.functions) compiled.push_back(f);
    return compiled;
  };
  return synk::detail::load_with_step_counts(s.runtime, dir, scratch, train_step_names(), functions_for,
                                             [&](const StepIndices& steps) { s.step_counts.restore(steps); });
}

void Module::compile_all() {
  for (const std::string& name : function_names()) function(name);
}

Shared Module::shared(const std::string& name) const {
  State& s = state();
  if (s.ir.find_shared(name) < 0)
    throw UsageError(fmt::format("jit::Module::shared: no shared variable named '{}'{} (the module has: {})", name,
                                 did_you_mean(name, shared_names()), shared_names().empty() ? std::string("no shared variables")
                                                        : fmt::format("{}", fmt::join(shared_names(), ", "))));
  return Shared(s.runtime, name);
}

synk::TrainStep Module::train_step(const std::string& name, int64_t num_packs) {
  if (num_packs < 0)
    throw UsageError(fmt::format("jit::Module::train_step('{}'): num_packs must be >= 0 (0: the optimizer's), got {}",
                                 name, num_packs));
  State& s = state();
  const ir::TrainStep* step = s.ir.find_train_step(name);
  if (!step) {
    std::vector<std::string> names = train_step_names();
    throw UsageError(fmt::format("jit::Module::train_step: '{}' is not a training function (one with 'minimize'){} ({})",
                                 name, did_you_mean(name, names), names.empty() ? std::string("the module has none")
                                                     : fmt::format("the module has: {}", fmt::join(names, ", "))));
  }
  const ir::Optimizer& optimizer = s.ir.optimizers.at(size_t(step->optimizer));
  const std::string gradient_var = s.ir.shareds.at(size_t(optimizer.gradient)).name;
  std::vector<HyperParameter> hyper;
  for (const auto& [keyword, variable] : dsl::hyper_parameter_variables(optimizer)) {
    // At run time lr may be 0 (synk::HyperRange): Positive becomes NonNegative.
    const HyperRange range =
        dsl::hyper_parameter_range(keyword) == dsl::HyperRange::Unit ? HyperRange::Unit : HyperRange::NonNegative;
    hyper.push_back(HyperParameter{keyword, shared(variable).var(), range});
  }
  synk::TrainStep made(name, function(name), shared(gradient_var).var(), function(optimizer.update_function()),
                       num_packs > 0 ? num_packs : optimizer.num_packs, std::move(hyper));
  if (s.library) return aot::train_step(*s.library, std::move(made));
  synk::detail::share_step_count(made, s.step_counts.of(name));
  return made;
}

std::vector<std::string> Module::train_step_names() const {
  std::vector<std::string> names;
  for (const ir::TrainStep& step : state().ir.train_steps) names.push_back(step.function);
  return names;
}


std::vector<std::string> Module::function_names() const {
  std::vector<std::string> names;
  for (const ir::Function& f : state().ir.functions) names.push_back(f.name);
  return names;
}

std::vector<std::string> Module::shared_names() const {
  std::vector<std::string> names;
  for (const ir::SharedVar& v : state().ir.shareds) names.push_back(v.name);
  return names;
}

const ir::Module& Module::ir() const { return state().ir; }
const std::string& Module::ir_text() const {
  State& s = state();
  if (s.ir_text.empty()) s.ir_text = dsl::print_module(s.ir);
  return s.ir_text;
}
synk::Module Module::runtime_module() const { return state().runtime; }

namespace {

std::string absolute_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  return (dir.empty() ? fs::current_path() : fs::absolute(dir)).lexically_normal().string();
}

}  // namespace

struct ModuleFactory {
  static Module make(ModuleSource source, ir::Module ir, const CompileOptions& options);
  static Module make_prebuilt(const aot::ModuleDef& def);
};

Module ModuleFactory::make_prebuilt(const aot::ModuleDef& def) {
  auto state = std::make_shared<Module::State>();
  state->source = ModuleSource{def.source_name, def.base_dir, def.text};
  state->ir = aot::prepared_module(def);
  state->runtime = aot::runtime_module(def);
  state->library = &def;
  return Module(std::move(state));
}

Module load_library(const std::string& path) { return ModuleFactory::make_prebuilt(aot::load_library(path)); }

namespace {

// Functions compile on first use, but a gradient the program cannot have is an error of the
// program, reported with the others when it compiles (as `synkc check` does), not at that
// function's first call. The expansion itself is cheap (2 ms for ResNet-20).
void check_gradients(const ModuleSource& source, const ir::Module& ir) {
  if (!compiler::has_gradients(ir)) return;
  try {
    (void)compiler::expand_gradients(ir);
  } catch (const synk::LocatedUserError& e) {
    synk::throw_in_source(SourceFile(source.name, source.text), e);
  }
}

}  // namespace

Module ModuleFactory::make(ModuleSource source, ir::Module ir, const CompileOptions& options) {
  check_gradients(source, ir);
  auto state = std::make_shared<Module::State>();
  // Every dtype must exist in the runtime before anything is registered.
  for (const ir::SharedVar& v : ir.shareds) (void)compiler::runtime_dtype(v.type.dtype);
  state->runtime = synk::module(compiler::module_spec(ir, source.base_dir));
  state->source = std::move(source);
  state->ir = std::move(ir);
  state->compile_options.use_disk_cache = options.use_disk_cache;
  return Module(std::move(state));
}

Module compile(const ir::Module& module, const CompileOptions& options) {
  if (compiler::training_steps_expanded(module))
    throw UsageError("jit::compile: the module's training steps are already expanded (compiler::"
                     "expand_training_steps); pass the front end's module, which jit::compile expands itself");
  // A module built in C++ has no text of its own: workers get its printed IR, which must read
  // back; the master compiles the read-back module too, so both generate the same kernels.
  ModuleSource source{"<jit module>", "/",
                      dsl::print_module(compiler::with_absolute_load_paths(module, absolute_dir(options.base_dir)))};
  ir::Module ir;
  try {
    ir = read_source(source);
  } catch (const synk::UserError& e) {
    synk::internal_error(fmt::format("the printed module does not compile again: {}\n--- printed module ---\n{}",
                                    e.what(), source.text));
  }
  return ModuleFactory::make(std::move(source), std::move(ir), options);
}

Module compile(const dsl::ModuleBuilder& builder, const CompileOptions& options) {
  return compile(builder.build(), options);
}

Module compile_string(const std::string& text, const CompileOptions& options, const std::string& source_name) {
  ModuleSource source{source_name, absolute_dir(options.base_dir), text};
  std::string warnings;
  ir::Module ir = compiler::prepare_module(source.name, source.text, source.base_dir, &warnings);
  if (!warnings.empty()) std::cerr << warnings << std::flush;   // as synkc prints them
  return ModuleFactory::make(std::move(source), std::move(ir), options);
}

Module load_file(const std::string& path, const CompileOptions& options) {
  refuse_nul_in_path(path, "load");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw synk::UserError(fmt::format("cannot read '{}': {}", path, std::strerror(EISDIR)));
  std::ifstream file(path, std::ios::binary);
  if (!file) throw synk::UserError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw synk::UserError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::string dir = std::filesystem::path(path).parent_path().string();
  return compile_string(text.str(), CompileOptions{.base_dir = dir.empty() ? "." : dir,
                                                   .use_disk_cache = options.use_disk_cache}, path);
}

}  // namespace synk::jit
