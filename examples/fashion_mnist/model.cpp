// Building the Fashion-MNIST model (model.h).
#include "examples/fashion_mnist/model.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/grad/train.h"
#include "dsl/frontend.h"

namespace fashion_mnist {

Model build_model(const std::string& synk_path, const std::optional<OptimizerChoice>& optimizer) {
  std::error_code ec;
  if (std::filesystem::is_directory(synk_path, ec))
    throw synk::UserError(fmt::format("the model '{}' is a directory, not a .synk file", synk_path));
  std::ifstream file(synk_path);
  if (!file) throw synk::UserError(fmt::format("cannot read the model '{}': {}", synk_path, std::strerror(errno)));
  std::stringstream text;
  text << file.rdbuf();
  synk::ir::Module ir = synk::dsl::compile_source(synk_path, text.str());
  if (optimizer) {
    OptimizerChoice choice = *optimizer;
    if (choice.rule.empty()) {   // the model's rule and hyper-parameters, with those given replaced
      const synk::ir::Optimizer& declared = ir.optimizers.at(size_t(ir.find_train_step("train")->optimizer));
      std::vector<std::pair<std::string, double>> merged = declared.hyper_parameters;
      for (const auto& [key, value] : choice.hyper_parameters) {
        auto same = std::find_if(merged.begin(), merged.end(), [&](const auto& kv) { return kv.first == key; });
        if (same != merged.end()) same->second = value;
        else merged.emplace_back(key, value);
      }
      choice = {declared.rule, std::move(merged)};
    }
    synk::compiler::set_optimizer(ir, "opt", choice.rule, choice.hyper_parameters);
  }

  Model model;
  model.module = synk::jit::compile(ir);
  model.train = model.module.train_step("train");
  model.train_device = model.module.train_step("train_device");
  model.evaluate = model.module.function("evaluate");
  model.train_images = model.module.shared("train_images").var();
  model.train_labels = model.module.shared("train_labels").var();
  const synk::ir::Module& compiled = model.module.ir();
  const synk::ir::Optimizer& opt = compiled.optimizers.at(size_t(compiled.find_train_step("train")->optimizer));
  for (int64_t p : opt.parameters) model.parameters.push_back(compiled.shareds[size_t(p)].name);
  // What else `train` updates besides the gradient (batch norm's running statistics): saved too.
  for (const synk::ir::Function& fn : compiled.functions)
    if (fn.name == "train")
      for (const synk::ir::Update& u : fn.updates)
        if (u.shared != opt.gradient) model.statistics.push_back(compiled.shareds[size_t(u.shared)].name);
  std::vector<std::string> hyper;
  for (const auto& [key, value] : opt.hyper_parameters) hyper.push_back(fmt::format("{}={}", key, value));
  model.optimizer = fmt::format("{}({})", opt.rule, fmt::join(hyper, ", "));
  return model;
}

}  // namespace fashion_mnist
