// compile_source: the whole front end in one call (parse, then analyze), for the C++ API and
// tests. Syntax errors stop before semantic analysis: a partial AST would only produce follow-on
// errors. Every diagnostic, in source order, ends up in the UserError's message.
#include <filesystem>

#include "dsl/frontend.h"
#include "dsl/parser.h"

namespace synk::dsl {

ir::Module compile_source(const std::string& path, const std::string& text) {
  SourceFile file(path, text);
  DiagnosticEngine diags(file);
  ast::Program program = parse_program(file, diags);
  if (diags.has_errors()) throw UserError(format_diagnostics_in_source_order(diags));
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  std::optional<ir::Module> module = analyze(program, diags, base_dir.empty() ? "." : base_dir);
  if (!module || diags.has_errors()) {
    if (!diags.has_errors()) internal_error("analyze failed without reporting an error for " + path);
    throw UserError(format_diagnostics_in_source_order(diags));
  }
  return std::move(*module);
}

}  // namespace synk::dsl
