// Tests of the rules sema and the C++ builder share (dsl/checks.h): each check accepts what the
// language allows and words what it rejects, in the front end's spelling where the two differ.
// The front ends' own tests (sema_test, builder_test, builder_rejects_test, lit) check that they
// report these messages at the right place.
#include <limits>

#include <gtest/gtest.h>

#include "dsl/checks.h"

namespace synk::dsl::checks {
namespace {

using ir::DType;
using ir::ReduceMode;

ir::TensorType T(DType dtype, ir::Shape shape = {}) { return ir::TensorType{dtype, std::move(shape)}; }
const ir::Dim n = ir::Dim::sym("n");

TEST(ChecksNames, IdentifiersKeywordsAndBuiltInConstants) {
  EXPECT_EQ(name_error("w_1", "function"), std::nullopt);
  EXPECT_EQ(name_error("_x", "parameter"), std::nullopt);
  EXPECT_EQ(name_error("2fast", "function"),
            "'2fast' is not a valid function name: use letters, digits and '_', not starting with a digit, and not "
            "a keyword");
  EXPECT_NE(name_error("let", "shared variable"), std::nullopt);
  EXPECT_NE(name_error("a-b", "output"), std::nullopt);
  EXPECT_NE(name_error("", "output"), std::nullopt);
  EXPECT_EQ(name_error("nan", "let"), "'nan' is a built-in constant and cannot name a let");
  EXPECT_EQ(builtin_constant_error("inf", "parameter"), "'inf' is a built-in constant and cannot name a parameter");
  EXPECT_EQ(builtin_constant_error("x", "parameter"), std::nullopt);
  EXPECT_TRUE(is_builtin_constant("inf"));
  EXPECT_FALSE(is_builtin_constant("exp"));
  EXPECT_EQ(dimension_name_error("rows"), std::nullopt);
  EXPECT_EQ(dimension_name_error("bad dim"), "'bad dim' is not a valid dimension name");
}

TEST(ChecksNames, DeclarationMessagesTakeTheFrontEndsWording) {
  EXPECT_EQ(already_declared_message("", "x", "at 3:5"), "'x' is already declared at 3:5");
  EXPECT_EQ(already_declared_message("output", "o", "in function 'f'"),
            "output 'o' is already declared in function 'f'");
  EXPECT_EQ(shadow_message("parameter", "w", "", "declared at 1:8"),
            "parameter 'w' would shadow the shared variable declared at 1:8; choose another name");
  EXPECT_EQ(shadow_message("let", "w", " of function 'f'", "'w'"),
            "let 'w' of function 'f' would shadow the shared variable 'w'; choose another name");
}

TEST(ChecksTypes, DtypesSizesAndRowDimensions) {
  EXPECT_EQ(reserved_dtype_error(DType::F32), std::nullopt);
  EXPECT_EQ(reserved_dtype_error(DType::BF16), "dtype 'bf16' is reserved and not supported yet; use f32 or f64");
  EXPECT_EQ(dimension_size_error(0), std::nullopt);
  EXPECT_EQ(dimension_size_error(-2), "a dimension size must be 0 or more, found -2");
  EXPECT_EQ(shape_size_error("reshape", -1, true), std::nullopt);
  EXPECT_EQ(shape_size_error("reshape", -2, true), "reshape's sizes must be 0 or more (or -1 to infer one), found -2");
  EXPECT_EQ(shape_size_error("broadcast_to", -1, false), "broadcast_to's sizes must be 0 or more, found -1");

  EXPECT_EQ(row_dimension_error(ir::Role::Scatter, "x", T(DType::F32, {n, ir::Dim::fixed(3)})), std::nullopt);
  EXPECT_EQ(row_dimension_error(ir::Role::Broadcast, "x", T(DType::F32)), std::nullopt);
  EXPECT_EQ(row_dimension_error(ir::Role::Minibatch, "x", T(DType::F32, {ir::Dim::fixed(4)})),
            "minibatch parameter 'x' is split by rows and needs a symbolic row dimension (axis 0), like f32[n, 10]; "
            "found f32[4]");
  EXPECT_NE(row_dimension_error(ir::Role::Scatter, "x", T(DType::F32)), std::nullopt);
  EXPECT_EQ(sliceable_error("w", T(DType::F32, {ir::Dim::fixed(4)}), false), std::nullopt);
  EXPECT_EQ(sliceable_error("w", T(DType::F32, {n}), true), std::nullopt);
  EXPECT_NE(sliceable_error("w", T(DType::F32, {ir::Dim::fixed(4)}), true), std::nullopt);
}

TEST(ChecksTypes, UnknownDimensionsListTheKnownOnes) {
  EXPECT_EQ(unknown_dimension_error("n", "reshape", {"n"}), std::nullopt);
  EXPECT_EQ(unknown_dimension_error("m", "broadcast_to", {}),
            "unknown dimension 'm' in broadcast_to; this function has no symbolic dimensions");
  EXPECT_EQ(unknown_dimension_error("m", "reshape of function 'f'", {"n", "k"}),
            "unknown dimension 'm' in reshape of function 'f'; the dimensions of this function are k, n");
}

TEST(ChecksLiterals, WhichDtypesALiteralFits) {
  EXPECT_EQ(literal_error(LiteralKind::Int, 255, 0, DType::U8), std::nullopt);
  EXPECT_EQ(literal_error(LiteralKind::Int, 256, 0, DType::U8), "integer 256 does not fit in u8");
  EXPECT_EQ(literal_error(LiteralKind::Int, -1, 0, DType::U8), "integer -1 does not fit in u8");
  EXPECT_EQ(literal_error(LiteralKind::Int, int64_t(1) << 31, 0, DType::I32), "integer 2147483648 does not fit in i32");
  EXPECT_EQ(literal_error(LiteralKind::Int, int64_t(1) << 40, 0, DType::I64), std::nullopt);
  EXPECT_EQ(literal_error(LiteralKind::Int, 3, 0, DType::F64), std::nullopt);
  EXPECT_EQ(literal_error(LiteralKind::Int, 1, 0, DType::Bool),
            "integer 1 cannot be used as a bool; use true or false");
  EXPECT_EQ(literal_error(LiteralKind::Float, 0, 2.5, DType::I32),
            "2.5 is not an integer but i32 is needed here; use cast(2.5, i32)");
  EXPECT_EQ(literal_error(LiteralKind::Float, 0, 2.5, DType::F32), std::nullopt);
  EXPECT_EQ(literal_error(LiteralKind::Bool, 1, 0, DType::F32), std::nullopt);
  EXPECT_EQ(literal_text(LiteralKind::Bool, 0, 0), "false");
  EXPECT_EQ(literal_text(LiteralKind::Int, -7, 0), "-7");
}

TEST(ChecksLiterals, TheConstantALiteralBecomes) {
  EXPECT_EQ(constant_attrs(LiteralKind::Int, 3, 0, DType::F64).value, 3.0);
  EXPECT_EQ(constant_attrs(LiteralKind::Int, 3, 0, DType::I32).ivalue, 3);
  EXPECT_EQ(constant_attrs(LiteralKind::Float, 0, 0.5, DType::F32).value, 0.5);
  EXPECT_EQ(constant_attrs(LiteralKind::Bool, 1, 0, DType::Bool).ivalue, 1);
  EXPECT_EQ(constant_attrs(LiteralKind::Bool, 1, 0, DType::F32).value, 1.0);
}

TEST(ChecksInitializers, ValuesThatFitTheDtype) {
  EXPECT_TRUE(value_fits(0.5, DType::F32));
  EXPECT_TRUE(value_fits(255, DType::U8));
  EXPECT_FALSE(value_fits(256, DType::U8));
  EXPECT_FALSE(value_fits(1.5, DType::I64));
  EXPECT_FALSE(value_fits(2, DType::Bool));
  EXPECT_FALSE(value_fits(2147483648.0, DType::I32));
  EXPECT_FALSE(value_fits(9223372036854775808.0, DType::I64));
  EXPECT_EQ(initial_value_error("w", T(DType::U8), 300),
            "initial value 300 does not fit shared variable 'w' of dtype u8");
}

TEST(ChecksInitializers, AWholeInitializerAsTheBuilderGivesIt) {
  const ir::TensorType f32 = T(DType::F32, {ir::Dim::fixed(2)});
  EXPECT_EQ(initializer_error("w", f32, ir::InitZeros{}), std::nullopt);
  EXPECT_EQ(initializer_error("w", f32, ir::InitNormal{1, 0, 0.5}), std::nullopt);
  EXPECT_EQ(initializer_error("w", T(DType::I32), ir::InitNormal{1, 0, 1}),
            "normal initializes floating variables, but 'w' is i32");
  EXPECT_EQ(initializer_error("w", f32, ir::InitNormal{1, 0, -1}), "std must be 0 or more, found -1");
  EXPECT_EQ(initializer_error("w", f32, ir::InitNormal{1, std::numeric_limits<double>::infinity(), 1}),
            "mean must be a finite number, found inf");
  EXPECT_EQ(initializer_error("w", f32, ir::InitNormal{uint64_t(1) << 63, 0, 1}),
            "normal's seed must be at most 2^63-1, found 9223372036854775808");
  EXPECT_EQ(initializer_error("w", f32, ir::InitUniform{1, 1, 1}), "uniform needs low < high, found low=1 and high=1");
  EXPECT_EQ(initializer_error("w", T(DType::U8), ir::InitConstant{-1}),
            "initial value -1 does not fit shared variable 'w' of dtype u8");
  EXPECT_EQ(initializer_error("w", f32, ir::InitLoad{""}), "load needs a file name for shared variable 'w'");
  EXPECT_EQ(initializer_error("w", f32, ir::InitLoad{"w.npy"}), std::nullopt);
  // The pieces sema checks argument by argument.
  EXPECT_EQ(std_error(0), std::nullopt);
  EXPECT_EQ(uniform_bounds_error(-1, 1), std::nullopt);
  EXPECT_EQ(random_dtype_error("uniform", "c", T(DType::I64)),
            "uniform initializes floating variables, but 'c' is i64");
}

TEST(ChecksOutputs, ModesAndTheirHintsInEachSpelling) {
  EXPECT_EQ(output_avg_error("o", DType::F32, ReduceMode::Avg, Spelling::Synk, false), std::nullopt);
  EXPECT_EQ(output_avg_error("o", DType::I32, ReduceMode::Sum, Spelling::Synk, true), std::nullopt);
  EXPECT_EQ(output_avg_error("o", DType::I32, ReduceMode::Avg, Spelling::Synk, false),
            "output 'o' has dtype i32, which cannot be averaged (avg is the default mode); give it another mode, "
            "e.g. 'out o: sum = ...' or 'out o: gather = ...'");
  EXPECT_EQ(output_avg_error("o", DType::I32, ReduceMode::Avg, Spelling::Synk, true),
            "output 'o' has dtype i32, which cannot be averaged; give it another mode, e.g. 'out o: sum = ...' or "
            "'out o: gather = ...'");
  EXPECT_EQ(output_avg_error("o", DType::Bool, ReduceMode::Avg, Spelling::Builder, false),
            "output 'o' has dtype bool, which cannot be averaged (avg is the default mode); give it another mode, "
            "e.g. ReduceMode::Sum or ReduceMode::Gather");
  EXPECT_EQ(output_gather_error("o", T(DType::F32, {n}), ReduceMode::Gather, Spelling::Synk), std::nullopt);
  EXPECT_EQ(output_gather_error("o", T(DType::F32), ReduceMode::Gather, Spelling::Synk),
            "output 'o' is a scalar, but mode gather concatenates along axis 0; use another mode or reshape(x, [1])");
  EXPECT_EQ(output_gather_error("o", T(DType::F32), ReduceMode::Gather, Spelling::Builder),
            "output 'o' is a scalar, but mode gather concatenates along axis 0; use another mode or reshape(x, {1})");
}

TEST(ChecksOutputs, ScatteredRowsCannotBeHeldWhole) {
  const ir::Param x{"x", ir::Role::Scatter, T(DType::F32, {n, ir::Dim::fixed(3)}), {}};
  const ir::Param y{"y", ir::Role::Broadcast, T(DType::F32, {n}), {}};
  const ir::SharedVar rows{"rows", T(DType::F32, {ir::Dim::sym("r"), n}), ir::InitZeros{}, true, {}};
  const ScatteredRows scattered = scattered_rows({x, y}, {&rows});
  ASSERT_EQ(scattered.size(), 2u);
  EXPECT_EQ(scattered.at("n"), "axis 0 of scatter parameter 'x'");
  EXPECT_EQ(scattered.at("r"), "axis 0 of sliceable shared variable 'rows'");
  EXPECT_EQ(param_axis_error(x, 0, scattered), std::nullopt);
  EXPECT_EQ(param_axis_error(y, 0, scattered),
            "'n' is a scattered row dimension (axis 0 of scatter parameter 'x'), so it cannot also size axis 0 of "
            "bcast parameter 'y'; use another symbol");
  EXPECT_EQ(shared_axis_error(rows, 0, scattered), std::nullopt);
  EXPECT_EQ(shared_axis_error(rows, 1, scattered),
            "'n' is a scattered row dimension (axis 0 of scatter parameter 'x'), but shared variable 'rows' of type "
            "f32[r, n] uses it for a dimension every rank holds whole");
  EXPECT_EQ(scattered_output_error("o", "", T(DType::F32, {n}), ReduceMode::Gather, scattered), std::nullopt);
  EXPECT_EQ(scattered_output_error("o", "", T(DType::F32, {n, ir::Dim::fixed(3)}), ReduceMode::Gather, scattered), std::nullopt);
  EXPECT_EQ(scattered_output_error("o", "", T(DType::F32, {ir::Dim::fixed(3), n}), ReduceMode::None, scattered), std::nullopt);
  EXPECT_EQ(scattered_output_error("o", "", T(DType::F32, {ir::Dim::fixed(3), n}), ReduceMode::Gather, scattered),
            "output 'o' has shape [3, n]: gather concatenates the ranks' parts along axis 0, but axis 1 depends on "
            "the scattered row dimension 'n' (axis 0 of scatter parameter 'x'), so the parts differ with the split; "
            "put the rows on axis 0 (e.g. transpose the result), or use mode none");
  EXPECT_EQ(scattered_output_error("o", " of function 'f'", T(DType::F32, {n}), ReduceMode::Sum, scattered),
            "output 'o' of function 'f' has shape [n], which depends on the scattered row dimension 'n' (axis 0 of "
            "scatter parameter 'x'); use mode gather or none");
}

TEST(ChecksUpdates, ModesTypesAndAveraging) {
  EXPECT_EQ(update_mode_error(ReduceMode::Max), std::nullopt);
  EXPECT_EQ(update_mode_error(ReduceMode::None),
            "an update accumulates over slices with avg, sum, prod, max or min; mode 'none' is for outputs only");
  EXPECT_EQ(update_type_error("s", T(DType::F32, {ir::Dim::fixed(2)}), T(DType::F32, {ir::Dim::fixed(2)})),
            std::nullopt);
  EXPECT_EQ(update_type_error("s", T(DType::F32, {ir::Dim::fixed(2)}), T(DType::F64, {ir::Dim::fixed(2)})),
            "update of 's' needs a value of type f32[2] but this one has type f64[2]");
  EXPECT_EQ(update_avg_error("c", DType::I32, ReduceMode::Avg, Spelling::Synk, true),
            "update of 'c' has dtype i32, which cannot be averaged over slices; give it another mode, e.g. "
            "'update c: sum = ...'");
  EXPECT_EQ(update_avg_error("c", DType::I32, ReduceMode::Avg, Spelling::Builder, false),
            "update of 'c' has dtype i32, which cannot be averaged over slices (avg is the default mode); give it "
            "another mode, e.g. ReduceMode::Sum");
  EXPECT_EQ(update_avg_error("c", DType::I32, ReduceMode::Sum, Spelling::Builder, false), std::nullopt);
  EXPECT_EQ(updated_twice_message("s", "at 4:3"),
            "'s' is already updated at 4:3; a shared variable is updated at most once per function");
  EXPECT_EQ(no_results_message("f"), "function 'f' has no 'out' or 'update' statement, so it computes nothing");
}

TEST(ChecksOptimizers, RulesHyperParametersAndNumPacks) {
  EXPECT_EQ(unknown_rule_error("o", "adam"), std::nullopt);
  const std::optional<std::string> unknown = unknown_rule_error("o", "newton");
  ASSERT_NE(unknown, std::nullopt);
  EXPECT_EQ(unknown->rfind("optimizer 'o': unknown update rule 'newton' (known rules: sgd, momentum", 0), 0u)
      << *unknown;
  const std::optional<std::string> typo = unknown_rule_error("o", "adamm");
  ASSERT_NE(typo, std::nullopt);
  EXPECT_EQ(typo->rfind("optimizer 'o': unknown update rule 'adamm'; did you mean 'adam'? (known rules: sgd", 0), 0u)
      << *typo;
  EXPECT_EQ(num_packs_error("o", 2), std::nullopt);
  EXPECT_EQ(num_packs_error("o", 0),
            "optimizer 'o': num_packs must be an integer >= 1 (the number of buffers the gradient's all-reduce uses)");
  EXPECT_NE(num_packs_error("o", std::nullopt), std::nullopt);
  EXPECT_EQ(hyper_parameter_error("o", "momentum", "momentum", 0.5), std::nullopt);
  const std::optional<std::string> bad = hyper_parameter_error("o", "momentum", "momentum", 1.5);
  ASSERT_NE(bad, std::nullopt);
  EXPECT_EQ(bad->rfind("optimizer 'o': ", 0), 0u) << *bad;
  EXPECT_NE(bad->find("momentum is 1.5"), std::string::npos) << *bad;
  const std::vector<std::pair<std::string, double>> no_lr = {{"momentum", 0.9}};
  EXPECT_EQ(update_rule_error("o", "momentum", no_lr),
            "optimizer 'o': update rule 'momentum' needs a learning rate (lr=...)");
  const std::vector<std::pair<std::string, double>> lr = {{"lr", 0.1}};
  EXPECT_EQ(update_rule_error("o", "sgd", lr), std::nullopt);
  EXPECT_EQ(not_an_optimizer_message("w", "a shared variable"), "'w' is a shared variable, not an optimizer");
  EXPECT_EQ(second_training_step_message("f", ""),
            "function 'f' already has a training step; a function minimizes one loss");
}

TEST(ChecksTraining, TheFlatGradientAndWhatMayHoldIt) {
  const std::vector<ir::SharedVar> shareds = {
      {"w", T(DType::F32, {ir::Dim::fixed(3), ir::Dim::fixed(2)}), ir::InitZeros{}, false, {}},
      {"b", T(DType::F32, {ir::Dim::fixed(2)}), ir::InitZeros{}, false, {}},
      {"r", T(DType::F32, {n}), ir::InitZeros{}, true, {}},
  };
  FlatGradient g;
  g.add(0, shareds[0].type);
  g.add(1, shareds[1].type);
  EXPECT_EQ(g.parameters, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.type(), T(DType::F32, {ir::Dim::fixed(8)}));
  EXPECT_EQ(variable_names(shareds, g.parameters), "w, b");
  EXPECT_EQ(static_shape_error("w", shareds[0].type), std::nullopt);
  EXPECT_EQ(static_shape_error("r", shareds[2].type), "minimize trains variables of static shape, but 'r' is f32[n]");
  EXPECT_EQ(loss_dtype_error(DType::F32, DType::F32, "loss"), std::nullopt);
  EXPECT_EQ(loss_dtype_error(DType::F64, DType::F32, "loss"),
            "the loss of minimize is f64 but the variables' dtype is f32: the flat gradient must have the variables' "
            "dtype; use cast(loss, f32)");

  ir::Optimizer o;
  o.name = "opt";
  o.rule = "sgd";
  EXPECT_EQ(already_trains_error(o, {1}, shareds, ""), std::nullopt) << "not bound yet";
  o.gradient = 3;
  o.parameters = {0, 1};
  EXPECT_EQ(already_trains_error(o, {0, 1}, shareds, ""), std::nullopt);
  EXPECT_EQ(already_trains_error(o, {1, 0}, shareds, " (at 2:3)"),
            "optimizer 'opt' already trains w, b (at 2:3); every step that uses it must train the same variables in "
            "the same order, not b, w");
  const ir::SharedVar fits{"opt_grads", g.type(), ir::InitZeros{}, false, {}};
  EXPECT_EQ(gradient_variable_error(o, g.type(), &fits, "a shared variable"), std::nullopt);
  EXPECT_EQ(gradient_variable_error(o, g.type(), nullptr, "a function"),
            "optimizer 'opt' keeps the flat gradient in the shared variable 'opt_grads: f32[8]', but 'opt_grads' is "
            "already a function; rename it");
  EXPECT_NE(gradient_variable_error(o, g.type(), &shareds[1], "a shared variable"), std::nullopt);
  EXPECT_EQ(gradient_updated_message("opt_grads", "in function 'f'"),
            "'opt_grads' is already updated in function 'f'; minimize writes the gradient there");
  EXPECT_EQ(trained_update_message("w", "at 5:3", "f"),
            "'w' is trained by the step at 5:3 (its optimizer updates it after the gradient is averaged), so 'f' "
            "cannot also update it");
}

TEST(ChecksTraining, NamesTheExpansionAddsMustBeFree) {
  const std::vector<ir::SharedVar> shareds = {
      {"w", T(DType::F32, {ir::Dim::fixed(2)}), ir::InitZeros{}, false, {}},
      {"o_grads", T(DType::F32, {ir::Dim::fixed(2)}), ir::InitZeros{}, false, {}},
      {"p_grads", T(DType::F32, {ir::Dim::fixed(2)}), ir::InitZeros{}, false, {}},
  };
  ir::Optimizer o;
  o.name = "o";
  o.rule = "momentum";
  o.parameters = {0};
  o.gradient = 1;
  ir::Optimizer p = o;
  p.name = "p";
  p.gradient = 2;
  ir::Optimizer unbound = o;
  unbound.name = "q";
  unbound.gradient = -1;
  EXPECT_TRUE(training_name_errors({o, p}, shareds, {{"w", "a shared variable"}}, {false, true}).empty())
      << "an optimizer whose declaration failed is left out";

  auto clash = training_name_errors({o, unbound}, shareds, {{"o_update", "a function declared at 1:1"}});
  ASSERT_EQ(clash.size(), 1u);
  EXPECT_EQ(clash[0].first, 0u);
  EXPECT_EQ(clash[0].second, "optimizer 'o' (momentum) adds 'o_update' for its update function, state and hyper-parameters, but "
                             "'o_update' is a function declared at 1:1; rename one of them");

  auto twice = training_name_errors({o, p}, shareds, {});
  ASSERT_EQ(twice.size(), 1u);
  EXPECT_EQ(twice[0].first, 1u);
  EXPECT_EQ(twice[0].second, "optimizer 'p' (momentum) adds 'w_velocity' for its update function, state and hyper-parameters, but "
                             "'w_velocity' is what optimizer 'o' adds too; rename one of them");
}

}  // namespace
}  // namespace synk::dsl::checks
