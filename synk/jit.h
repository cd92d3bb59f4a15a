// The public JIT API: compile a .synk file, a .synk string or a module built in C++
// (dsl::ModuleBuilder) at run time, and call its functions data-parallel through the runtime.
//
//   synk::fork(2);
//   synk::jit::Module mod = synk::jit::load_file("examples/intro.synk");
//   synk::Function f = mod.function("f");           // compiled (or found in the kernel cache)
//   synk::Outputs r = f({x, y});                      // x, y: synk::Data
//   synk::Array s = mod.shared("s").get_value();     // a shared variable, by name
//   synk::TrainStep step = mod.train_step("train");  // a function with `minimize` (docs/training.md)
//
// A jit::Module registers its shared variables with the runtime once (one copy per rank) and
// each function the first time it is asked for. Modules and functions may be created before or
// after synk::fork(): a function created after the fork is rebuilt in every worker by the loader
// of kind "jit", whose payload is the function's name and the module's text (the user's source,
// so that messages quote its lines; for a module built in C++, its printed IR); the worker
// compiles exactly the code the master compiled, so it finds it in the kernel cache.
// Documented with a complete example in docs/jit.md.
//
// Errors: a wrong program (syntax, types, shapes, an op the CPU backend cannot run) is a
// synk::UserError with every diagnostic; a wrong use of this API (an unknown function or shared
// variable name) and every call-time error are the runtime's synk::UsageError / synk::RankError.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsl/builder.h"
#include "ir/ir.h"
#include "synk/shared_variable.h"
#include "synk/synk.h"

namespace synk::jit {

// The loader kind functions created by this API are registered with.
inline constexpr const char* kLoaderKind = "jit";

struct CompileOptions {
  // Resolves relative `load("...")` paths of a string or C++-built module; empty: the current
  // directory. (A file's own directory is used for load_file.)
  std::string base_dir;
  bool use_disk_cache = true;    // false: every function is compiled by Clang (benchmarks)
};

struct ModuleFactory;

// One shared variable of a jit::Module: its rank-0 (master) copy, or any rank's copy.
using Shared = synk::SharedVariable;

// A compiled module: a handle (copies share the same functions and shared variables).
class Module {
 public:
  Module() = default;

  // Function `name`, compiled for the group's backend (CPU or GPU: compiler/backend_function.h)
  // and registered with the runtime on first use; later calls return the same handle.
  // UsageError for an unknown name (listing the module's functions); synk::UserError when the
  // backend cannot compile it.
  synk::Function function(const std::string& name);
  // Compiles and registers every function now (what to call before synk::fork() when workers
  // should inherit everything instead of rebuilding it).
  void compile_all();

  // UsageError for an unknown name (listing the module's shared variables).
  Shared shared(const std::string& name) const;

  // The training step of function `name` (one that minimizes a loss with an optimizer): its
  // gradient function, its optimizer's flat-gradient variable and update function, compiled and
  // registered like function(). UsageError when `name` is not a training function (listing the
  // module's training functions). num_packs > 0: the gradient's all_reduce uses that many packs
  // (0: what the optimizer declares with `num_packs=`, else the collectives' default). Every step
  // made for `name` shares one step index (what a schedule reads), which checkpoints save.
  synk::TrainStep train_step(const std::string& name, int64_t num_packs = 0);
  std::vector<std::string> train_step_names() const;

  // Checkpoints (synk/checkpoint.h): every shared variable but the sliceable ones and the training
  // steps' flat gradients (`<optimizer>_grads`, overwritten by every step), the random
  // state of the functions compiled so far and every training step's step index; loading compiles the functions the checkpoint names
  // and restores everything on every rank. A resumed run equals the uninterrupted one bit for bit.
  void save_checkpoint(const std::string& dir, const CheckpointMetadata& metadata = {});
  CheckpointMetadata load_checkpoint(const std::string& dir);

  std::vector<std::string> function_names() const;
  std::vector<std::string> shared_names() const;
  // The module as compiled, and its printed IR (dsl::print_module).
  const ir::Module& ir() const;
  const std::string& ir_text() const;
  synk::Module runtime_module() const;   // the runtime's handle (a copy of it)

 private:
  struct State;
  friend struct ModuleFactory;
  explicit Module(std::shared_ptr<State> state) : state_(std::move(state)) {}
  State& state() const;
  std::shared_ptr<State> state_;
};

// The front end, then the training-step expansion (compiler/grad/train.h: every used optimizer's
// update function and state), then registration of the shared variables. synk::UserError with every
// diagnostic when the program is wrong (or the file cannot be read).
Module load_file(const std::string& path, const CompileOptions& options = {});
Module compile_string(const std::string& text, const CompileOptions& options = {},
                      const std::string& source_name = "<string>");
// `module` is the front end's result (training steps not yet expanded: a UsageError otherwise).
Module compile(const ir::Module& module, const CompileOptions& options = {});
Module compile(const dsl::ModuleBuilder& builder, const CompileOptions& options = {});

// The module of a loadable library written by `synkc MODEL.synk -o libMODEL.so`
// (synk::aot::load_library): the same Module interface, whose functions are the library's
// compiled kernels (nothing is compiled at run time; with GPU images, the GPU runs them too).
// UsageError when the file is not such a library (the message says why).
Module load_library(const std::string& path);

// Registers the "jit" loader with the runtime. Runs automatically when this library's JIT API is
// linked into a program (before main); calling it again does nothing. Must happen before
// synk::fork() for workers to rebuild functions created after it.
void register_loader();

}  // namespace synk::jit
