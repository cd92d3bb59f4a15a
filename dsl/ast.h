// The abstract syntax tree of a `.synk` file, exactly as written: names are unresolved, nothing
// is typed. Every node carries the source location of its first token. Semantic analysis turns
// it into the Graph IR (ir.h), inlining every call of a helper (`def`) on the way, so the IR has
// no trace of them; `synkc --emit=ast` prints it (ast_printer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"

namespace synk::ast {

using synk::SourceLoc;

// `n`, `10`, or `-1` (only meaningful inside reshape shapes, which are expressions).
struct DimExpr {
  std::optional<int64_t> size;  // set for an integer literal
  std::string symbol;           // set for an identifier
  SourceLoc loc;
};

// `f32[n, 10]`; `f32[]` or plain `f32` is a scalar.
struct TypeExpr {
  std::string dtype;            // as written; validated by sema (unknown / reserved dtypes)
  std::vector<DimExpr> dims;
  SourceLoc loc;
};

enum class ExprKind : uint8_t {
  IntLiteral,    // int_value
  FloatLiteral,  // float_value
  BoolLiteral,   // int_value 0/1
  StringLiteral, // text (only valid as load("...") argument)
  Name,          // text
  Unary,         // text: "-" or "!" ; args[0]
  Binary,        // text: "+ - * / ** @ == != < <= > >= && ||"; args[0], args[1]
  Call,          // text: callee; args: positional; kwargs: keyword arguments
  List,          // `[a, b, c]`; args
  Error,         // placeholder after a syntax error; sema ignores it silently
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct KwArg {
  std::string name;
  ExprPtr value;
  SourceLoc loc;
};

struct Expr {
  ExprKind kind = ExprKind::Error;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<ExprPtr> args;
  std::vector<KwArg> kwargs;
  SourceLoc loc;
};

enum class StmtKind : uint8_t {
  Let,     // let NAME [: TYPE] = EXPR;
  Out,     // out NAME [: MODE] = EXPR;
  Update,  // update NAME [: MODE] = EXPR [using OPTIMIZER];
  Minimize,  // minimize EXPR over NAME, ... using OPTIMIZER;  (name: empty)
  Return,  // return EXPR, ...;   (helpers only; values)
};

// A name as written, with its location (the variables after `over`).
struct NameRef {
  std::string name;
  SourceLoc loc;
};

struct Stmt {
  StmtKind kind = StmtKind::Let;
  std::string name;
  SourceLoc name_loc;
  std::vector<NameRef> more_names;  // Let of several names, `let h, c = f(x);`: those after `name`
  std::optional<TypeExpr> type;   // Let only (optional annotation, checked by sema)
  std::string mode;               // Out/Update: as written; empty = default
  SourceLoc mode_loc;
  ExprPtr value;                  // Minimize: the loss
  std::vector<NameRef> over;      // Minimize: the parameters, in the order of the flat gradient
  std::string optimizer;          // Minimize, and Update with `using`: the optimizer's name
  SourceLoc optimizer_loc;
  std::vector<ExprPtr> values;    // Return: the values, in order
  SourceLoc loc;
};

struct ParamDecl {
  std::string role;               // "scatter", "bcast", "minibatch" (as written)
  SourceLoc role_loc;
  std::string name;
  SourceLoc name_loc;
  TypeExpr type;
  SourceLoc loc;
};

// What a function and a helper both are: a name, parameters of their own kind, and a body.
template <class Param>
struct CallableDecl {
  std::string name;
  SourceLoc name_loc;
  std::vector<Param> params;
  std::vector<Stmt> body;
  SourceLoc loc;
};

struct FnDecl : CallableDecl<ParamDecl> {};

// A helper's parameter: `x`, or `x: f32[n, k]` (symbols of the type are bound per call).
struct HelperParam {
  std::string name;
  SourceLoc name_loc;
  std::optional<TypeExpr> type;
};

// def NAME(PARAM, ...) { let ...; return EXPR, ...; }   (inlined at every call; never exported)
// The parser guarantees a body of `let`s ending in exactly one `return`.
struct HelperDecl : CallableDecl<HelperParam> {};

// shared NAME : TYPE [= INIT] [sliceable];
struct SharedDecl {
  std::string name;
  SourceLoc name_loc;
  TypeExpr type;
  ExprPtr init;                   // null: zeros. A Name (zeros, ones), a number, or a Call
  bool sliceable = false;
  SourceLoc loc;
};

// optimizer NAME = RULE(keyword=number, ...);   (a training step's update rule)
struct OptimizerDecl {
  std::string name;
  SourceLoc name_loc;
  std::string rule;               // as written; validated by sema
  SourceLoc rule_loc;
  std::vector<KwArg> hyper_parameters;
  std::vector<ExprPtr> positional;  // not allowed (sema reports them); kept for the message
  SourceLoc loc;
};

struct Program {
  std::vector<SharedDecl> shareds;   // in source order
  std::vector<FnDecl> functions;     // in source order
  std::vector<OptimizerDecl> optimizers;   // in source order
  std::vector<HelperDecl> helpers;         // in source order
};

}  // namespace synk::ast

// Conventions of the parser (dsl/parser.cpp) that every consumer of the AST may rely on:
// - Binary nodes are located at their operator (`x @ y` points at the `@`); every other node at
//   its first token (a Call at its callee's name, a List at its `[`).
// - A minus sign applied directly to a number literal is folded into it: `-1` is an IntLiteral
//   with int_value -1 located at the `-`; `-x` and `-2 ** 2` (that is -(2**2)) stay Unary.
// - Expression trees are at most 256 levels deep (kMaxExpressionDepth in dsl/parser.h); deeper
//   input is a syntax error, so recursive walks over a parsed AST need no depth guard of their own.
