// Recursive-descent parser for `.synk` files (grammar in docs/language.md) with clox-style error
// recovery. On a syntax error the parser reports once (naming what it expected and what it found),
// enters panic mode (further errors are swallowed), unwinds to the enclosing statement, parameter
// or declaration, and skips tokens to a synchronization point: just after a `;`, before a `}`, or
// before a keyword that starts a statement or an item at the beginning of a line. Then it reports
// further independent errors. Lexical errors arrive as Error tokens already reported by the lexer:
// they put the parser in panic mode silently, so one typo gives one message.
#include "dsl/frontend.h"
#include "dsl/parser_internal.h"

namespace synk::dsl {
namespace parser_detail {

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

// After an error in `fn name(params) {` or `def name(params) {`: finds the body if there is one
// and parses it, so that errors inside the body are still reported and nothing after the function
// is skipped.
void Parser::recover_header(std::vector<ast::Stmt>& body, const std::string& name, bool helper) {
  panic_ = false;
  while (!at(TokenKind::EndOfFile)) {
    if (at(TokenKind::LBrace)) {
      advance();
      parse_body(body, name, helper);
      return;
    }
    if (starts_statement(current_.kind)) {  // `{` is missing: the body starts anyway
      parse_body(body, name, helper);
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
    } else if (at(TokenKind::KwDef)) {
      program.helpers.push_back(parse_helper());
    } else if (at(TokenKind::KwShared)) {
      program.shareds.push_back(parse_shared());
    } else if (at(TokenKind::KwOptimizer)) {
      program.optimizers.push_back(parse_optimizer());
    } else if (starts_statement(current_.kind)) {
      syntax_error(current_, fmt::format("expected 'fn', 'def', 'shared' or 'optimizer' but found {} "
                                         "(statements belong inside a function body)", describe_token(current_)));
    } else {
      expected("'fn', 'def', 'shared' or 'optimizer' at the top level");
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
        kind != ExprKind::BoolLiteral && kind != ExprKind::Call) {
      report(init_loc, fmt::format("the initializer of shared variable '{}' must be zeros, ones, a "
                                   "number, true or false, or a call such as normal(seed=1)", decl.name));
    }
    decl.init = std::move(init.expr);
  }
  if (match(TokenKind::KwSliceable)) decl.sliceable = true;
  expect(TokenKind::Semicolon, fmt::format("after the declaration of shared variable '{}'", decl.name));
  return decl;
}

// KEYWORD NAME '(' PARAMS ')' '{' of a function ("fn") or a helper ("def"), whose messages call
// the declaration a `kind`. False where the header is broken (the body is then recovered, not read).
template <class Decl>
bool Parser::parse_header(Decl& decl, std::string_view kind, std::string_view keyword,
                          bool (Parser::*parse_params)(Decl&)) {
  decl.loc = advance().loc;
  if (!expect_name(decl.name, decl.name_loc, fmt::format("a {} name", kind), fmt::format("after '{}'", keyword)) ||
      !expect(TokenKind::LParen, fmt::format("after {} name '{}'", kind, decl.name)) || !(this->*parse_params)(decl))
    return false;
  if (at(TokenKind::Minus)) {   // "-> type", as in Python annotations or Rust
    syntax_error(current_, fmt::format("expected '{{' to start the body of {} '{}' but found '-': {} declares no "
                                       "result type ('-> ...'); {}", kind, decl.name, kind == "helper" ? "a helper" : "a function",
                                       kind == "helper" ? "its results' types follow from its return expressions"
                                                        : "its results are its 'out' statements, typed by their expressions"));
    return false;
  }
  return expect(TokenKind::LBrace, fmt::format("to start the body of {} '{}'", kind, decl.name));
}

ast::FnDecl Parser::parse_function() {
  ast::FnDecl fn;
  bool header_ok = parse_header(fn, "function", "fn", &Parser::parse_parameters);
  if (!header_ok) {
    recover_header(fn.body, fn.name, false);
    return fn;
  }
  parse_body(fn.body, fn.name, false);
  return fn;
}

// def NAME(x, w: f32[k, m], ...) { let ...; return EXPR, ...; }
ast::HelperDecl Parser::parse_helper() {
  ast::HelperDecl helper;
  bool header_ok = parse_header(helper, "helper", "def", &Parser::parse_helper_parameters);
  size_t errors_before = diags_.error_count();
  if (!header_ok) recover_header(helper.body, helper.name, true);
  else parse_body(helper.body, helper.name, true);
  if (diags_.error_count() == errors_before) check_helper_body(helper.body, helper.name, helper.name_loc);
  return helper;
}

// `param, param, ...)` of a helper (the `(` is consumed): NAME or NAME ':' TYPE, without roles.
bool Parser::parse_helper_parameters(ast::HelperDecl& helper) {
  if (match(TokenKind::RParen)) return true;
  while (true) {
    ast::HelperParam param;
    if (is_role(current_.kind)) {
      syntax_error(current_, fmt::format("a helper's parameters have no role, but helper '{}' has {}; "
                                         "write 'x' or 'x: f32[n, k]' (only a function's parameters are "
                                         "scatter, bcast or minibatch)", helper.name, describe_token(current_)));
    } else if (expect_name(param.name, param.name_loc, "a parameter name",
                           fmt::format("in the parameter list of helper '{}'", helper.name))) {
      if (match(TokenKind::Colon)) param.type = parse_type(param.name);
      if (!panic_) helper.params.push_back(std::move(param));
    }
    if (panic_ && !skip_to_parameter_boundary()) return false;
    if (match(TokenKind::Comma)) continue;
    if (match(TokenKind::RParen)) return true;
    expected(fmt::format("',' or ')' in the parameter list of helper '{}'", helper.name));
    return false;
  }
}

// A helper's body is `let`s followed by one `return` (reported here, once the body parsed).
void Parser::check_helper_body(const std::vector<ast::Stmt>& body, const std::string& name, SourceLoc name_loc) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i].kind != ast::StmtKind::Return) continue;
    if (i + 1 < body.size()) {
      diags_.error(body[i + 1].loc, fmt::format("a statement after 'return' in helper '{}'; 'return' must "
                                                "be the last statement of a helper", name));
    }
    return;
  }
  diags_.error(name_loc, fmt::format("helper '{}' has no 'return'; end its body with the values it gives "
                                     "back, as in 'return h;' or 'return h, c;'", name));
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

void Parser::parse_body(std::vector<ast::Stmt>& body, const std::string& name, bool helper) {
  while (!at(TokenKind::RBrace) && !at(TokenKind::EndOfFile) &&
         !(starts_item(current_.kind) && at_line_start())) {
    if (!starts_statement(current_.kind)) {
      expected(helper ? "a statement (let or return)" : "a statement (let, out, update or minimize)");
    } else if (helper && !at(TokenKind::KwLet) && !at(TokenKind::KwReturn)) {
      report(current_.loc, fmt::format("a helper cannot use {}: helper '{}' gives back its values with "
                                       "'return', and the function that calls it writes outputs and "
                                       "updates", describe_token(current_), name));
      parse_statement();   // parsed for its syntax errors, then dropped
    } else if (!helper && at(TokenKind::KwReturn)) {
      report(current_.loc, fmt::format("'return' is only allowed in a helper (def); function '{}' gives "
                                       "its results with 'out'", name));
      parse_statement();
    } else {
      body.push_back(parse_statement());
    }
    if (panic_) synchronize_statement();
  }
  expect(TokenKind::RBrace, fmt::format("to close the body of {} '{}'", helper ? "helper" : "function", name));
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
  if (keyword.kind == TokenKind::KwReturn) {
    stmt.kind = ast::StmtKind::Return;
    parse_return(stmt);
    return stmt;
  }
  stmt.kind = keyword.kind == TokenKind::KwLet ? ast::StmtKind::Let
              : keyword.kind == TokenKind::KwOut ? ast::StmtKind::Out
                                                 : ast::StmtKind::Update;
  std::string what = keyword.kind == TokenKind::KwUpdate ? "the name of a shared variable"
                     : keyword.kind == TokenKind::KwOut  ? "an output name"
                                                         : "a variable name";
  if (!expect_name(stmt.name, stmt.name_loc, what, fmt::format("after '{}'", keyword.spelling))) return stmt;
  if (stmt.kind == ast::StmtKind::Let && at(TokenKind::Comma) && !parse_let_names(stmt)) return stmt;
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

// `, NAME, ...` after the first name of `let a, b = f(x);` (several results of a helper).
bool Parser::parse_let_names(ast::Stmt& stmt) {
  while (match(TokenKind::Comma)) {
    ast::NameRef name;
    if (!expect_name(name.name, name.loc, "a variable name", "after ',' in 'let'")) return false;
    stmt.more_names.push_back(std::move(name));
  }
  if (at(TokenKind::Colon)) {
    syntax_error(current_, "a 'let' of several names cannot declare their types; bind them one by one "
                           "to annotate them");
    return false;
  }
  return true;
}

// return EXPR (',' EXPR)* ;   (the keyword is consumed)
void Parser::parse_return(ast::Stmt& stmt) {
  do {
    Parsed value = parse_expression();
    stmt.values.push_back(std::move(value.expr));
    if (panic_) return;
  } while (match(TokenKind::Comma));
  expect(TokenKind::Semicolon, "after the values of 'return'");
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

}  // namespace parser_detail

ast::Program parse_program(const SourceFile& file, DiagnosticEngine& diags) {
  // A NUL byte never occurs in text: this is a binary or data file given by mistake. One message
  // says so, instead of an "unexpected character" error for every stray byte.
  if (size_t nul = file.text().find('\0'); nul != std::string::npos) {
    diags.error(SourceLoc{}, fmt::format("not a text file (a NUL byte at offset {}); .synk programs are UTF-8 text",
                                         nul));
    return {};
  }
  parser_detail::Parser parser(file, diags);
  return parser.parse_program();
}

}  // namespace synk::dsl
