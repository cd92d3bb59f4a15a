// Tests of the optimizer update rules: every rule, applied for several steps through the
// reference evaluator to parameters of several shapes (f64 and f32) with fresh random gradients,
// against an independent float64 implementation of Lasagne's formulas written here with plain
// loops; the layout of the flat gradient; the state variables added; every bad input; and a
// small training loop that chains the gradient pass and an update function.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "compiler/grad/grad.h"
#include "compiler/grad/node_writer.h"
#include "compiler/grad/grad_test_util.h"
#include "compiler/grad/update_rules.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

using dsl::HostTensor;
using ir::DType;
using testing::T;

// ---- the independent reference -----------------------------------------------------------

// One parameter and its state as plain arrays, updated in place by Lasagne's formulas.
struct RefParam {
  std::vector<double> p;
  std::map<std::string, std::vector<double>> slot;
};

void reference_step(const UpdateRule& r, std::vector<RefParam>& params, double& t, const std::vector<double>& grad) {
  t += 1;
  // PyTorch's clip_grad_norm_: the whole flat gradient scaled to norm clip_norm when larger.
  double clip = 1;
  if (r.clip_norm && *r.clip_norm > 0) {
    double sum = 0;
    for (double g : grad) sum += g * g;
    clip = std::min(1.0, *r.clip_norm / (std::sqrt(sum) + 1e-6));
  }
  size_t at = 0;
  for (RefParam& param : params) {
    for (size_t i = 0; i < param.p.size(); ++i, ++at) {
      const double g = grad[at] * clip;
      double& p = param.p[i];
      switch (r.kind) {
        case UpdateRuleKind::Sgd:
          p -= r.learning_rate * g;
          break;
        case UpdateRuleKind::Momentum: {
          double& v = param.slot["velocity"][i];
          v = r.momentum * v - r.learning_rate * g;
          p += v;
          break;
        }
        case UpdateRuleKind::Nesterov: {
          double& v = param.slot["velocity"][i];
          v = r.momentum * v - r.learning_rate * g;
          p += r.momentum * v - r.learning_rate * g;
          break;
        }
        case UpdateRuleKind::Adagrad: {
          double& a = param.slot["accu"][i];
          a += g * g;
          p -= r.learning_rate * g / std::sqrt(a + r.epsilon);
          break;
        }
        case UpdateRuleKind::RMSProp: {
          double& a = param.slot["accu"][i];
          a = r.rho * a + (1 - r.rho) * g * g;
          p -= r.learning_rate * g / std::sqrt(a + r.epsilon);
          break;
        }
        case UpdateRuleKind::Adadelta: {
          double& a = param.slot["accu"][i];
          double& d = param.slot["delta_accu"][i];
          a = r.rho * a + (1 - r.rho) * g * g;
          const double u = g * std::sqrt(d + r.epsilon) / std::sqrt(a + r.epsilon);
          p -= r.learning_rate * u;
          d = r.rho * d + (1 - r.rho) * u * u;
          break;
        }
        case UpdateRuleKind::Adam: {
          double& m = param.slot["m"][i];
          double& v = param.slot["v"][i];
          const double a_t = r.learning_rate * std::sqrt(1 - std::pow(r.beta2, t)) / (1 - std::pow(r.beta1, t));
          m = r.beta1 * m + (1 - r.beta1) * g;
          v = r.beta2 * v + (1 - r.beta2) * g * g;
          p -= a_t * m / (std::sqrt(v) + r.epsilon);
          break;
        }
        case UpdateRuleKind::Adamax: {
          double& m = param.slot["m"][i];
          double& u = param.slot["u"][i];
          const double a_t = r.learning_rate / (1 - std::pow(r.beta1, t));
          m = r.beta1 * m + (1 - r.beta1) * g;
          u = std::max(r.beta2 * u, std::fabs(g));
          p -= a_t * m / (u + r.epsilon);
          break;
        }
        case UpdateRuleKind::AdamW: {   // torch.optim.AdamW, written out
          double& m = param.slot["m"][i];
          double& v = param.slot["v"][i];
          p *= 1 - r.learning_rate * r.weight_decay;
          m = r.beta1 * m + (1 - r.beta1) * g;
          v = r.beta2 * v + (1 - r.beta2) * g * g;
          const double bias1 = 1 - std::pow(r.beta1, t), bias2 = 1 - std::pow(r.beta2, t);
          p -= r.learning_rate / bias1 * m / (std::sqrt(v) / std::sqrt(bias2) + r.epsilon);
          break;
        }
      }
    }
  }
}

std::vector<std::string> slots_of(UpdateRuleKind kind) {
  switch (kind) {
    case UpdateRuleKind::Sgd: return {};
    case UpdateRuleKind::Momentum: case UpdateRuleKind::Nesterov: return {"velocity"};
    case UpdateRuleKind::Adagrad: case UpdateRuleKind::RMSProp: return {"accu"};
    case UpdateRuleKind::Adadelta: return {"accu", "delta_accu"};
    case UpdateRuleKind::Adam: case UpdateRuleKind::AdamW: return {"m", "v"};
    case UpdateRuleKind::Adamax: return {"m", "u"};
  }
  return {};
}

// ---- the rules through the evaluator ------------------------------------------------------

struct RuleCase {
  std::string name;
  UpdateRule rule;
};
void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

UpdateRule with_clip(UpdateRule rule, double clip_norm) {
  rule.clip_norm = clip_norm;
  return rule;
}

std::vector<RuleCase> rule_cases() {
  return {{"sgd", UpdateRule::sgd(0.1)},
          {"momentum", UpdateRule::with_momentum(0.05)},
          {"momentum_mu_half", UpdateRule::with_momentum(0.2, 0.5)},
          {"nesterov", UpdateRule::nesterov(0.05)},
          {"nesterov_mu_0_7", UpdateRule::nesterov(0.1, 0.7)},
          {"adagrad", UpdateRule::adagrad()},
          {"adagrad_custom", UpdateRule::adagrad(0.5, 1e-3)},
          {"rmsprop", UpdateRule::rmsprop()},
          {"rmsprop_custom", UpdateRule::rmsprop(0.01, 0.5, 1e-4)},
          {"adadelta", UpdateRule::adadelta()},
          {"adadelta_custom", UpdateRule::adadelta(0.5, 0.8, 1e-3)},
          {"adam", UpdateRule::adam()},
          {"adam_custom", UpdateRule::adam(0.01, 0.8, 0.99, 1e-6)},
          {"adamax", UpdateRule::adamax()},
          {"adamax_custom", UpdateRule::adamax(0.01, 0.5, 0.9, 1e-5)},
          {"adamw", UpdateRule::adamw()},
          {"adamw_custom", UpdateRule::adamw(0.01, 0.8, 0.99, 1e-6, 0.1)},
          {"sgd_clipped", with_clip(UpdateRule::sgd(0.1), 0.5)},
          {"momentum_clip_off", with_clip(UpdateRule::with_momentum(0.05), 0)},
          {"adam_clip_not_reached", with_clip(UpdateRule::adam(0.01), 1e6)},
          {"adamw_clipped", with_clip(UpdateRule::adamw(0.01), 0.25)}};
}

// Applies `rule` for `steps` steps to parameters of these types (listed to the update function
// in the order `order`, which need not be declaration order) and compares every parameter and
// state variable with the reference after every step.
// The value a zeros- or constant-initialised variable starts with.
double initial_value(const ir::SharedVar& v) {
  if (const auto* c = std::get_if<ir::InitConstant>(&v.init)) return c->value;
  EXPECT_TRUE(std::holds_alternative<ir::InitZeros>(v.init)) << v.name;
  return 0;
}

void check_rule(const RuleCase& c, const std::vector<ir::TensorType>& types, const std::vector<size_t>& order,
                int steps, double tolerance) {
  testing::Rng rng(c.name);
  ir::Module m;
  std::vector<HostTensor> values;
  for (size_t k = 0; k < types.size(); ++k) {
    m.shareds.push_back(ir::SharedVar{"p" + std::to_string(k), types[k], ir::InitZeros{}, false, {}});
    values.push_back(testing::uniform_tensor(rng, types[k].dtype, testing::static_sizes(types[k]), -1, 1));
  }
  std::vector<std::string> names;
  for (size_t k : order) names.push_back(m.shareds[k].name);
  const UpdateFunctionInfo info = add_update_function(m, "step", names, c.rule);
  const std::vector<std::string> problems = ir::verify(m);
  ASSERT_TRUE(problems.empty()) << problems.front();

  // The function's signature and the state it added.
  const ir::Function* fn = m.find_function("step");
  ASSERT_NE(fn, nullptr);
  ASSERT_EQ(fn->params.size(), 1u);
  EXPECT_EQ(fn->params[0].role, ir::Role::Broadcast);
  int64_t total = 0;
  for (const ir::TensorType& t : types) total += testing::count_of(testing::static_sizes(t));
  EXPECT_EQ(info.gradient_size, total);
  const DType grad_dtype = fn->params[0].type.dtype;
  EXPECT_EQ(fn->params[0].type, T(grad_dtype, {int(total)}));
  const std::vector<std::string> slots = slots_of(c.rule.kind);
  EXPECT_EQ(info.state.size(), slots.size() * order.size());
  for (size_t k : order)
    for (const std::string& slot : slots) {
      const int64_t s = m.find_shared(m.shareds[k].name + "_" + slot);
      ASSERT_GE(s, 0) << "missing state " << m.shareds[k].name << "_" << slot;
      EXPECT_EQ(m.shareds[size_t(s)].type, types[k]);
      EXPECT_TRUE(std::holds_alternative<ir::InitZeros>(m.shareds[size_t(s)].init));
    }
  // One f64 scalar variable per hyper-parameter, initialised to the rule's value.
  const std::vector<std::pair<std::string, double>> hyper = dsl::hyper_parameter_values(c.rule);
  ASSERT_EQ(info.hyper.size(), hyper.size());
  for (size_t k = 0; k < hyper.size(); ++k) {
    EXPECT_EQ(info.hyper[k].first, hyper[k].first);
    const ir::SharedVar& v = m.shareds.at(size_t(info.hyper[k].second));
    EXPECT_EQ(v.name, "step_" + hyper[k].first);
    EXPECT_EQ(v.type, T(DType::F64, {}));
    ASSERT_TRUE(std::holds_alternative<ir::InitConstant>(v.init)) << v.name;
    EXPECT_EQ(std::get<ir::InitConstant>(v.init).value, hyper[k].second) << v.name;
  }
  EXPECT_EQ(c.rule.clip_norm.has_value(), m.find_shared("step_clip_norm") >= 0);
  const bool counted = c.rule.kind == UpdateRuleKind::Adam || c.rule.kind == UpdateRuleKind::Adamax ||
                       c.rule.kind == UpdateRuleKind::AdamW;
  EXPECT_EQ(info.step_counter >= 0, counted);
  if (counted) {
    EXPECT_EQ(m.shareds[size_t(info.step_counter)].name, "step_t");
  }
  EXPECT_EQ(fn->updates.size(), order.size() * (1 + slots.size()) + (counted ? 1 : 0));

  // Zeros for the state and the declared values for the hyper-parameters, as the initializers say.
  for (size_t s = types.size(); s < m.shareds.size(); ++s)
    values.push_back(HostTensor::filled(m.shareds[s].type.dtype, testing::static_sizes(m.shareds[s].type),
                                        initial_value(m.shareds[s])));

  std::vector<RefParam> ref;
  for (size_t k : order) {
    RefParam r{values[k].data, {}};
    for (const std::string& slot : slots) r.slot[slot].assign(r.p.size(), 0);
    ref.push_back(r);
  }
  double t = 0;
  for (int step = 0; step < steps; ++step) {
    const HostTensor grad = testing::uniform_tensor(rng, grad_dtype, {total}, -2, 2);
    const dsl::EvalResult result = dsl::evaluate(m, "step", std::vector{grad}, values);
    for (size_t u = 0; u < fn->updates.size(); ++u) values[size_t(fn->updates[u].shared)] = result.updates[u];
    reference_step(c.rule, ref, t, grad.data);
    for (size_t i = 0; i < order.size(); ++i) {
      const std::string& name = m.shareds[order[i]].name;
      auto compare = [&](const std::vector<double>& want, const HostTensor& got, const std::string& what) {
        ASSERT_EQ(got.data.size(), want.size());
        for (size_t j = 0; j < want.size(); ++j)
          EXPECT_NEAR(got.data[j], want[j], tolerance * (1 + std::fabs(want[j])))
              << what << "[" << j << "] after step " << step + 1;
      };
      compare(ref[i].p, values[order[i]], name);
      for (const std::string& slot : slots)
        compare(ref[i].slot[slot], values[size_t(m.find_shared(name + "_" + slot))], name + "_" + slot);
    }
    if (counted) {
      EXPECT_EQ(values[size_t(info.step_counter)].data[0], step + 1);
    }
  }
}

class UpdateRuleCheck : public ::testing::TestWithParam<RuleCase> {};

TEST_P(UpdateRuleCheck, MatchesReferenceForSeveralF64Parameters) {
  const std::vector<ir::TensorType> types = {T(DType::F64, {3, 4}), T(DType::F64, {4}), T(DType::F64, {}),
                                             T(DType::F64, {2, 1, 2})};
  check_rule(GetParam(), types, {2, 0, 3, 1}, 6, 1e-12);
}

TEST_P(UpdateRuleCheck, MatchesReferenceForOneF32Parameter) {
  check_rule(GetParam(), {T(DType::F32, {5, 3})}, {0}, 6, 2e-5);
}

TEST_P(UpdateRuleCheck, MatchesReferenceForManyMixedParameters) {
  std::vector<ir::TensorType> types;
  std::vector<size_t> order;
  for (int k = 0; k < 9; ++k) {
    types.push_back(T(k % 3 == 0 ? DType::F32 : DType::F64, {k + 1, 2}));
    order.push_back(size_t((k * 4) % 9));
  }
  check_rule(GetParam(), types, order, 3, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(EveryRule, UpdateRuleCheck, ::testing::ValuesIn(rule_cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& info) { return info.param.name; });

// ---- names, defaults and bad input ----------------------------------------------------------

ir::Module module_with(std::vector<ir::SharedVar> shareds) {
  ir::Module m;
  m.shareds = std::move(shareds);
  return m;
}

ir::SharedVar shared(const std::string& name, ir::TensorType type) { return ir::SharedVar{name, type, ir::InitZeros{}, false, {}}; }

TEST(UpdateRules, DefaultsAreLasagnes) {
  EXPECT_EQ(UpdateRule::with_momentum(0.1).momentum, 0.9);
  EXPECT_EQ(UpdateRule::nesterov(0.1).momentum, 0.9);
  const UpdateRule adagrad = UpdateRule::adagrad();
  EXPECT_EQ(adagrad.learning_rate, 0.01);
  EXPECT_EQ(adagrad.epsilon, 1e-6);
  const UpdateRule rmsprop = UpdateRule::rmsprop();
  EXPECT_EQ(rmsprop.learning_rate, 0.001);
  EXPECT_EQ(rmsprop.rho, 0.9);
  EXPECT_EQ(rmsprop.epsilon, 1e-6);
  const UpdateRule adadelta = UpdateRule::adadelta();
  EXPECT_EQ(adadelta.learning_rate, 1.0);
  EXPECT_EQ(adadelta.rho, 0.95);
  EXPECT_EQ(adadelta.epsilon, 1e-6);
  const UpdateRule adam = UpdateRule::adam();
  EXPECT_EQ(adam.learning_rate, 0.001);
  EXPECT_EQ(adam.beta1, 0.9);
  EXPECT_EQ(adam.beta2, 0.999);
  EXPECT_EQ(adam.epsilon, 1e-8);
  const UpdateRule adamax = UpdateRule::adamax();
  EXPECT_EQ(adamax.learning_rate, 0.002);
  EXPECT_EQ(adamax.epsilon, 1e-8);
}

TEST(UpdateRules, MakeUpdateRuleByName) {
  using KV = std::pair<std::string, double>;
  const std::vector<KV> lr = {{"lr", 0.05}, {"momentum", 0.8}};
  const UpdateRule r = make_update_rule("nesterov", lr);
  EXPECT_EQ(r.kind, UpdateRuleKind::Nesterov);
  EXPECT_EQ(r.learning_rate, 0.05);
  EXPECT_EQ(r.momentum, 0.8);
  const UpdateRule adam = make_update_rule("adam", std::vector<KV>{{"beta2", 0.99}});
  EXPECT_EQ(adam.learning_rate, 0.001);
  EXPECT_EQ(adam.beta2, 0.99);
  for (const char* name : {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adadelta", "adam", "adamax", "adamw"}) {
    ASSERT_TRUE(update_rule_from_name(name).has_value()) << name;
    EXPECT_STREQ(update_rule_name(*update_rule_from_name(name)), name);
  }
  auto message = [](std::string_view name, std::vector<KV> kv) {
    try {
      make_update_rule(name, kv);
    } catch (const synk::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("lamb", {}).find("unknown update rule 'lamb'"), std::string::npos);
  EXPECT_NE(message("adamx", {}).find("unknown update rule 'adamx'; did you mean 'adam'?"), std::string::npos);
  EXPECT_NE(message("adam", {{"betta1", 0.8}}).find("no hyper-parameter 'betta1'; did you mean 'beta1'? (it takes:"),
            std::string::npos);
  EXPECT_NE(message("sgd", {}).find("needs a learning rate"), std::string::npos);
  EXPECT_NE(message("sgd", {{"lr", 0.1}, {"momentum", 0.9}}).find("has no hyper-parameter 'momentum'"), std::string::npos);
  EXPECT_NE(message("adam", {{"lr", 0.1}, {"lr", 0.2}}).find("given twice"), std::string::npos);
  EXPECT_NE(message("momentum", {{"lr", 0.1}, {"momentum", 1.0}}).find("momentum is 1"), std::string::npos);
  EXPECT_NE(message("adam", {{"lr", -1}}).find("learning rate"), std::string::npos);
}

TEST(UpdateRules, BadHyperParametersAreUserErrors) {
  EXPECT_THROW(check_update_rule(UpdateRule::sgd(0)), synk::UserError);
  EXPECT_THROW(check_update_rule(UpdateRule::sgd(std::nan(""))), synk::UserError);
  EXPECT_THROW(check_update_rule(UpdateRule::with_momentum(0.1, -0.1)), synk::UserError);
  EXPECT_THROW(check_update_rule(UpdateRule::rmsprop(0.1, 1.0)), synk::UserError);
  EXPECT_THROW(check_update_rule(UpdateRule::adam(0.1, 0.9, 1.5)), synk::UserError);
  EXPECT_THROW(check_update_rule(UpdateRule::adamax(0.1, 0.9, 0.99, -1)), synk::UserError);
  EXPECT_NO_THROW(check_update_rule(UpdateRule::with_momentum(0.1, 0)));
}

std::string add_error(ir::Module& m, const std::vector<std::string>& params, const UpdateRule& rule,
                      const std::string& fn = "step") {
  const size_t shareds = m.shareds.size(), functions = m.functions.size();
  try {
    add_update_function(m, fn, params, rule);
  } catch (const synk::UserError& e) {
    EXPECT_EQ(m.shareds.size(), shareds) << "a failed call must leave the module unchanged";
    EXPECT_EQ(m.functions.size(), functions);
    return e.what();
  }
  return "no error";
}

TEST(UpdateRules, BadParametersAreUserErrorsThatChangeNothing) {
  ir::Module m = module_with({shared("w", T(DType::F32, {3})), shared("k", T(DType::I32, {3})),
                              shared("rows", T(DType::F32, {"n", 3})), shared("w_m", T(DType::F32, {3}))});
  const UpdateRule sgd = UpdateRule::sgd(0.1);
  EXPECT_NE(add_error(m, {"nope"}, sgd).find("'nope' is not a shared variable"), std::string::npos);
  EXPECT_NE(add_error(m, {"w", "w"}, sgd).find("listed twice"), std::string::npos);
  EXPECT_NE(add_error(m, {"k"}, sgd).find("parameters must be f32 or f64"), std::string::npos);
  EXPECT_NE(add_error(m, {"rows"}, sgd).find("symbolic shape"), std::string::npos);
  EXPECT_NE(add_error(m, {}, sgd).find("no parameters"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, UpdateRule::adam()).find("'w_m' would clash"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, UpdateRule::sgd(-1)).find("learning rate"), std::string::npos);
  add_update_function(m, "step", std::vector<std::string>{"w"}, sgd);
  EXPECT_NE(add_error(m, {"w"}, sgd, "step").find("already has a function 'step'"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, UpdateRule::adamax(), "w").find("clash"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, sgd, "update").find("'update' cannot name an update function"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, sgd, "").find("cannot name"), std::string::npos);
  EXPECT_NE(add_error(m, {"w"}, sgd, "train step").find("cannot name"), std::string::npos);
  try {
    add_update_function(m, "step2", std::vector<std::string>{"w"}, sgd, {}, "bad prefix");
    ADD_FAILURE() << "a prefix that makes no identifier";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'bad prefix_lr' cannot name its hyper-parameter variable"),
              std::string::npos) << e.what();
  }
  ir::Module taken = module_with({shared("w", T(DType::F32, {3})), shared("opt_lr", T(DType::F64, {}))});
  const size_t before = taken.shareds.size();
  try {
    add_update_function(taken, "opt_update", std::vector<std::string>{"w"}, sgd, {}, "opt");
    ADD_FAILURE() << "opt_lr is taken";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("hyper-parameter variable 'opt_lr' would clash"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(taken.shareds.size(), before) << "a failed call leaves the module unchanged";
}

TEST(UpdateRules, GeneratedFunctionPrintsAsSynkThatReadsBack) {
  for (const RuleCase& c : rule_cases()) {
    ir::Module m = module_with({shared("w", T(DType::F32, {3, 2})), shared("b", T(DType::F32, {2}))});
    add_update_function(m, "train_step", std::vector<std::string>{"w", "b"}, c.rule);
    const std::string text = dsl::print_module(m);
    ir::Module reread;
    try {
      reread = dsl::compile_source(c.name + ".synk", text);
    } catch (const synk::UserError& e) {
      FAIL() << c.name << ": " << e.what() << "\n" << text;
    }
    std::string difference;
    EXPECT_TRUE(ir::structurally_equal(m, reread, &difference)) << c.name << ": " << difference << "\n" << text;
  }
}

TEST(UpdateRules, GradientDtypeIsThePromotedParameterDtype) {
  ir::Module m = module_with({shared("a", T(DType::F32, {2})), shared("b", T(DType::F64, {3}))});
  add_update_function(m, "step", std::vector<std::string>{"a", "b"}, UpdateRule::with_momentum(0.1));
  EXPECT_EQ(m.find_function("step")->params[0].type, T(DType::F64, {5}));
  EXPECT_TRUE(ir::verify(m).empty());
  ir::Module single = module_with({shared("a", T(DType::F32, {2, 2}))});
  add_update_function(single, "step", std::vector<std::string>{"a"}, UpdateRule::sgd(0.1));
  EXPECT_EQ(single.find_function("step")->params[0].type, T(DType::F32, {4}));
}

// ---- gradient clipping -------------------------------------------------------------------------

// One sgd(lr=1) step from w = 0 with `grad`: returns the new w (= -the gradient the rule used).
std::vector<double> clipped_step(std::optional<double> clip_norm, const std::vector<double>& grad,
                                 std::optional<double> clip_at_run_time = std::nullopt) {
  ir::Module m = module_with({shared("w", T(DType::F64, {int(grad.size())}))});
  UpdateRule rule = UpdateRule::sgd(1);
  rule.clip_norm = clip_norm;
  const UpdateFunctionInfo info = add_update_function(m, "step", std::vector<std::string>{"w"}, rule);
  std::vector<HostTensor> values;
  for (const ir::SharedVar& v : m.shareds)
    values.push_back(HostTensor::filled(v.type.dtype, testing::static_sizes(v.type), initial_value(v)));
  if (clip_at_run_time) values.at(size_t(m.find_shared("step_clip_norm"))).data[0] = *clip_at_run_time;
  HostTensor g = HostTensor::filled(DType::F64, {int64_t(grad.size())}, 0);
  g.data = grad;
  const dsl::EvalResult result = dsl::evaluate(m, "step", std::vector{g}, values);
  const ir::Function* fn = m.find_function("step");
  for (size_t u = 0; u < fn->updates.size(); ++u)
    if (fn->updates[u].shared == info.parameters[0]) return result.updates[u].data;
  ADD_FAILURE() << "no update of w";
  return {};
}

TEST(UpdateRules, ClipNormScalesALargeGradientExactlyAndLeavesASmallOneAlone) {
  const std::vector<double> large = {3, -4, 0, 0}, small = {0.3, -0.4, 0, 0};   // norms 5 and 0.5
  const double factor = 1.0 / (5.0 + 1e-6);   // PyTorch: max_norm / (total_norm + 1e-6)
  const std::vector<double> clipped = clipped_step(1.0, large);
  ASSERT_EQ(clipped.size(), 4u);
  double norm = 0;
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(clipped[j], -(large[j] * factor)) << j;
    norm += clipped[j] * clipped[j];
  }
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6);
  for (const std::optional<double>& clip : {std::optional<double>(1.0), std::optional<double>(0.0),
                                            std::optional<double>()}) {
    const std::vector<double> unchanged = clipped_step(clip, small);
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(unchanged[j], -small[j]) << "clip_norm " << clip.value_or(-1);
  }
  // 0 turns clipping off; the threshold is read at run time.
  const std::vector<double> off = clipped_step(0.0, large);
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(off[j], -large[j]) << j;
  const std::vector<double> set_later = clipped_step(0.0, large, 1.0);
  EXPECT_EQ(set_later, clipped);
  const std::vector<double> raised = clipped_step(1.0, large, 10.0);
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(raised[j], -large[j]) << j;
}

// A hyper-parameter read from its variable: the update with the variable changed equals the update
// of a function made with the new value, bit for bit, for every rule.
TEST(UpdateRules, HyperParametersAreReadFromTheirVariables) {
  for (const RuleCase& c : rule_cases()) {
    UpdateRule changed = c.rule;
    changed.learning_rate *= 0.5;
    if (c.rule.kind == UpdateRuleKind::AdamW) changed.weight_decay = 0.2;
    if (c.rule.kind == UpdateRuleKind::Momentum || c.rule.kind == UpdateRuleKind::Nesterov) changed.momentum = 0.3;
    testing::Rng rng(c.name);
    const HostTensor w0 = testing::uniform_tensor(rng, DType::F32, {7}, -1, 1);
    const HostTensor grad = testing::uniform_tensor(rng, DType::F32, {7}, -2, 2);
    auto run = [&](const UpdateRule& built, const UpdateRule& value) {
      ir::Module m = module_with({shared("w", T(DType::F32, {7}))});
      add_update_function(m, "step", std::vector<std::string>{"w"}, built);
      std::vector<HostTensor> values = {w0};
      const std::vector<std::pair<std::string, double>> wanted = dsl::hyper_parameter_values(value);
      for (size_t s = 1; s < m.shareds.size(); ++s) {
        values.push_back(HostTensor::filled(m.shareds[s].type.dtype, testing::static_sizes(m.shareds[s].type),
                                            initial_value(m.shareds[s])));
        for (const auto& [keyword, v] : wanted)
          if (m.shareds[s].name == "step_" + keyword) values.back().data[0] = v;
      }
      return dsl::evaluate(m, "step", std::vector{grad}, values).updates;
    };
    const std::vector<HostTensor> set = run(c.rule, changed), built = run(changed, changed), old = run(c.rule, c.rule);
    ASSERT_EQ(set.size(), built.size()) << c.name;
    for (size_t u = 0; u < set.size(); ++u) EXPECT_EQ(set[u].data, built[u].data) << c.name << " update " << u;
    auto flat = [](const std::vector<HostTensor>& updates) {
      std::vector<double> all;
      for (const HostTensor& u : updates) all.insert(all.end(), u.data.begin(), u.data.end());
      return all;
    };
    EXPECT_NE(flat(set), flat(old)) << c.name << ": the changed hyper-parameters change the update";
  }
}

// ---- the training pattern: gradient function -> flat vector -> update function -------------

TEST(UpdateRules, LinearRegressionTrainsWithGradientThenUpdate) {
  testing::Rng rng("LinearRegressionTrainsWithGradientThenUpdate");
  ir::Module m = module_with({shared("w", T(DType::F64, {3, 1})), shared("b", T(DType::F64, {1}))});
  ir::Function grad_fn;
  grad_fn.name = "gradient";
  grad_fn.params = {ir::Param{"x", ir::Role::Scatter, T(DType::F64, {"n", 3}), {}},
                    ir::Param{"y", ir::Role::Scatter, T(DType::F64, {"n", 1}), {}}};
  grad_detail::NodeWriter w(grad_fn, {});
  const ir::NodeId x = w.input(0), y = w.input(1);
  const ir::NodeId wr = w.shared_read(0, T(DType::F64, {3, 1})), br = w.shared_read(1, T(DType::F64, {1}));
  const ir::NodeId residual = w.sub(w.add(w.matmul(x, wr), br), y);
  const ir::NodeId loss = w.reduce(ir::Op::ReduceMean, w.mul(residual, residual), {0, 1}, false);
  grad_fn.outputs = {ir::Output{"loss", loss, ir::ReduceMode::Avg, {}},
                     ir::Output{"grad", w.add(ir::Op::Grad, {loss, wr, br}), ir::ReduceMode::Avg, {}}};
  m.functions.push_back(grad_fn);
  add_update_function(m, "train_step", std::vector<std::string>{"w", "b"}, UpdateRule::with_momentum(0.1));
  const ir::Module compiled = expand_gradients(m);
  ASSERT_TRUE(ir::verify(compiled).empty());

  const int n = 16;
  const std::vector<double> true_w = {1.5, -2, 0.5};
  HostTensor xs = testing::uniform_tensor(rng, DType::F64, {n, 3}, -1, 1);
  HostTensor ys = HostTensor::filled(DType::F64, {n, 1}, 0);
  for (int i = 0; i < n; ++i)
    ys.data[size_t(i)] = 0.3 + true_w[0] * xs.data[size_t(3 * i)] + true_w[1] * xs.data[size_t(3 * i + 1)] +
                         true_w[2] * xs.data[size_t(3 * i + 2)];
  std::vector<HostTensor> values;   // w, b, the hyper-parameters and the velocities, as initialised
  for (const ir::SharedVar& v : compiled.shareds)
    values.push_back(HostTensor::filled(v.type.dtype, testing::static_sizes(v.type), initial_value(v)));
  // Reference: the same steps with the gradient written out by hand (2/n X^T r, 2/n sum r).
  std::vector<RefParam> ref = {{{0, 0, 0}, {{"velocity", {0, 0, 0}}}}, {{0}, {{"velocity", {0}}}}};
  double t = 0, first_loss = 0, last_loss = 0;
  const ir::Function* update = compiled.find_function("train_step");
  for (int step = 0; step < 60; ++step) {
    const dsl::EvalResult g = dsl::evaluate(compiled, "gradient", std::vector{xs, ys}, values);
    std::vector<double> hand(4, 0);
    for (int i = 0; i < n; ++i) {
      double r = ref[1].p[0] - ys.data[size_t(i)];
      for (int j = 0; j < 3; ++j) r += xs.data[size_t(3 * i + j)] * ref[0].p[size_t(j)];
      for (int j = 0; j < 3; ++j) hand[size_t(j)] += 2.0 / n * xs.data[size_t(3 * i + j)] * r;
      hand[3] += 2.0 / n * r;
    }
    for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(g.outputs[1].data[j], hand[j], 1e-12) << "step " << step;
    (step == 0 ? first_loss : last_loss) = g.outputs[0].data[0];
    const dsl::EvalResult u = dsl::evaluate(compiled, "train_step", std::vector{g.outputs[1]}, values);
    for (size_t k = 0; k < update->updates.size(); ++k) values[size_t(update->updates[k].shared)] = u.updates[k];
    reference_step(UpdateRule::with_momentum(0.1), ref, t, hand);
  }
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(values[0].data[size_t(j)], ref[0].p[size_t(j)], 1e-9);
  EXPECT_LT(last_loss, first_loss * 1e-2) << "60 momentum steps fit a noiseless linear model";
}

}  // namespace
}  // namespace synk::compiler
