// The expressions of the recursive-descent parser (grammar in docs/language.md): one function per
// precedence level, lowest first, with depth limits that keep every later walk over the tree
// bounded. The class and its conventions are in parser_internal.h.
#include "dsl/parser_internal.h"

namespace synk::dsl::parser_detail {

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

Parsed Parser::parse_left_associative(Parsed (Parser::*next_level)(), std::initializer_list<TokenKind> operators) {
  Parsed left = (this->*next_level)();
  auto at_operator = [&] {
    return std::find(operators.begin(), operators.end(), current_.kind) != operators.end();
  };
  while (!panic_ && at_operator()) {
    Token op = advance();
    Parsed right = (this->*next_level)();
    left = make_binary(op, std::move(left), std::move(right));
  }
  return left;
}

Parsed Parser::parse_expression() {
  SourceLoc loc = current_.loc;
  if (!enter_nesting()) return error_expr(loc);
  Parsed result = parse_or();
  --nesting_;
  return result;
}

Parsed Parser::parse_or() {
  return parse_left_associative(&Parser::parse_and, {TokenKind::PipePipe});
}

Parsed Parser::parse_and() {
  return parse_left_associative(&Parser::parse_comparison, {TokenKind::AmpAmp});
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
  return parse_left_associative(&Parser::parse_multiplicative, {TokenKind::Plus, TokenKind::Minus});
}

Parsed Parser::parse_multiplicative() {
  return parse_left_associative(&Parser::parse_unary,
                                {TokenKind::Star, TokenKind::Slash, TokenKind::Percent, TokenKind::At});
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

// The current token, a literal of `kind`, with its value; the token is consumed.
Parsed Parser::parse_literal(ExprKind kind) {
  Parsed result = leaf(kind, current_);
  Expr& literal = *result.expr;
  switch (kind) {
    case ExprKind::IntLiteral: literal.int_value = current_.int_value; break;
    case ExprKind::FloatLiteral: literal.float_value = current_.float_value; break;
    case ExprKind::BoolLiteral: literal.int_value = at(TokenKind::KwTrue) ? 1 : 0; break;
    default: literal.text = current_.string_value; break;   // StringLiteral
  }
  advance();
  return result;
}

Parsed Parser::parse_primary() {
  switch (current_.kind) {
    case TokenKind::IntLiteral: return parse_literal(ExprKind::IntLiteral);
    case TokenKind::FloatLiteral: return parse_literal(ExprKind::FloatLiteral);
    case TokenKind::KwTrue:
    case TokenKind::KwFalse: return parse_literal(ExprKind::BoolLiteral);
    case TokenKind::StringLiteral: return parse_literal(ExprKind::StringLiteral);
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


}  // namespace synk::dsl::parser_detail
