// The training-step expansion (train.h): one update function per used optimizer.
#include "compiler/grad/train.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"

namespace synk::compiler {

void read_input_from_shared(ir::Module& module, const std::string& function, const std::string& param,
                            const std::string& shared) {
  auto fn = std::find_if(module.functions.begin(), module.functions.end(),
                         [&](const ir::Function& f) { return f.name == function; });
  if (fn == module.functions.end()) throw synk::UserError(fmt::format("no function '{}'", function));
  auto p = std::find_if(fn->params.begin(), fn->params.end(), [&](const ir::Param& x) { return x.name == param; });
  if (p == fn->params.end()) throw synk::UserError(fmt::format("function '{}' has no input '{}'", function, param));
  int64_t s = module.find_shared(shared);
  if (s < 0) throw synk::UserError(fmt::format("no shared variable '{}'", shared));
  const ir::TensorType& type = module.shareds[size_t(s)].type;
  if (!(p->type == type))
    throw synk::UserError(fmt::format("input '{}' of '{}' is {} but shared variable '{}' is {}", param, function,
                                     ir::type_str(p->type), shared, ir::type_str(type)));
  int64_t index = p - fn->params.begin();
  for (ir::Node& node : fn->nodes) {
    if (node.op != ir::Op::Input) continue;
    if (node.attrs.index == index) {
      node.op = ir::Op::SharedRead;
      node.attrs.index = s;
    } else if (node.attrs.index > index) {
      --node.attrs.index;
    }
  }
  fn->params.erase(p);
  std::vector<std::string> problems = ir::verify(module);
  if (!problems.empty()) synk::internal_error("read_input_from_shared broke the IR: " + problems.front());
}

bool training_steps_expanded(const ir::Module& module) {
  return std::any_of(module.optimizers.begin(), module.optimizers.end(), [&](const ir::Optimizer& o) {
    return o.gradient >= 0 && module.find_function(o.update_function()) != nullptr;
  });
}

void expand_training_steps(ir::Module& module) {
  for (const ir::Optimizer& o : module.optimizers) {
    if (o.gradient < 0 || module.find_function(o.update_function()) != nullptr) continue;
    const UpdateRule rule = make_update_rule(o.rule, o.hyper_parameters);
    std::vector<std::string> parameters;
    for (int64_t p : o.parameters) parameters.push_back(module.shareds.at(size_t(p)).name);
    const std::string gradient = module.shareds.at(size_t(o.gradient)).name;
    const std::string function = o.update_function();
    add_update_function(module, function, parameters, rule, o.loc, o.name);
    read_input_from_shared(module, function, "grad", gradient);
  }
}

void set_optimizer(ir::Module& module, const std::string& name, const std::string& rule,
                   const std::vector<std::pair<std::string, double>>& hyper_parameters) {
  auto it = std::find_if(module.optimizers.begin(), module.optimizers.end(),
                         [&](const ir::Optimizer& o) { return o.name == name; });
  if (it == module.optimizers.end()) {
    std::vector<std::string> names;
    for (const ir::Optimizer& o : module.optimizers) names.push_back(o.name);
    throw synk::UserError(fmt::format("set_optimizer: the module has no optimizer '{}' ({})", name,
                                     names.empty() ? std::string("it declares none")
                                                   : fmt::format("it has: {}", fmt::join(names, ", "))));
  }
  if (module.find_function(it->update_function()) != nullptr)
    throw synk::UserError(fmt::format("set_optimizer: optimizer '{}' is already expanded into '{}'", name,
                                     it->update_function()));
  (void)make_update_rule(rule, hyper_parameters);   // UserError naming what is wrong
  it->rule = rule;
  it->hyper_parameters.assign(hyper_parameters.begin(), hyper_parameters.end());
}

}  // namespace synk::compiler
