// The front end's entry points, one per stage, so that synkc and tests can stop after any stage.
// parse_program: text -> AST (lexer.cpp, parser.cpp); analyze: AST -> typed Graph IR (sema.cpp);
// print_ast / print_module: back to text (ast_printer.cpp, ir_printer.cpp); compile_source runs
// the whole front end and returns the IR only when there were no errors.
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

// Resolves names, checks and infers dtypes and shapes, builds the IR. base_dir resolves relative
// `load("...")` paths. Returns nullopt when any error was reported.
std::optional<ir::Module> analyze(const ast::Program& program, DiagnosticEngine& diags,
                                  const std::string& base_dir);

// `synkc --emit=ast`: an indented tree, one node per line, with line:col.
std::string print_ast(const ast::Program& program);

// `synkc --emit=ir`: the module as valid .synk text, one typed `let` per node.
std::string print_module(const ir::Module& module);

// Convenience: parse + analyze. Throws UserError with every diagnostic formatted when the
// program has errors.
ir::Module compile_source(const std::string& path, const std::string& text);

}  // namespace synk::dsl
