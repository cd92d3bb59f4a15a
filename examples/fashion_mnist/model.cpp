// Building the Fashion-MNIST model (model.h).
#include "examples/fashion_mnist/model.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dsl/frontend.h"

namespace fashion_mnist {

void read_input_from_shared(synk::ir::Module& module, const std::string& function, const std::string& param,
                            const std::string& shared) {
  using namespace synk;
  auto fn = std::find_if(module.functions.begin(), module.functions.end(),
                         [&](const ir::Function& f) { return f.name == function; });
  if (fn == module.functions.end()) throw dsl::UserError(fmt::format("no function '{}'", function));
  auto p = std::find_if(fn->params.begin(), fn->params.end(), [&](const ir::Param& x) { return x.name == param; });
  if (p == fn->params.end()) throw dsl::UserError(fmt::format("function '{}' has no input '{}'", function, param));
  int64_t s = module.find_shared(shared);
  if (s < 0) throw dsl::UserError(fmt::format("no shared variable '{}'", shared));
  const ir::TensorType& type = module.shareds[size_t(s)].type;
  if (!(p->type == type))
    throw dsl::UserError(fmt::format("input '{}' of '{}' is {} but shared variable '{}' is {}", param, function,
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
  if (!problems.empty()) dsl::internal_error("read_input_from_shared broke the IR: " + problems.front());
}

Model build_model(const std::string& synk_path, const synk::compiler::UpdateRule& rule) {
  std::ifstream file(synk_path);
  if (!file) throw synk::dsl::UserError(fmt::format("cannot read the model '{}'", synk_path));
  std::stringstream text;
  text << file.rdbuf();
  synk::ir::Module ir = synk::dsl::compile_source(synk_path, text.str());

  Model model;
  model.parameters = {"w1", "b1", "w2", "b2", "w3", "b3"};
  synk::compiler::add_update_function(ir, "train_step", model.parameters, rule);
  read_input_from_shared(ir, "train_step", "grad", "grads");

  model.module = synk::jit::compile(ir);
  model.gradient = model.module.function("gradient");
  model.gradient_device = model.module.function("gradient_device");
  model.update = model.module.function("train_step");
  model.evaluate = model.module.function("evaluate");
  model.grads = model.module.shared("grads").var();
  model.train_images = model.module.shared("train_images").var();
  model.train_labels = model.module.shared("train_labels").var();
  return model;
}

}  // namespace fashion_mnist
