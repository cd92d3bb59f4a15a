// FrontEnd and compile_source (see frontend.h): the one driver of the front end's stages.
#include "dsl/frontend.h"

#include <filesystem>

#include "dsl/parser.h"

namespace synk::dsl {

FrontEnd::FrontEnd(std::string source_name, std::string text, std::string base_dir, LoadFiles load_files)
    : file_(std::move(source_name), std::move(text)),
      diags_(file_),
      base_dir_(base_dir.empty() ? "." : base_dir),
      load_files_(load_files) {}

bool FrontEnd::parse() {
  program_ = parse_program(file_, diags_);
  return !diags_.has_errors();
}

bool FrontEnd::analyze() {
  module_ = dsl::analyze(program_, diags_, base_dir_, load_files_);
  if (!module_ && !diags_.has_errors()) internal_error("analyze failed without reporting an error for " + file_.path());
  return !diags_.has_errors() && module_.has_value();
}

std::string FrontEnd::diagnostics_if_new() {
  if (diags_.diagnostics().size() <= reported_) return {};
  reported_ = diags_.diagnostics().size();
  return format_diagnostics_in_source_order(diags_);
}

std::string FrontEnd::all_diagnostics() const { return format_diagnostics_in_source_order(diags_); }

UserError FrontEnd::errors() const {
  const Diagnostic* first = nullptr;
  for (const Diagnostic& d : diags_.diagnostics()) {
    if (d.severity != Severity::Error || !d.loc.valid()) continue;
    if (!first || std::pair(d.loc.line, d.loc.col) < std::pair(first->loc.line, first->loc.col)) first = &d;
  }
  return first ? UserError(all_diagnostics(), first->loc, first->message) : UserError(all_diagnostics());
}

ir::Module compile_source(const std::string& path, const std::string& text) {
  FrontEnd front_end(path, text, std::filesystem::path(path).parent_path().string());
  if (!front_end.parse() || !front_end.analyze()) throw front_end.errors();
  return front_end.take_module();
}

}  // namespace synk::dsl
