// The host half every backend shares before a launch: checks each argument (and each shared
// variable read) against its declared type, binds the plan's symbolic sizes from their shapes, and
// evaluates shapes under the binding. The CPU and CUDA functions both own one, so an argument
// error reads the same whichever device runs the function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/passes/kernel_plan.h"
#include "ir/ir.h"
#include "runtime/call/descriptor.h"

namespace synk::compiler {

// "[2, 3]"
std::string shape_text(const std::vector<int64_t>& shape);

// The call engine passed as many outputs and updates as `fn` declares; an internal error otherwise.
void check_result_counts(const ir::Function& fn, size_t outputs, size_t updates);

class SymbolBinding {
 public:
  // `plan` (a member of the function that owns the binding) must outlive it; `module` names and
  // types the shared variables the plan reads.
  SymbolBinding(const ir::Module& module, const KernelPlan& plan);
  SymbolBinding(const SymbolBinding&) = delete;
  SymbolBinding& operator=(const SymbolBinding&) = delete;

  // Checks dtype, rank and static sizes of every argument and binds every symbol; a user error
  // names the argument, the function and what was expected. Allocates nothing unless it throws.
  void bind(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds);

  const std::vector<int64_t>& values() const { return values_; }   // per plan symbol
  std::vector<int64_t> shape_of(const ir::Shape& shape) const;
  int64_t count_of(const ir::Shape& shape) const;
  const std::vector<std::string>& shared_names() const { return shared_names_; }
  const std::vector<ir::TensorType>& shared_types() const { return shared_types_; }

 private:
  std::string who(size_t argument, size_t input_count) const;

  const KernelPlan* plan_;
  std::vector<std::string> shared_names_;
  std::vector<ir::TensorType> shared_types_;
  std::vector<std::vector<int>> arg_symbols_;    // per argument (inputs, then shareds): symbol per dim or -1
  std::vector<std::pair<int, int>> bound_by_;    // per symbol: (argument, dim) that bound it
  std::vector<int64_t> values_;
};

}  // namespace synk::compiler
