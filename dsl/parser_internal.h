// The recursive-descent parser's class, shared by its two source files: parser.cpp (items,
// statements and error recovery) and parser_expr.cpp (expressions, one function per precedence
// level). Internal to dsl/: the entry point is parse_program() in dsl/frontend.h.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dsl/ast.h"
#include "dsl/lexer.h"
#include "dsl/parser.h"

namespace synk::dsl::parser_detail {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;

// An expression with the depth of its tree, so that depth limits cost nothing to check.
struct Parsed {
  ExprPtr expr;
  int depth = 1;
};

inline bool is_comparison(TokenKind kind) {
  return kind == TokenKind::EqualEqual || kind == TokenKind::BangEqual || kind == TokenKind::Less ||
         kind == TokenKind::LessEqual || kind == TokenKind::Greater || kind == TokenKind::GreaterEqual;
}

inline bool starts_statement(TokenKind kind) {
  return kind == TokenKind::KwLet || kind == TokenKind::KwOut || kind == TokenKind::KwUpdate ||
         kind == TokenKind::KwMinimize || kind == TokenKind::KwReturn;
}

inline bool starts_item(TokenKind kind) {
  return kind == TokenKind::KwFn || kind == TokenKind::KwShared || kind == TokenKind::KwOptimizer ||
         kind == TokenKind::KwDef;
}

inline bool is_role(TokenKind kind) {
  return kind == TokenKind::KwScatter || kind == TokenKind::KwBcast || kind == TokenKind::KwMinibatch;
}

class Parser {
 public:
  Parser(const SourceFile& file, DiagnosticEngine& diags) : lexer_(file, diags), diags_(diags) {
    current_ = lexer_.next();
  }

  ast::Program parse_program();

 private:
  // ---- tokens
  bool at(TokenKind kind) const { return current_.kind == kind; }
  const Token& peek_next() {
    if (!next_) next_ = lexer_.next();
    return *next_;
  }
  Token advance() {
    Token consumed = std::move(current_);
    previous_line_ = consumed.loc.line;
    previous_kind_ = consumed.kind;
    previous_end_ = consumed.spelling.data() + consumed.spelling.size();
    previous_end_loc_ = {consumed.loc.line, consumed.loc.col + uint32_t(consumed.spelling.size())};
    if (next_) {
      current_ = std::move(*next_);
      next_.reset();
    } else {
      current_ = lexer_.next();
    }
    return consumed;
  }
  bool match(TokenKind kind) {
    if (!at(kind)) return false;
    advance();
    return true;
  }
  // A keyword that begins a line is taken as the start of a new statement or item when
  // resynchronizing; in the middle of a line it is more likely a misused word (`out z = out;`).
  bool at_line_start() const { return current_.loc.line > previous_line_; }

  // ---- errors
  // Reports a syntax error at `token` and enters panic mode; silent while already panicking and
  // for Error tokens (the lexer has reported those). An end of file that directly follows a
  // lexical error is its consequence (an unterminated comment swallowed the closing `}`).
  void syntax_error(const Token& token, std::string message) {
    if (panic_) return;
    panic_ = true;
    if (token.kind == TokenKind::Error) return;
    if (token.kind == TokenKind::EndOfFile && previous_kind_ == TokenKind::Error) return;
    diags_.error(token.loc, std::move(message));
  }
  // `expected WHAT but found X` at the current token.
  void expected(std::string_view what) {
    syntax_error(current_, fmt::format("expected {} but found {}", what, describe_token(current_)));
  }
  // Consumes a token of `kind` or reports `expected 'K' CONTEXT but found X`.
  bool expect(TokenKind kind, std::string_view context) {
    if (match(kind)) return true;
    std::string what = fmt::format("{} {}", token_kind_name(kind), context);
    if (previous_end_ && lexer_.floor_division_comment_after(previous_end_)) {
      syntax_error(current_, fmt::format("expected {} but found {}: the '//' before it starts a comment in .synk; "
                                         "for floor division write floor_divide(a, b)", what,
                                         describe_token(current_)));
      return false;
    }
    if (kind == TokenKind::Semicolon && at_line_start() && previous_kind_ != TokenKind::Error && !panic_ &&
        current_.kind != TokenKind::Error) {
      // A ';' forgotten at the end of a line: the place to point at is that end, not the next line.
      panic_ = true;
      diags_.error(previous_end_loc_, fmt::format("expected {} at the end of this line (the next line starts with {})",
                                                  what, describe_token(current_)));
      return false;
    }
    expected(what);
    return false;
  }
  // Consumes an identifier into name/loc, or reports `expected WHAT CONTEXT but found X`.
  bool expect_name(std::string& name, SourceLoc& loc, std::string_view what, std::string_view context) {
    if (at(TokenKind::Identifier)) {
      name = std::string(current_.spelling);
      loc = current_.loc;
      advance();
      return true;
    }
    if (is_keyword(current_.kind)) {
      syntax_error(current_, fmt::format("expected {} {} but found '{}', which is a reserved keyword",
                                         what, context, current_.spelling));
    } else {
      expected(fmt::format("{} {}", what, context));
    }
    return false;
  }
  // An error that does not disturb the structure of the parse (no panic, no skipping).
  void report(SourceLoc loc, std::string message) {
    if (!panic_) diags_.error(loc, std::move(message));
  }

  // ---- recovery
  void synchronize_statement();
  void synchronize_item();
  bool skip_to_parameter_boundary();
  // After an error in a header: parses the body if there is one. `helper`: a `def`'s body.
  void recover_header(std::vector<ast::Stmt>& body, const std::string& name, bool helper);

  // ---- declarations and statements
  ast::SharedDecl parse_shared();
  template <class Decl>
  bool parse_header(Decl& decl, std::string_view kind, std::string_view keyword, bool (Parser::*parse_params)(Decl&));
  ast::FnDecl parse_function();
  bool parse_parameters(ast::FnDecl& fn);
  void parse_parameter(ast::FnDecl& fn);
  // The statements up to the closing `}` of a function (helper false) or a helper's body.
  void parse_body(std::vector<ast::Stmt>& body, const std::string& name, bool helper);
  void check_helper_body(const std::vector<ast::Stmt>& body, const std::string& name, SourceLoc name_loc);
  ast::HelperDecl parse_helper();
  bool parse_helper_parameters(ast::HelperDecl& helper);
  ast::Stmt parse_statement();
  bool parse_let_names(ast::Stmt& stmt);
  void parse_return(ast::Stmt& stmt);
  ast::OptimizerDecl parse_optimizer();
  void parse_minimize(ast::Stmt& stmt);
  bool parse_using(ast::Stmt& stmt);
  // True when the current token is the plain name `word` (a contextual keyword: over, using).
  bool at_word(std::string_view word) const { return at(TokenKind::Identifier) && current_.spelling == word; }
  ast::TypeExpr parse_type(std::string_view owner);

  // ---- expressions, one function per precedence level (lowest first)
  Parsed parse_expression();
  Parsed parse_or();
  Parsed parse_and();
  Parsed parse_comparison();
  Parsed parse_additive();
  Parsed parse_multiplicative();
  Parsed parse_unary();
  Parsed parse_power();
  Parsed parse_primary();
  Parsed parse_literal(ExprKind kind);
  Parsed parse_call(Token callee);
  Parsed parse_list();
  Parsed make_binary(const Token& op, Parsed left, Parsed right);
  // One left-associative precedence level: operands from `next_level`, joined by any of `operators`.
  Parsed parse_left_associative(Parsed (Parser::*next_level)(), std::initializer_list<TokenKind> operators);
  Parsed checked(Parsed parsed, const Token& at_token);
  Parsed error_expr(SourceLoc loc) {
    auto expr = std::make_unique<Expr>();
    expr->kind = ExprKind::Error;
    expr->loc = loc;
    return {std::move(expr), 1};
  }
  Parsed leaf(ExprKind kind, const Token& token) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->loc = token.loc;
    return {std::move(expr), 1};
  }
  // Guards recursion so that `((((...` of any length cannot overflow the stack.
  bool enter_nesting() {
    if (nesting_ >= kMaxExpressionDepth) {
      syntax_error(current_, fmt::format("expression is nested too deeply (the limit is {} levels)",
                                         kMaxExpressionDepth));
      return false;
    }
    ++nesting_;
    return true;
  }

  Lexer lexer_;
  DiagnosticEngine& diags_;
  Token current_;
  std::optional<Token> next_;
  uint32_t previous_line_ = 0;
  TokenKind previous_kind_ = TokenKind::EndOfFile;
  const char* previous_end_ = nullptr;   // where the last consumed token ends in the source
  SourceLoc previous_end_loc_;           // the column just after it (a token spans one line)
  bool panic_ = false;
  int nesting_ = 0;
};

}  // namespace synk::dsl::parser_detail
