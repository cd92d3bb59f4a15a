// Argument checks and symbol binding shared by the backends (see symbol_binding.h).
#include "compiler/backend/symbol_binding.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/errors.h"
#include "compiler/backend/signature.h"

namespace synk::compiler {

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SymbolBinding::SymbolBinding(const ir::Module& module, const KernelPlan& plan) : plan_(&plan) {
  for (int32_t s : plan.shareds_read) {
    shared_names_.push_back(module.shareds.at(size_t(s)).name);
    shared_types_.push_back(module.shareds.at(size_t(s)).type);
  }
  auto symbols_of = [&](const ir::TensorType& t) {
    std::vector<int> out;
    for (const ir::Dim& d : t.shape) out.push_back(d.is_symbolic() ? plan.symbol_index(d.symbol) : -1);
    return out;
  };
  for (const ir::Param& p : plan.function.params) arg_symbols_.push_back(symbols_of(p.type));
  for (const ir::TensorType& t : shared_types_) arg_symbols_.push_back(symbols_of(t));
  bound_by_.assign(plan.symbols.size(), {-1, -1});
  values_.assign(plan.symbols.size(), 0);
}

void check_result_counts(const ir::Function& fn, size_t outputs, size_t updates) {
  if (outputs != fn.outputs.size() || updates != fn.updates.size())
    synk::internal_error(fmt::format("function '{}': the engine passed {} outputs and {} updates, expected {} and {}",
                                    fn.name, outputs, updates, fn.outputs.size(), fn.updates.size()));
}

std::vector<int64_t> SymbolBinding::shape_of(const ir::Shape& shape) const {
  std::vector<int64_t> out;
  for (const ir::Dim& d : shape)
    out.push_back(d.is_symbolic() ? values_.at(size_t(plan_->symbol_index(d.symbol))) : d.size);
  return out;
}

// Runs per launch on the GPU: no allocation.
int64_t SymbolBinding::count_of(const ir::Shape& shape) const {
  int64_t n = 1;
  for (const ir::Dim& d : shape) n *= d.is_symbolic() ? values_.at(size_t(plan_->symbol_index(d.symbol))) : d.size;
  return n;
}

std::string SymbolBinding::who(size_t k, size_t input_count) const {
  return k < input_count ? fmt::format("argument '{}'", plan_->function.params[k].name)
                         : fmt::format("shared variable '{}'", shared_names_[k - input_count]);
}

// Runs on every call: no allocation unless there is an error to report.
void SymbolBinding::bind(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds) {
  const ir::Function& fn = plan_->function;
  const std::string& fname = fn.name;
  if (inputs.size() != fn.params.size())
    throw synk::UserError(fmt::format("function '{}' takes {} inputs, got {}", fname, fn.params.size(), inputs.size()));
  if (shareds.size() != plan_->shareds_read.size())
    synk::internal_error(fmt::format("function '{}' reads {} shared variables, the engine passed {}", fname,
                                     plan_->shareds_read.size(), shareds.size()));
  std::fill(bound_by_.begin(), bound_by_.end(), std::pair<int, int>{-1, -1});
  const size_t n_in = inputs.size(), total = inputs.size() + shareds.size();
  for (size_t k = 0; k < total; ++k) {
    const rt::ArrayRef& arg = k < n_in ? inputs[k] : shareds[k - n_in];
    const ir::TensorType& want = k < n_in ? fn.params[k].type : shared_types_[k - n_in];
    const std::vector<int>& dim_symbols = arg_symbols_[k];
    if (arg.dtype != runtime_dtype(want.dtype))
      throw synk::UserError(fmt::format("{} of function '{}': expected dtype {}, got {}", who(k, n_in), fname,
                                        ir::dtype_name(want.dtype), rt::dtype_name(arg.dtype)));
    if (arg.shape.size() != want.rank())
      throw synk::UserError(fmt::format("{} of function '{}': expected rank {} ({}), got shape {}", who(k, n_in),
                                        fname, want.rank(), ir::type_str(want), shape_text(arg.shape)));
    for (size_t d = 0; d < want.rank(); ++d) {
      const int64_t got = arg.shape[d];
      if (got < 0)
        throw synk::UserError(fmt::format("{} of function '{}': negative dimension {}", who(k, n_in), fname, got));
      const int s = dim_symbols[d];
      if (s < 0) {
        if (got != want.shape[d].size)
          throw synk::UserError(fmt::format("{} of function '{}': dimension {} must be {} ({}), got shape {}",
                                            who(k, n_in), fname, d, want.shape[d].size, ir::type_str(want),
                                            shape_text(arg.shape)));
      } else if (bound_by_[size_t(s)].first < 0) {
        values_[size_t(s)] = got;
        bound_by_[size_t(s)] = {int(k), int(d)};
      } else if (values_[size_t(s)] != got) {
        auto [bk, bd] = bound_by_[size_t(s)];
        throw synk::UserError(fmt::format(
            "{} of function '{}': dimension {} is {}, but symbol '{}' is {} (from dimension {} of {})", who(k, n_in),
            fname, d, got, plan_->symbols[size_t(s)], values_[size_t(s)], bd, who(size_t(bk), n_in)));
      }
    }
  }
  for (size_t s = 0; s < plan_->symbols.size(); ++s)
    if (bound_by_[s].first < 0)
      throw synk::UserError(fmt::format("function '{}': the size '{}' is not determined by any argument", fname,
                                        plan_->symbols[s]));
}

}  // namespace synk::compiler
