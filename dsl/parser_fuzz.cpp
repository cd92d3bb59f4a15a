// libFuzzer target for the whole front end: any byte string goes through the lexer, the parser,
// the AST printer, diagnostic formatting and, when it parses, semantic analysis, the IR verifier
// and the printer round trip (print the IR, parse and analyze the text again, compare). Crashes,
// sanitizer reports, hangs, leaks, uncaught exceptions and broken invariants are all findings.
// Built only with -DSYNK_FUZZ=ON and clang; run it with scripts/fuzz-parser.sh SECONDS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dsl/frontend.h"
#include "dsl/parser.h"

namespace {

// Relative load("...") paths resolve here and are never found, so runs do not depend on files.
constexpr const char* kBaseDir = "/nonexistent-synk-fuzz-dir";

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "synk fuzz finding: %s\n%s\n", what, detail.c_str());
  std::abort();
}

std::optional<synk::ir::Module> front_end(const std::string& text, std::string* diagnostics) {
  synk::SourceFile file("fuzz.synk", text);
  synk::DiagnosticEngine diags(file);
  synk::ast::Program program = synk::dsl::parse_program(file, diags);
  std::string tree = synk::dsl::print_ast(program);
  if (diags.has_errors()) {
    *diagnostics = synk::format_diagnostics_in_source_order(diags);
    return std::nullopt;
  }
  std::optional<synk::ir::Module> module = synk::dsl::analyze(program, diags, kBaseDir);
  *diagnostics = synk::format_diagnostics_in_source_order(diags);
  if (module.has_value() == diags.has_errors()) {
    finding("analyze returned a module together with errors, or nothing without an error", *diagnostics);
  }
  return module;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string diagnostics;
  std::optional<synk::ir::Module> module = front_end(text, &diagnostics);
  if (!module) return 0;

  std::vector<std::string> violations = synk::ir::verify(*module);
  if (!violations.empty()) finding("the verifier rejects the IR of a valid program", violations[0]);

  std::string printed = synk::dsl::print_module(*module);
  std::string reparse_diagnostics;
  std::optional<synk::ir::Module> again = front_end(printed, &reparse_diagnostics);
  if (!again) finding("the printed IR does not compile again", printed + "\n" + reparse_diagnostics);
  std::string difference;
  if (!synk::ir::structurally_equal(*module, *again, &difference)) {
    finding("the printed IR compiles to a different module", printed + "\n" + difference);
  }
  return 0;
}
