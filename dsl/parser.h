// Internal helpers of the front end shared by the parser, frontend.cpp, synkc and the fuzzer. The
// public entry points (parse_program, print_ast, compile_source) are declared in dsl/frontend.h.
//
// Parser conventions that later stages can rely on (see also the note at the end of dsl/ast.h):
// - every node's location is that of its first token, except Binary nodes, which carry the
//   location of their operator (so that `x @ y` mismatches point at the `@`);
// - a minus sign applied directly to a number literal is folded into the literal (`-1` is an
//   IntLiteral with value -1 located at the `-`); `-x` and `-2 ** 2` stay Unary nodes;
// - expressions nest at most kMaxExpressionDepth levels (deeper input is a syntax error), so
//   every recursive walk over an AST from parse_program is bounded.
#pragma once

#include <string>

#include "base/diagnostics.h"

namespace synk::dsl {

inline constexpr int kMaxExpressionDepth = 256;

}  // namespace synk::dsl
