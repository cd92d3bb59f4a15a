// The rules of the language that both front doors check: semantic analysis of .synk text
// (dsl/sema*.cpp) and the C++ builder (dsl/builder*.cpp). One function per rule, on plain values
// (names, types, initializers, modes), returning the message of the error or nullopt; none
// throws and none reports. Sema turns a message into a diagnostic at the offending token, the
// builder into a UserError, so a program is rejected the same way, for the same reason, from
// either side.
//
// Where the two front ends word a message differently (a source location against a function's
// name, `'out o: sum = ...'` against `ReduceMode::Sum`), the check takes that piece as a
// parameter. Where the condition needs a front end's own tables (is this name declared already?),
// the caller decides and the shared `..._message` function words it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace synk::dsl {

// A number before it meets a typed value (weak: `x * 2` keeps x's dtype).
enum class LiteralKind : uint8_t { Int, Float, Bool };

namespace checks {

// How the user of a front end writes a mode or a shape, for the hints in messages.
enum class Spelling : uint8_t {
  Synk,      // `out o: sum = ...`, `reshape(x, [1])`
  Builder,   // `ReduceMode::Sum`, `reshape(x, {1})`
};

// ---- Names ---------------------------------------------------------------------------------

bool is_builtin_constant(std::string_view name);   // inf, nan
bool is_builtin_operation(std::string_view name);  // exp, sum, grad, ... (docs/language.md's table)
std::span<const char* const> builtin_operations();
// For a name users coming from numpy or PyTorch write (`amax`, `bce`, `silu`, `sum_`), the text
// to append to "unknown operation '...'": "; did you mean 'max'?" or how to write it here. nullopt
// for other names (then the closest built-in by edit distance is suggested).
std::optional<std::string> operation_alias_hint(std::string_view name);
// A helper named like a built-in operation, which a call of that name always means.
std::optional<std::string> helper_name_error(const std::string& name);

// A name given to the builder as a string (the lexer guarantees it for .synk text): letters,
// digits and '_', not starting with a digit, not a keyword, not a built-in constant. `what`:
// "function", "shared variable", "parameter", ...
std::optional<std::string> name_error(const std::string& name, const char* what);
std::optional<std::string> builtin_constant_error(const std::string& name, const char* what);
std::optional<std::string> dimension_name_error(const std::string& symbol);

// "'x' is already declared at 3:5" / "output 'o' is already declared in function 'f'": `kind`
// ("" or "output") and `previous` (where the first declaration is) as the front end words them.
std::string already_declared_message(std::string_view kind, const std::string& name, const std::string& previous);

// A parameter or let named like a shared variable. `function`: "" or " of function 'f'";
// `shared`: how the shared variable is named ("declared at 1:8", or "'w'").
std::string shadow_message(const char* what, const std::string& name, std::string_view function,
                           const std::string& shared);

// ---- Types and shapes ----------------------------------------------------------------------

std::optional<std::string> reserved_dtype_error(ir::DType dtype);
std::optional<std::string> dimension_size_error(int64_t size);
// A size of a reshape (allow_infer: -1 infers one) or broadcast_to target.
std::optional<std::string> shape_size_error(const char* op, int64_t size, bool allow_infer);
// Scatter and minibatch parameters are split by rows: axis 0 must be symbolic.
std::optional<std::string> row_dimension_error(ir::Role role, const std::string& name, const ir::TensorType& type);
std::optional<std::string> sliceable_error(const std::string& name, const ir::TensorType& type, bool sliceable);
// A symbol in a reshape / broadcast_to target that the function does not bind. `where`: the op,
// with the function for the builder ("reshape of function 'f'").
std::optional<std::string> unknown_dimension_error(const std::string& symbol, const std::string& where,
                                                   const std::set<std::string>& symbols);

// ---- Literals ------------------------------------------------------------------------------

std::string literal_text(LiteralKind kind, int64_t ivalue, double fvalue);   // "2", "0.5", "true"
// Whether a weak literal can become a Constant of `dtype` (an int that fits, a float only as a
// float, any bool).
std::optional<std::string> literal_error(LiteralKind kind, int64_t ivalue, double fvalue, ir::DType dtype);
// The attributes of the Constant of `dtype` that a literal becomes once literal_error allows it.
ir::Attrs constant_attrs(LiteralKind kind, int64_t ivalue, double fvalue, ir::DType dtype);

// ---- Shared variables' initializers ---------------------------------------------------------

// Whether an initial value (a double, as initializers hold it) is exactly a value of `dtype`.
bool value_fits(double value, ir::DType dtype);
// `inexact_integer`: the value was written as an integer literal beyond 2^53, which the double
// rounded (an integer variable cannot get it exactly).
std::optional<std::string> initial_value_error(const std::string& name, const ir::TensorType& type, double value,
                                               bool inexact_integer = false);
// normal and uniform draw floating values. `kind`: "normal" or "uniform".
std::optional<std::string> random_dtype_error(const char* kind, const std::string& name, const ir::TensorType& type);
std::optional<std::string> std_error(double stddev);
// low < high, and a width high - low that float64 holds (shared variables draw in float64).
std::optional<std::string> uniform_bounds_error(double low, double high);
// The op uniform(..., low, high, dtype) draws u in [0, 1) and computes low + u * (high - low) in
// `dtype`: the width must fit it.
std::optional<std::string> uniform_width_error(double low, double high, ir::DType dtype);
// uniform's low and high, or normal's mean and std, must fit `dtype` (f32: the draws would be inf).
std::optional<std::string> random_parameters_fit_error(bool normal, double a, double b, ir::DType dtype);
// A whole initializer as the builder receives it (sema checks the same rules argument by
// argument, where each has a location): the rules above, plus a seed that fits i64, finite
// parameters and a file name for load.
std::optional<std::string> initializer_error(const std::string& name, const ir::TensorType& type,
                                             const ir::Initializer& init);

// ---- Outputs and updates -------------------------------------------------------------------

// `mode_written`: the statement names its mode (otherwise the message says avg is the default).
std::optional<std::string> output_avg_error(const std::string& name, ir::DType dtype, ir::ReduceMode mode,
                                            Spelling spelling, bool mode_written);
std::optional<std::string> output_gather_error(const std::string& name, const ir::TensorType& type,
                                               ir::ReduceMode mode, Spelling spelling);

// Row symbols split over the ranks -> what splits them ("axis 0 of scatter parameter 'x'").
using ScatteredRows = std::map<std::string, std::string>;

// Axis 0 of the function's scatter and minibatch parameters and of the sliceable shared
// variables it uses (in index order); the first to name a symbol describes it.
ScatteredRows scattered_rows(const std::vector<ir::Param>& params, const std::vector<const ir::SharedVar*>& used);
// A scattered row symbol has another size on every rank, so it cannot size what every rank
// holds whole: another axis of a parameter, an axis of a shared variable, an output that is
// reduced over the ranks, or an axis after the first of a gathered output. `function` as in shadow_message.
std::optional<std::string> param_axis_error(const ir::Param& param, size_t axis, const ScatteredRows& scattered);
std::optional<std::string> shared_axis_error(const ir::SharedVar& var, size_t axis, const ScatteredRows& scattered);
std::optional<std::string> scattered_output_error(const std::string& name, std::string_view function,
                                                  const ir::TensorType& type, ir::ReduceMode mode,
                                                  const ScatteredRows& scattered);

// A warning, not an error: an output left at the default mode avg whose value is a sum, max, min or
// prod over the scattered rows (`node` of `fn`). Each rank reduces its own rows and avg then
// averages the ranks' results, which is not the reduction over all rows (a mean is: avg weighs by
// rows). The message names the mode that gives it, or how to keep the average.
std::optional<std::string> rows_reduced_by_avg_warning(const std::string& name, const ir::Function& fn,
                                                       ir::NodeId node, const ScatteredRows& scattered);

// A warning, not an error: a training step averages the ranks' (and slices') gradients weighted
// by their rows, which is the gradient of `loss` (node of `fn`) only when the loss is a mean over
// the scattered rows plus terms that do not depend on them (each scaled by values that do not).
// Any other loss, such as a sum over the rows, trains on a gradient that changes with the number
// of ranks and slices, and so does a mean of values that mix the rank's rows (var(l), a softmax
// or cumsum along them). The message names the first construct that breaks the form.
// `loc`: the part named (a node's position; invalid where the node has none).
struct LossWarning {
  SourceLoc loc;
  std::string text;
};
std::optional<LossWarning> loss_not_a_row_mean_warning(const ir::Function& fn, ir::NodeId loss,
                                                       const ScatteredRows& scattered);

std::optional<std::string> update_mode_error(ir::ReduceMode mode);
std::optional<std::string> update_type_error(const std::string& name, const ir::TensorType& variable,
                                             const ir::TensorType& value);
std::optional<std::string> update_avg_error(const std::string& name, ir::DType dtype, ir::ReduceMode mode,
                                            Spelling spelling, bool mode_written);
// `previous`: where the first update is ("at 4:3", "in function 'f'").
std::string updated_twice_message(const std::string& name, const std::string& previous);

// ---- Functions -----------------------------------------------------------------------------

std::string no_results_message(const std::string& function);

// ---- Optimizers and training steps ---------------------------------------------------------

std::optional<std::string> unknown_rule_error(const std::string& optimizer, const std::string& rule);
// num_packs (the step's all-reduce, not the rule's): `value` is the number when it is a whole
// one, nullopt otherwise.
std::optional<std::string> num_packs_error(const std::string& optimizer, std::optional<int64_t> value);
// One hyper-parameter on its own, so that the message names the keyword that is wrong.
std::optional<std::string> hyper_parameter_error(const std::string& optimizer, const std::string& rule,
                                                 const std::string& keyword, double value);
// The rule with all its hyper-parameters (a keyword given twice, a missing learning rate).
std::optional<std::string> update_rule_error(const std::string& optimizer, const std::string& rule,
                                             std::span<const std::pair<std::string, double>> hyper_parameters);
// `is`: what the name is instead ("a shared variable").
std::string not_an_optimizer_message(const std::string& name, const std::string& is);
// `previous`: "" or " at 3:3".
std::string second_training_step_message(const std::string& function, const std::string& previous);

// The variables one training step trains, as one flat gradient: their indices, promoted dtype and
// total size.
struct FlatGradient {
  std::vector<int64_t> parameters;
  ir::DType dtype = ir::DType::F32;
  int64_t size = 0;
  void add(int64_t index, const ir::TensorType& type);   // a variable of static shape
  ir::TensorType type() const { return ir::TensorType{dtype, {ir::Dim::fixed(size)}}; }
};

// "w1, b1": the shared variables at `indices`.
std::string variable_names(const std::vector<ir::SharedVar>& shareds, const std::vector<int64_t>& indices);
std::optional<std::string> static_shape_error(const std::string& variable, const ir::TensorType& type);
// `loss`: how the loss is written, for the cast in the hint.
std::optional<std::string> loss_dtype_error(ir::DType loss_dtype, ir::DType variables, const std::string& loss);
// An optimizer bound by an earlier step trains the same variables in every step. `bound_at`: ""
// or " (at 3:3)".
std::optional<std::string> already_trains_error(const ir::Optimizer& optimizer, const std::vector<int64_t>& parameters,
                                                const std::vector<ir::SharedVar>& shareds, const std::string& bound_at);
// The name of the optimizer's flat gradient is taken. `existing`: the shared variable of that
// name (null when the name is something else); `is`: what the name is ("a shared variable").
std::optional<std::string> gradient_variable_error(const ir::Optimizer& optimizer, const ir::TensorType& flat,
                                                   const ir::SharedVar* existing, const std::string& is);
// `previous`: where the gradient variable is updated already.
std::string gradient_updated_message(const std::string& gradient, const std::string& previous);
// `step`: "at 5:3" or "of function 'f'".
std::string trained_update_message(const std::string& variable, const std::string& step, const std::string& function);

// The names the expansion of training steps adds (names_added_by) must be free: for each
// optimizer bound to a step whose names clash, its index and the message of its first clash.
// `declared`: every module-level name -> what it is ("a function"); `usable`: optimizers to check
// (empty: all).
std::vector<std::pair<size_t, std::string>> training_name_errors(const std::vector<ir::Optimizer>& optimizers,
                                                                 const std::vector<ir::SharedVar>& shareds,
                                                                 const std::map<std::string, std::string>& declared,
                                                                 const std::vector<bool>& usable = {});

}  // namespace checks
}  // namespace synk::dsl
