// The front end: text -> AST (parse_program: lexer.cpp, parser.cpp) -> typed Graph IR (analyze:
// sema.cpp), and back to text (print_ast, print_module). FrontEnd is the one place that runs the
// stages in order over one file; every user of the language (the JIT, synkc, the AOT generator and
// loader, through compiler/pipeline.h's prepare_module) goes through it.
#pragma once

#include <optional>
#include <string>

#include "dsl/ast.h"
#include "base/diagnostics.h"
#include "ir/ir.h"

namespace synk::dsl {

// Parses a whole file. Always returns a Program (possibly partial); syntax errors go to diags,
// several per run (at most DiagnosticEngine::kErrorLimit), without cascades. A file with a NUL
// byte is not text: one error without a location says so, and the Program is empty.
ast::Program parse_program(const SourceFile& file, DiagnosticEngine& diags);

// Whether `load("...")` files are opened and checked (dtype, shape) by the front end. A worker
// rank that reads a module's text again, after the master compiled it, trusts them: its values
// come from the master, and the file may have changed or gone since.
enum class LoadFiles { Checked, Trusted };

// Resolves names, checks and infers dtypes and shapes, builds the IR. base_dir resolves relative
// `load("...")` paths. Returns nullopt when any error was reported.
std::optional<ir::Module> analyze(const ast::Program& program, DiagnosticEngine& diags,
                                  const std::string& base_dir, LoadFiles load_files = LoadFiles::Checked);

// `synkc --emit=ast`: an indented tree, one node per line, with line:col.
std::string print_ast(const ast::Program& program);

// `synkc --emit=ir`: the module as valid .synk text, one typed `let` per node.
std::string print_module(const ir::Module& module);

// A float as .synk writes it: the shortest text that parses back to the same double, with a
// point or exponent so that it never reads as an integer (1.0, not 1), or inf, -inf, nan.
std::string float_text(double value);

// One run of the front end over one file, stage by stage. Stops at the first stage with errors
// (syntax errors stop before semantic analysis, whose messages on a partial tree would only be
// follow-on errors).
class FrontEnd {
 public:
  // base_dir resolves relative load("...") paths ("" is ".").
  FrontEnd(std::string source_name, std::string text, std::string base_dir,
           LoadFiles load_files = LoadFiles::Checked);
  FrontEnd(const FrontEnd&) = delete;
  FrontEnd& operator=(const FrontEnd&) = delete;

  bool parse();     // false when there were syntax errors
  bool analyze();   // after parse(); false when there were errors
  // Every diagnostic so far (warnings too), formatted in source order, if any was reported since
  // the last call; else "". (Only parse() warnings can come before analyze()'s, and the parser
  // reports none, so a driver printing this after each stage prints each diagnostic once.)
  std::string diagnostics_if_new();
  // Every diagnostic so far, formatted in source order.
  std::string all_diagnostics() const;
  // The UserError of a failed parse() or analyze(): every diagnostic, and the first error's place.
  UserError errors() const;

  const SourceFile& file() const { return file_; }
  const ast::Program& program() const { return program_; }
  const ir::Module& module() const { return *module_; }   // after a successful analyze()
  ir::Module take_module() { return std::move(*module_); }

 private:
  SourceFile file_;
  DiagnosticEngine diags_;
  std::string base_dir_;
  LoadFiles load_files_;
  ast::Program program_;
  std::optional<ir::Module> module_;
  size_t reported_ = 0;
};

// Parse + analyze (base_dir: the file's directory). Throws UserError with every diagnostic
// formatted when the program has errors. Training steps are not expanded: for a module that
// runs, use compiler/pipeline.h's prepare_module.
ir::Module compile_source(const std::string& path, const std::string& text);

}  // namespace synk::dsl
