// Module preparation and the stage list (see pipeline.h).
#include "compiler/pipeline.h"

#include "base/errors.h"
#include "compiler/emit.h"
#include "compiler/grad/train.h"
#include "dsl/frontend.h"

namespace synk::compiler {

ir::Module prepare_module(const std::string& source_name, const std::string& text, const std::string& base_dir,
                          std::string* warnings, dsl::LoadFiles load_files) {
  dsl::FrontEnd front_end(source_name, text, base_dir, load_files);
  if (!front_end.parse() || !front_end.analyze()) throw front_end.errors();
  if (warnings) *warnings = front_end.all_diagnostics();
  ir::Module module = front_end.take_module();
  prepare_module(module);
  return module;
}

void prepare_module(ir::Module& module) { expand_training_steps(module); }

const std::vector<std::string>& pipeline_stages() {
  static const std::vector<std::string> stages = [] {
    std::vector<std::string> all = {"ast", "ir", "stub", "header"};
    for (const std::string& stage : emit_stages()) all.push_back(stage);
    return all;
  }();
  return stages;
}

}  // namespace synk::compiler
