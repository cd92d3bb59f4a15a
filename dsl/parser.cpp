// Recursive-descent parser for `.synk` files (grammar in docs/language.md) with clox-style error
// recovery. On a syntax error the parser reports once (naming what it expected and what it found),
// enters panic mode (further errors are swallowed), unwinds to the enclosing statement, parameter
// or declaration, and skips tokens to a synchronization point: just after a `;`, before a `}`, or
// before a keyword that starts a statement or an item at the beginning of a line. Then it reports
// further independent errors. Lexical errors arrive as Error tokens already reported by the lexer:
// they put the parser in panic mode silently, so one typo gives one message.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "dsl/frontend.h"
#include "dsl/lexer.h"
#include "dsl/parser.h"

namespace synk::dsl {
namespace {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;

// An expression with the depth of its tree, so that depth limits cost nothing to check.
struct Parsed {
  ExprPtr expr;
  int depth = 1;
};

bool is_comparison(TokenKind kind) {
  return kind == TokenKind::EqualEqual || kind == TokenKind::BangEqual || kind == TokenKind::Less ||
         kind == TokenKind::LessEqual || kind == TokenKind::Greater || kind == TokenKind::GreaterEqual;
}

bool starts_statement(TokenKind kind) {
  return kind == TokenKind::KwLet || kind == TokenKind::KwOut || kind == TokenKind::KwUpdate ||
         kind == TokenKind::KwMinimize;
}

bool starts_item(TokenKind kind) {
  return kind == TokenKind::KwFn || kind == TokenKind::KwShared || kind == TokenKind::KwOptimizer;
}

bool is_role(TokenKind kind) {
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
    expected(fmt::format("{} {}", token_kind_name(kind), context));
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
  void recover_function_header(ast::FnDecl& fn);

  // ---- declarations and statements
  ast::SharedDecl parse_shared();
  ast::FnDecl parse_function();
  bool parse_parameters(ast::FnDecl& fn);
  void parse_parameter(ast::FnDecl& fn);
  void parse_body(ast::FnDecl& fn);
  ast::Stmt parse_statement();
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
  Parsed parse_call(Token callee);
  Parsed parse_list();
  Parsed make_binary(const Token& op, Parsed left, Parsed right);
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
  bool panic_ = false;
  int nesting_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Recovery

void Parser::synchronize_statement() {
  panic_ = false;
  while (!at(TokenKind::EndOfFile)) {
    if (at(TokenKind::Semicolon)) {
      advance();
      return;
    }
    if (at(TokenKind::RBrace)) return;
    if ((starts_statement(current_.kind) || starts_item(current_.kind)) && at_line_start()) return;
    advance();
  }
}

void Parser::synchronize_item() {
  panic_ = false;
  while (!at(TokenKind::EndOfFile) && !(starts_item(current_.kind) && at_line_start())) advance();
}

// After an error inside one parameter: skips to the `,` or `)` that ends it (brackets nest), so
// that the next parameter is still checked. Returns false when the parameter list itself is
// broken (a `{`, `;`, `}` or a new statement or item came first); panic mode then stays on.
bool Parser::skip_to_parameter_boundary() {
  int depth = 0;
  while (!at(TokenKind::EndOfFile)) {
    TokenKind kind = current_.kind;
    if (depth == 0 && (kind == TokenKind::Comma || kind == TokenKind::RParen)) {
      panic_ = false;
      return true;
    }
    if (kind == TokenKind::LBrace || kind == TokenKind::RBrace || kind == TokenKind::Semicolon ||
        starts_statement(kind) || starts_item(kind)) {
      return false;
    }
    if (kind == TokenKind::LBracket || kind == TokenKind::LParen) ++depth;
    if ((kind == TokenKind::RBracket || kind == TokenKind::RParen) && depth > 0) --depth;
    advance();
  }
  return false;
}

// After an error in `fn name(params) {`: finds the body if there is one and parses it, so that
// errors inside the body are still reported and nothing after the function is skipped.
void Parser::recover_function_header(ast::FnDecl& fn) {
  panic_ = false;
  while (!at(TokenKind::EndOfFile)) {
    if (at(TokenKind::LBrace)) {
      advance();
      parse_body(fn);
      return;
    }
    if (starts_statement(current_.kind)) {  // `{` is missing: the body starts anyway
      parse_body(fn);
      return;
    }
    if (at(TokenKind::RBrace)) {
      advance();
      return;
    }
    if (starts_item(current_.kind) && at_line_start()) return;
    advance();
  }
}

// ---------------------------------------------------------------------------------------------
// Declarations and statements

ast::Program Parser::parse_program() {
  ast::Program program;
  while (!at(TokenKind::EndOfFile)) {
    if (at(TokenKind::KwFn)) {
      program.functions.push_back(parse_function());
    } else if (at(TokenKind::KwShared)) {
      program.shareds.push_back(parse_shared());
    } else if (at(TokenKind::KwOptimizer)) {
      program.optimizers.push_back(parse_optimizer());
    } else if (starts_statement(current_.kind)) {
      syntax_error(current_, fmt::format("expected 'fn', 'shared' or 'optimizer' but found {} (statements "
                                         "belong inside a function body)", describe_token(current_)));
    } else {
      expected("'fn', 'shared' or 'optimizer' at the top level");
    }
    if (panic_) synchronize_item();
  }
  return program;
}

ast::SharedDecl Parser::parse_shared() {
  ast::SharedDecl decl;
  decl.loc = advance().loc;
  if (!expect_name(decl.name, decl.name_loc, "a shared variable name", "after 'shared'")) return decl;
  if (!expect(TokenKind::Colon, fmt::format("and a type after shared variable '{}'", decl.name))) return decl;
  decl.type = parse_type(decl.name);
  if (panic_) return decl;
  if (match(TokenKind::Assign)) {
    SourceLoc init_loc = current_.loc;
    Parsed init = parse_expression();
    if (panic_) return decl;
    ExprKind kind = init.expr->kind;
    if (kind != ExprKind::Name && kind != ExprKind::IntLiteral && kind != ExprKind::FloatLiteral &&
        kind != ExprKind::Call) {
      report(init_loc, fmt::format("the initializer of shared variable '{}' must be zeros, ones, a "
                                   "number, or a call such as normal(seed=1)", decl.name));
    }
    decl.init = std::move(init.expr);
  }
  if (match(TokenKind::KwSliceable)) decl.sliceable = true;
  expect(TokenKind::Semicolon, fmt::format("after the declaration of shared variable '{}'", decl.name));
  return decl;
}

ast::FnDecl Parser::parse_function() {
  ast::FnDecl fn;
  fn.loc = advance().loc;
  bool header_ok = expect_name(fn.name, fn.name_loc, "a function name", "after 'fn'") &&
                   expect(TokenKind::LParen, fmt::format("after function name '{}'", fn.name)) &&
                   parse_parameters(fn) &&
                   expect(TokenKind::LBrace, fmt::format("to start the body of function '{}'", fn.name));
  if (!header_ok) {
    recover_function_header(fn);
    return fn;
  }
  parse_body(fn);
  return fn;
}

// Parses `param, param, ...)` (the `(` is consumed). Errors inside one parameter are reported and
// the next parameter is still checked.
bool Parser::parse_parameters(ast::FnDecl& fn) {
  if (match(TokenKind::RParen)) return true;
  while (true) {
    parse_parameter(fn);
    if (panic_ && !skip_to_parameter_boundary()) return false;
    if (match(TokenKind::Comma)) continue;
    if (match(TokenKind::RParen)) return true;
    expected(fmt::format("',' or ')' in the parameter list of function '{}'", fn.name));
    return false;
  }
}

void Parser::parse_parameter(ast::FnDecl& fn) {
  ast::ParamDecl param;
  param.loc = current_.loc;
  if (!is_role(current_.kind)) {
    expected("a parameter role (scatter, bcast or minibatch)");
    return;
  }
  param.role_loc = current_.loc;
  param.role = std::string(advance().spelling);
  if (!expect_name(param.name, param.name_loc, "a parameter name", fmt::format("after '{}'", param.role))) return;
  if (!expect(TokenKind::Colon, fmt::format("and a type after parameter '{}'", param.name))) return;
  param.type = parse_type(param.name);
  if (panic_) return;
  fn.params.push_back(std::move(param));
}

void Parser::parse_body(ast::FnDecl& fn) {
  while (!at(TokenKind::RBrace) && !at(TokenKind::EndOfFile) &&
         !(starts_item(current_.kind) && at_line_start())) {
    if (starts_statement(current_.kind)) {
      fn.body.push_back(parse_statement());
    } else {
      expected("a statement (let, out, update or minimize)");
    }
    if (panic_) synchronize_statement();
  }
  expect(TokenKind::RBrace, fmt::format("to close the body of function '{}'", fn.name));
}

// optimizer NAME = RULE(keyword=value, ...);
ast::OptimizerDecl Parser::parse_optimizer() {
  ast::OptimizerDecl decl;
  decl.loc = advance().loc;
  if (!expect_name(decl.name, decl.name_loc, "an optimizer name", "after 'optimizer'")) return decl;
  if (!expect(TokenKind::Assign, fmt::format("and an update rule after optimizer '{}'", decl.name))) return decl;
  if (!at(TokenKind::Identifier) || peek_next().kind != TokenKind::LParen) {
    expected(fmt::format("an update rule such as momentum(lr=0.05) for optimizer '{}'", decl.name));
    return decl;
  }
  decl.rule_loc = current_.loc;
  Parsed rule = parse_expression();
  if (panic_) return decl;
  if (rule.expr->kind != ExprKind::Call) {
    report(decl.rule_loc, fmt::format("optimizer '{}' must be one update rule call such as momentum(lr=0.05)",
                                      decl.name));
  } else {
    decl.rule = rule.expr->text;
    decl.hyper_parameters = std::move(rule.expr->kwargs);
    decl.positional = std::move(rule.expr->args);
  }
  expect(TokenKind::Semicolon, fmt::format("after the declaration of optimizer '{}'", decl.name));
  return decl;
}

// `using NAME` after an update's value or a minimize's variables; false after a syntax error.
bool Parser::parse_using(ast::Stmt& stmt) {
  advance();  // using
  return expect_name(stmt.optimizer, stmt.optimizer_loc, "an optimizer name", "after 'using'");
}

// minimize EXPR over NAME, NAME ... using NAME;   (the keyword is consumed)
void Parser::parse_minimize(ast::Stmt& stmt) {
  stmt.value = parse_expression().expr;
  if (panic_) return;
  if (!at_word("over")) {
    expected("'over' and the variables to train after the loss of 'minimize'");
    return;
  }
  advance();
  do {
    ast::NameRef name;
    if (!stmt.over.empty() && at_word("using")) {   // `over w, using opt`
      expected("a shared variable name after ',' in the variables of 'minimize'");
      return;
    }
    if (!expect_name(name.name, name.loc, "a shared variable name", "in the variables of 'minimize'")) return;
    stmt.over.push_back(std::move(name));
  } while (match(TokenKind::Comma));
  if (!at_word("using")) {
    expected("',' or 'using' and an optimizer after the variables of 'minimize'");
    return;
  }
  if (!parse_using(stmt)) return;
  expect(TokenKind::Semicolon, "after the optimizer of 'minimize'");
}

ast::Stmt Parser::parse_statement() {
  ast::Stmt stmt;
  Token keyword = advance();
  stmt.loc = keyword.loc;
  if (keyword.kind == TokenKind::KwMinimize) {
    stmt.kind = ast::StmtKind::Minimize;
    parse_minimize(stmt);
    return stmt;
  }
  stmt.kind = keyword.kind == TokenKind::KwLet ? ast::StmtKind::Let
              : keyword.kind == TokenKind::KwOut ? ast::StmtKind::Out
                                                 : ast::StmtKind::Update;
  std::string what = keyword.kind == TokenKind::KwUpdate ? "the name of a shared variable"
                     : keyword.kind == TokenKind::KwOut  ? "an output name"
                                                         : "a variable name";
  if (!expect_name(stmt.name, stmt.name_loc, what, fmt::format("after '{}'", keyword.spelling))) return stmt;
  if (match(TokenKind::Colon)) {
    if (stmt.kind == ast::StmtKind::Let) {
      stmt.type = parse_type(stmt.name);
      if (panic_) return stmt;
    } else if (at(TokenKind::Identifier)) {
      stmt.mode_loc = current_.loc;
      stmt.mode = std::string(advance().spelling);
    } else {
      expected(fmt::format("a mode (avg, sum, prod, max, min, gather or none) after '{}:'", stmt.name));
      return stmt;
    }
  }
  if (!expect(TokenKind::Assign, fmt::format("to give '{}' a value", stmt.name))) return stmt;
  stmt.value = parse_expression().expr;
  if (panic_) return stmt;
  if (stmt.kind == ast::StmtKind::Update && at_word("using") && !parse_using(stmt)) return stmt;
  expect(TokenKind::Semicolon, "after expression");
  return stmt;
}

// DTYPE ('[' (dim (',' dim)*)? ']')? ; `owner` names what is being typed, for messages.
ast::TypeExpr Parser::parse_type(std::string_view owner) {
  ast::TypeExpr type;
  type.loc = current_.loc;
  if (!at(TokenKind::Identifier)) {
    expected(fmt::format("a type such as f32[n, 10] for '{}'", owner));
    return type;
  }
  type.dtype = std::string(advance().spelling);
  if (!match(TokenKind::LBracket)) return type;
  if (match(TokenKind::RBracket)) return type;
  while (true) {
    ast::DimExpr dim;
    dim.loc = current_.loc;
    if (at(TokenKind::IntLiteral)) {
      dim.size = advance().int_value;
    } else if (at(TokenKind::Identifier)) {
      dim.symbol = std::string(advance().spelling);
    } else {
      expected(fmt::format("a dimension (an integer or a name) in the shape of '{}'", owner));
      return type;
    }
    type.dims.push_back(std::move(dim));
    if (match(TokenKind::Comma)) continue;
    if (match(TokenKind::RBracket)) return type;
    expected(fmt::format("',' or ']' in the shape of '{}'", owner));
    return type;
  }
}

// ---------------------------------------------------------------------------------------------
// Expressions

Parsed Parser::make_binary(const Token& op, Parsed left, Parsed right) {
  auto expr = std::make_unique<Expr>();
  expr->kind = ExprKind::Binary;
  expr->text = std::string(op.spelling);
  expr->loc = op.loc;
  int depth = 1 + std::max(left.depth, right.depth);
  expr->args.push_back(std::move(left.expr));
  expr->args.push_back(std::move(right.expr));
  return checked({std::move(expr), depth}, op);
}

// Long operator chains (`a + a + ... + a`) build deep trees without deep recursion in the parser;
// every node's depth is checked so that later recursive walks stay bounded.
Parsed Parser::checked(Parsed parsed, const Token& at_token) {
  if (parsed.depth > kMaxExpressionDepth) {
    syntax_error(at_token, fmt::format("expression is nested too deeply (the limit is {} levels)",
                                       kMaxExpressionDepth));
  }
  return parsed;
}

Parsed Parser::parse_expression() {
  SourceLoc loc = current_.loc;
  if (!enter_nesting()) return error_expr(loc);
  Parsed result = parse_or();
  --nesting_;
  return result;
}

Parsed Parser::parse_or() {
  Parsed left = parse_and();
  while (!panic_ && at(TokenKind::PipePipe)) {
    Token op = advance();
    Parsed right = parse_and();
    left = make_binary(op, std::move(left), std::move(right));
  }
  return left;
}

Parsed Parser::parse_and() {
  Parsed left = parse_comparison();
  while (!panic_ && at(TokenKind::AmpAmp)) {
    Token op = advance();
    Parsed right = parse_comparison();
    left = make_binary(op, std::move(left), std::move(right));
  }
  return left;
}

// Comparisons do not associate: `a < b < c` is an error rather than a surprise.
Parsed Parser::parse_comparison() {
  Parsed left = parse_additive();
  if (panic_ || !is_comparison(current_.kind)) return left;
  Token op = advance();
  Parsed right = parse_additive();
  left = make_binary(op, std::move(left), std::move(right));
  if (!panic_ && is_comparison(current_.kind)) {
    syntax_error(current_, fmt::format("comparisons cannot be chained: '{}' follows '{}'; use "
                                       "parentheses or '&&'", current_.spelling, op.spelling));
  }
  return left;
}

Parsed Parser::parse_additive() {
  Parsed left = parse_multiplicative();
  while (!panic_ && (at(TokenKind::Plus) || at(TokenKind::Minus))) {
    Token op = advance();
    Parsed right = parse_multiplicative();
    left = make_binary(op, std::move(left), std::move(right));
  }
  return left;
}

Parsed Parser::parse_multiplicative() {
  Parsed left = parse_unary();
  while (!panic_ && (at(TokenKind::Star) || at(TokenKind::Slash) || at(TokenKind::At))) {
    Token op = advance();
    Parsed right = parse_unary();
    left = make_binary(op, std::move(left), std::move(right));
  }
  return left;
}

Parsed Parser::parse_unary() {
  if (!at(TokenKind::Minus) && !at(TokenKind::Bang)) return parse_power();
  Token op = advance();
  if (!enter_nesting()) return error_expr(op.loc);
  Parsed operand = parse_unary();
  --nesting_;
  ExprKind kind = operand.expr->kind;
  if (op.kind == TokenKind::Minus && (kind == ExprKind::IntLiteral || kind == ExprKind::FloatLiteral)) {
    // `-1` is one literal (axes, shapes and initializers are read from literals).
    operand.expr->int_value = -operand.expr->int_value;
    operand.expr->float_value = -operand.expr->float_value;
    operand.expr->loc = op.loc;
    return operand;
  }
  auto expr = std::make_unique<Expr>();
  expr->kind = ExprKind::Unary;
  expr->text = std::string(op.spelling);
  expr->loc = op.loc;
  int depth = operand.depth + 1;
  expr->args.push_back(std::move(operand.expr));
  return checked({std::move(expr), depth}, op);
}

// postfix ('**' unary)? : right-associative, and binds tighter than a leading minus.
Parsed Parser::parse_power() {
  Parsed base = parse_primary();
  if (!panic_ && at(TokenKind::LBracket)) {
    syntax_error(current_, "indexing with '[...]' is not supported; use take(x, idx) or "
                           "slice(x, start, stop, axis=0)");
  }
  if (panic_ || !at(TokenKind::StarStar)) return base;
  Token op = advance();
  if (!enter_nesting()) return base;
  Parsed exponent = parse_unary();
  --nesting_;
  return make_binary(op, std::move(base), std::move(exponent));
}

Parsed Parser::parse_primary() {
  switch (current_.kind) {
    case TokenKind::IntLiteral: {
      Parsed result = leaf(ExprKind::IntLiteral, current_);
      result.expr->int_value = current_.int_value;
      advance();
      return result;
    }
    case TokenKind::FloatLiteral: {
      Parsed result = leaf(ExprKind::FloatLiteral, current_);
      result.expr->float_value = current_.float_value;
      advance();
      return result;
    }
    case TokenKind::KwTrue:
    case TokenKind::KwFalse: {
      Parsed result = leaf(ExprKind::BoolLiteral, current_);
      result.expr->int_value = at(TokenKind::KwTrue) ? 1 : 0;
      advance();
      return result;
    }
    case TokenKind::StringLiteral: {
      Parsed result = leaf(ExprKind::StringLiteral, current_);
      result.expr->text = current_.string_value;
      advance();
      return result;
    }
    case TokenKind::Identifier: {
      Token name = advance();
      if (at(TokenKind::LParen)) return parse_call(std::move(name));
      Parsed result = leaf(ExprKind::Name, name);
      result.expr->text = std::string(name.spelling);
      return result;
    }
    case TokenKind::LParen: {
      advance();
      Parsed inner = parse_expression();
      if (!panic_) expect(TokenKind::RParen, "to close '('");
      return inner;
    }
    case TokenKind::LBracket: return parse_list();
    default: {
      SourceLoc loc = current_.loc;
      expected("an expression");
      return error_expr(loc);
    }
  }
}

// IDENT '(' args? ')' with keyword arguments after positional ones.
Parsed Parser::parse_call(Token callee) {
  auto call = std::make_unique<Expr>();
  call->kind = ExprKind::Call;
  call->text = std::string(callee.spelling);
  call->loc = callee.loc;
  int depth = 1;
  advance();  // (
  if (!at(TokenKind::RParen)) {
    do {
      if (at(TokenKind::Identifier) && peek_next().kind == TokenKind::Assign) {
        ast::KwArg kwarg;
        kwarg.loc = current_.loc;
        kwarg.name = std::string(advance().spelling);
        advance();  // =
        Parsed value = parse_expression();
        depth = std::max(depth, value.depth + 1);
        kwarg.value = std::move(value.expr);
        bool duplicate = std::any_of(call->kwargs.begin(), call->kwargs.end(),
                                     [&](const ast::KwArg& k) { return k.name == kwarg.name; });
        if (duplicate && !panic_) {
          report(kwarg.loc, fmt::format("keyword argument '{}' is given twice in the call to '{}'",
                                        kwarg.name, call->text));
        }
        call->kwargs.push_back(std::move(kwarg));
      } else {
        SourceLoc arg_loc = current_.loc;
        Parsed value = parse_expression();
        if (!panic_ && !call->kwargs.empty()) {
          report(arg_loc, fmt::format("positional argument after keyword argument '{}' in the call "
                                      "to '{}'", call->kwargs.back().name, call->text));
        }
        depth = std::max(depth, value.depth + 1);
        call->args.push_back(std::move(value.expr));
      }
      if (panic_) return {std::move(call), depth};
    } while (match(TokenKind::Comma));
  }
  expect(TokenKind::RParen, fmt::format("to close the call to '{}'", call->text));
  return checked({std::move(call), depth}, callee);
}

Parsed Parser::parse_list() {
  auto list = std::make_unique<Expr>();
  list->kind = ExprKind::List;
  Token open = advance();
  list->loc = open.loc;
  int depth = 1;
  if (!at(TokenKind::RBracket)) {
    do {
      Parsed element = parse_expression();
      depth = std::max(depth, element.depth + 1);
      list->args.push_back(std::move(element.expr));
      if (panic_) return {std::move(list), depth};
    } while (match(TokenKind::Comma));
  }
  if (!match(TokenKind::RBracket)) expected("',' or ']' in the list");
  return checked({std::move(list), depth}, open);
}

}  // namespace

ast::Program parse_program(const SourceFile& file, DiagnosticEngine& diags) {
  // A NUL byte never occurs in text: this is a binary or data file given by mistake. One message
  // says so, instead of an "unexpected character" error for every stray byte.
  if (size_t nul = file.text().find('\0'); nul != std::string::npos) {
    diags.error(SourceLoc{}, fmt::format("not a text file (a NUL byte at offset {}); .synk programs are UTF-8 text",
                                         nul));
    return {};
  }
  Parser parser(file, diags);
  return parser.parse_program();
}

}  // namespace synk::dsl
