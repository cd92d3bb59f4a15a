// The contract between a generated kernel and the host code that launches it, the same for every
// dialect (CPU translation units and CUDA programs): the entry's name, the buffers it receives in
// what order, which kernels are library calls with no generated code, and the codes a kernel
// returns when it stops on bad data (with err[1..3] = position, value, limit; kernel_errors.h
// turns them into the user's message).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/passes/kernel_plan.h"

namespace synk::compiler {

// Nonzero results of a kernel entry; err[1..3] hold (position, value, limit).
enum class KernelError : int64_t {
  Ok = 0,
  IndexOutOfRange = 1,   // take: index err[2] at position err[1] outside [0, err[3])
  LabelOutOfRange = 2,   // cross_entropy / one_hot: label err[2] of row err[1] outside [0, err[3])
  EmptyReduction = 3,    // max / min / argmax over an empty axis (no identity)
  CastOutOfRange = 4,    // a float-to-integer cast of NaN, an infinity or a value out of range
  DivisionByZero = 5,    // an integer '%' or floor_divide by zero
};

// Kernels that run as BLAS calls from the host.
bool kernel_uses_blas(const KernelPlan& plan, const Kernel& kernel);
// Kernels with no generated code: BLAS calls and the conv / pooling library steps (KernelKind::Dnn).
bool kernel_is_library_call(const KernelPlan& plan, const Kernel& kernel);

// The buffers a generated kernel receives, in order: its outputs, then its inputs, each once.
std::vector<int> kernel_buffer_params(const Kernel& kernel);

// The `syms` array every kernel entry receives holds the plan's symbols (plan.symbols, in order),
// then these values of the call's random state (base/rng.h), which random kernels read.
constexpr size_t kHiddenSymbols = 3;   // seed, step, first row
// The kernel prologue's lines that name them synk_seed, synk_step and synk_first_row, read from
// `array` ("syms" on the CPU, "syms.v" in CUDA) after `symbols` plan symbols.
std::string hidden_symbol_lines(size_t symbols, const std::string& array);
// A Random node's draw (base/philox.h) for local row `row` (a C expression; the call's first row
// is added for an op with global rows) and element `e` of the row, from a stream named `rng`.
// The prologue of a random kernel: `rows` and `per_row` (the node's axis 0 and the elements of
// one row) and the stream `rng`.
std::string random_prologue(const ir::Node& random);
std::string random_draw(const ir::Node& random, const std::string& row, const std::string& e);

// "synk_<function>_<kernel>"; with a module prefix (ahead-of-time artifacts, where kernels of
// several modules share one binary) "synk_<prefix>__<function>_<kernel>". The JIT uses none.
std::string kernel_symbol(const KernelPlan& plan, const Kernel& kernel, std::string_view module_prefix = {});

}  // namespace synk::compiler
