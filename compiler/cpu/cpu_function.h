// A function compiled for the CPU, as the runtime sees it (rt::CompiledFunction): the kernel
// plan, the JIT-compiled kernels, and the host code that binds symbolic dims from the argument
// shapes, keeps intermediate buffers across calls, runs kernels and BLAS calls in plan order,
// and fills outputs and updates.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/kernel_cache.h"
#include "compiler/backend/symbol_binding.h"
#include "compiler/passes/kernel_plan.h"
#include "ir/ir.h"
#include "runtime/call/descriptor.h"
#include "runtime/call/step_profile.h"

namespace synk::compiler {

// Where a CpuFunction's kernel entry points come from: the JIT (compile_cpu_function, cpu_jit.cpp)
// or code linked ahead of time (synkc's host stubs). Kept separate so that running a function
// needs no LLVM.
struct KernelCode {
  std::function<void*(const std::string& symbol)> lookup;   // address of an extern "C" kernel
  std::shared_ptr<const void> keep_alive;                  // owner of the code, if any
  CacheOutcome outcome = CacheOutcome::Compiled;
};

struct CpuCompileOptions {
  bool use_disk_cache = true;   // false: always compile (benchmarks of the cold path)
  bool fuse = true;             // false: one kernel per op (benchmarks of what fusion saves)
};

// A step whose copy is elided (cpu_function.cpp, find_elisions): its temporaries live inside
// another buffer at offsets fixed per call.
struct CopyElision {
  size_t step = 0;
  bool concat = false;        // else: a slice
  int within = -1;            // the buffer the temporaries live in
  std::vector<int> temps;     // concat: per operand, in order; slice: the one copy
  std::vector<char> repeat;   // concat, per operand: 1 when it repeats an earlier one (copied)
};

// Runs one conv2d / pooling step (KernelKind::Dnn) on buffers of these shapes (cpu_dnn.cpp).
void run_dnn_step(const KernelPlan& plan, const Kernel& k, const std::vector<std::vector<int64_t>>& shapes,
                  const std::vector<void*>& pointers);

class CpuFunction : public rt::CompiledFunction {
 public:
  // Entry point of one generated kernel (codegen_cpu.h).
  using KernelEntry = int64_t (*)(void* const* bufs, const int64_t* syms, int64_t* err);

  // `code` must resolve every kernel of the plan that is not a BLAS call (none may be needed).
  CpuFunction(const ir::Module& module, KernelPlan plan, std::string source, KernelCode code);
  // Whether the plan has any kernel that needs generated code (false: BLAS calls only).
  static bool needs_kernel_code(const KernelPlan& plan);

  const rt::FunctionSignature& signature() const override { return signature_; }
  void run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
           std::span<rt::Array> outputs, std::span<rt::Array> updates) override;

  void set_random_state(const RngState& state) override { rng_ = state; }
  // Streams an update that is a concatenation its operands' kernels write in place (the flat
  // gradient of a training step): each piece is reported after the last step that writes or reads
  // it, and after the last step that reads the update itself.
  bool stream_update(int update, rt::UpdateSink* sink) override;

  const KernelPlan& plan() const { return plan_; }
  const std::string& source() const { return source_; }
  size_t temp_slot_count() const { return slots_.size(); }   // for tests
  CacheOutcome cache_outcome() const { return outcome_; }

 private:
  struct Step {
    const Kernel* kernel = nullptr;
    KernelEntry entry = nullptr;      // null for library steps (BLAS, compiler/dnn)
    std::vector<int> params;          // buffers passed to the entry
  };
  void run_blas(const Step& step);
  void assign_temp_slots();
  [[noreturn]] void kernel_failed(const Step& step, int64_t code, const int64_t* err) const;

  KernelPlan plan_;
  RngState rng_;
  std::vector<int64_t> syms_;   // the binding's values, then the random state (kHiddenSymbols)
  std::string source_;
  rt::FunctionSignature signature_;
  CacheOutcome outcome_ = CacheOutcome::Compiled;
  std::shared_ptr<const void> code_owner_;
  std::vector<Step> steps_;
  std::vector<std::vector<int>> buffer_symbols_;  // per buffer: symbol index per dim, or -1
  // Per call.
  std::optional<SymbolBinding> binding_;   // argument checks and the symbols' values of this call
  std::vector<void*> pointers_;             // per buffer
  std::vector<std::vector<int64_t>> shapes_; // per buffer
  // Temporaries share storage when their lifetimes (in steps) do not overlap: temp_slot_[b] is
  // the slot of Temp buffer b; slots grow to the largest size seen and are kept across calls.
  std::vector<int> temp_slot_;
  std::vector<CopyElision> elisions_;   // found once, from the plan
  std::optional<rt::profile::Table> profile_;   // SYNK_PROFILE: one row per step
  std::vector<char> step_elided_;       // per step: 1 when elided
  std::vector<std::vector<std::byte>> slots_;
  std::vector<size_t> slot_bytes_;   // per call
  void place_elided_temps();
  void copy_repeat(size_t elision, size_t k);
  // Per concatenation elision, per call: operand k's piece is bytes [at[k], at[k+1]) of it.
  std::vector<std::vector<size_t>> piece_offsets_;
  // Per step: the repeated operands (elision, operand) to copy right after it.
  std::vector<std::vector<std::pair<size_t, size_t>>> repeats_after_;
  // Streaming (stream_update): the update's in-place concatenation, and per step the operands
  // of it that the step finishes.
  void plan_stream(int update);
  int streamed_update_ = -1;
  rt::UpdateSink* sink_ = nullptr;
  int stream_elision_ = -1;                                // index into elisions_
  std::vector<std::vector<size_t>> stream_ready_after_;
};

// Lowers, generates, compiles (or finds in the cache) and loads function `name` of `module`.
// Throws synk::UserError when there is no such function or it uses something the CPU backend
// cannot run.
std::unique_ptr<CpuFunction> compile_cpu_function(const ir::Module& module, const std::string& name,
                                                  const CpuCompileOptions& options = {});

}  // namespace synk::compiler
