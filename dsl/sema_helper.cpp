// Semantic analysis of helpers (`def`, docs/language.md "Helpers"). A helper is checked once where
// it is declared (its name, its parameters' types, the names of its lets, recursion) and then
// inlined at every call: its body is analyzed in a scope of its own whose only names are its
// parameters, its lets and the module's, and its results are the caller's values. The IR never
// sees a helper, so every pass sees through it. An argument is evaluated in the caller where the
// body first reads it, so a call writes the very nodes, in the very order, of the body written out
// at the call (and of the C++ builder's helper); a parameter with a type is evaluated at the call
// instead, to check it: the symbols of its type are bound per call (the first argument that has
// one fixes it, the others must agree). Literals stay weak. An error inside a helper is followed
// by one note per call on the way there ("in call to helper 'h' from function 'f'").
#include <algorithm>
#include <fmt/format.h>

#include "dsl/parser.h"
#include "dsl/sema.h"

namespace synk::dsl::sema {
namespace {

// Helpers nest at most this deep, and one function inlines at most this many calls (a chain of
// helpers that each call the next twice would otherwise grow exponentially).
constexpr size_t kMaxHelperDepth = 64;
constexpr size_t kMaxHelperCalls = 10000;

std::string loc_str(SourceLoc loc) { return fmt::format("{}:{}", loc.line, loc.col); }

std::string dim_text(const ir::Dim& d) { return d.is_symbolic() ? d.symbol : std::to_string(d.size); }

// Calls `visit(e)` for every node of an expression tree, parents first.
template <typename F>
void for_each_expr(const ast::Expr& e, F&& visit) {
  visit(e);
  for (const auto& a : e.args)
    if (a) for_each_expr(*a, visit);
  for (const auto& k : e.kwargs)
    if (k.value) for_each_expr(*k.value, visit);
}

// Every expression of a helper's body (let values, returned values).
template <typename F>
void for_each_body_expr(const ast::HelperDecl& d, F&& visit) {
  for (const ast::Stmt& s : d.body) {
    if (s.value) for_each_expr(*s.value, visit);
    for (const ast::ExprPtr& v : s.values)
      if (v) for_each_expr(*v, visit);
  }
}

std::string param_list(const ast::HelperDecl& d) {
  std::string names;
  for (const ast::HelperParam& p : d.params) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

// The names a helper declares (parameters, lets) are unique, do not shadow a shared variable and
// are not inf or nan. `_` in a let of several names discards a value and may repeat.
bool check_helper_names(ModuleContext& ctx, const ast::HelperDecl& d) {
  bool ok = true;
  std::map<std::string, SourceLoc> names;
  const std::string owner = fmt::format(" of helper '{}'", d.name);
  auto declare = [&](const std::string& name, SourceLoc loc, const char* what) {
    if (auto it = names.find(name); it != names.end()) {
      ctx.diags.error(loc, checks::already_declared_message("", name, "at " + loc_str(it->second)));
      ok = false;
    } else if (auto g = ctx.globals.find(name); g != ctx.globals.end() && g->second.kind == Global::Kind::Shared) {
      ctx.diags.error(loc, checks::shadow_message(what, name, owner, "declared at " + loc_str(g->second.loc)));
      ok = false;
    } else if (std::optional<std::string> why = checks::builtin_constant_error(name, what)) {
      ctx.diags.error(loc, std::move(*why));
      ok = false;
    } else {
      names.emplace(name, loc);
    }
  };
  for (const ast::HelperParam& p : d.params) {
    declare(p.name, p.name_loc, "parameter");
    if (p.type && !resolve_type_expr(*p.type, ctx.diags)) ok = false;
  }
  for (const ast::Stmt& s : d.body) {
    if (s.kind != ast::StmtKind::Let) continue;
    if (s.more_names.empty() || s.name != "_") declare(s.name, s.name_loc, "let");
    for (const ast::NameRef& more : s.more_names)
      if (more.name != "_") declare(more.name, more.loc, "let");
    if (s.type && !resolve_type_expr(*s.type, ctx.diags)) ok = false;
  }
  return ok;
}

// Reports every call that closes a cycle of helper calls (once per calling and called helper) and
// marks the helpers on it, whose calls then stay silent. Depth-first, with an explicit stack so
// that a long chain of helpers cannot overflow the C++ one.
void check_recursion(ModuleContext& ctx, const std::vector<ast::HelperDecl>& decls) {
  struct Call {
    std::string callee;
    SourceLoc loc;
  };
  std::map<std::string, std::vector<Call>> calls;
  for (const ast::HelperDecl& d : decls) {
    if (!ctx.helpers.count(d.name) || ctx.helpers.at(d.name).decl != &d) continue;
    std::vector<Call>& out = calls[d.name];
    for_each_body_expr(d, [&](const ast::Expr& e) {
      if (e.kind == ast::ExprKind::Call && ctx.helpers.count(e.text)) out.push_back({e.text, e.loc});
    });
  }
  enum class State { New, OnStack, Done };
  std::map<std::string, State> state;
  std::set<std::pair<std::string, std::string>> reported;
  for (const auto& [root, unused] : calls) {
    if (state[root] != State::New) continue;
    std::vector<std::pair<std::string, size_t>> stack{{root, 0}};   // helper, next call to follow
    state[root] = State::OnStack;
    while (!stack.empty()) {
      auto& [name, next] = stack.back();
      const std::vector<Call>& out = calls[name];
      if (next == out.size()) {
        state[name] = State::Done;
        stack.pop_back();
        continue;
      }
      const Call& call = out[next++];
      if (state[call.callee] == State::New) {
        state[call.callee] = State::OnStack;
        stack.push_back({call.callee, 0});
        continue;
      }
      if (state[call.callee] != State::OnStack || !reported.insert({name, call.callee}).second) continue;
      std::string chain = name;   // name -> callee -> ... -> name
      size_t from = 0;
      while (stack[from].first != call.callee) ++from;
      for (size_t i = from; i < stack.size(); ++i) {
        chain += " -> " + stack[i].first;
        ctx.helpers[stack[i].first].ok = false;
      }
      ctx.diags.error(call.loc, name == call.callee
                                    ? fmt::format("helper '{}' calls itself; helpers are inlined where they are "
                                                  "called, so they cannot be recursive", name)
                                    : fmt::format("helper '{}' calls '{}', which leads back to it ({}); helpers "
                                                  "are inlined where they are called, so they cannot be "
                                                  "recursive", name, call.callee, chain));
    }
  }
}

}  // namespace

void declare_helpers(ModuleContext& ctx, const std::vector<ast::HelperDecl>& decls) {
  for (const ast::HelperDecl& d : decls) {
    if (std::optional<std::string> why = checks::helper_name_error(d.name)) {
      ctx.diags.error(d.name_loc, std::move(*why));
      ctx.helpers_named_like_builtins.insert(d.name);
      continue;
    }
    if (!declare_global(ctx, d.name, d.name_loc, Global{Global::Kind::Helper, -1, d.name_loc})) continue;
    HelperInfo info;
    info.decl = &d;
    info.ok = check_helper_names(ctx, d);
    for (const ast::Stmt& s : d.body)
      if (s.kind == ast::StmtKind::Return) info.results = s.values.size();
    ctx.helpers.emplace(d.name, info);
  }
  check_recursion(ctx, decls);
}

// ---- FunctionAnalyzer: calls -------------------------------------------------------------

void FunctionAnalyzer::add_call_notes() {
  for (size_t i = frames_.size(); i-- > 0;) {
    std::string from = i == 0 ? fmt::format("function '{}'", fn_.name)
                              : fmt::format("helper '{}'", frames_[i - 1].decl->name);
    ctx_.diags.note(frames_[i].call_loc, fmt::format("in call to helper '{}' from {}", frames_[i].decl->name, from));
  }
}

// The shared variables a function reads through the helpers it calls count as its own (their
// symbols, their scattered rows), located at the outermost call.
void FunctionAnalyzer::collect_helper_shareds(const ast::Expr& e, SourceLoc outer_call,
                                              std::set<std::string>& visited) {
  for_each_expr(e, [&](const ast::Expr& call) {
    if (call.kind != ast::ExprKind::Call) return;
    auto helper = ctx_.helpers.find(call.text);
    if (helper == ctx_.helpers.end() || !helper->second.ok || !visited.insert(call.text).second) return;
    SourceLoc at = outer_call.valid() ? outer_call : call.loc;
    for_each_body_expr(*helper->second.decl, [&](const ast::Expr& inner) {
      if (inner.kind != ast::ExprKind::Name) return;
      auto g = ctx_.globals.find(inner.text);
      if (g != ctx_.globals.end() && g->second.kind == Global::Kind::Shared) used_shareds_.emplace(g->second.index, at);
    });
    for (const ast::Stmt& s : helper->second.decl->body) {
      if (s.value) collect_helper_shareds(*s.value, at, visited);
      for (const ast::ExprPtr& v : s.values)
        if (v) collect_helper_shareds(*v, at, visited);
    }
  });
}

Value FunctionAnalyzer::call_helper_value(const ast::Expr& e, const HelperInfo& helper) {
  if (helper.ok && helper.results != 1) {
    error(e.loc, fmt::format("helper '{}' returns {} values, so a call of it is not one value; bind them with "
                             "'let a, b = {}(...);' (one name per value)", e.text, helper.results, e.text));
    return Value::error();
  }
  std::vector<Value> results = call_helper(e, helper);
  return results.size() == 1 ? results[0] : Value::error();
}

// Binds the call's arguments (positional, then keywords by parameter name) to the parameters.
bool FunctionAnalyzer::match_helper_arguments(const ast::Expr& e, const ast::HelperDecl& decl,
                                              std::vector<const ast::Expr*>& bound) {
  const size_t n = decl.params.size();
  const size_t given = e.args.size() + e.kwargs.size();
  auto count_error = [&](SourceLoc loc) {
    error(loc, fmt::format("helper '{}' takes {} argument{} ({}) but {} {} given", decl.name, n, n == 1 ? "" : "s",
                           param_list(decl), given, given == 1 ? "was" : "were"));
    return false;
  };
  if (e.args.size() > n) return count_error(e.args[n]->loc);
  for (size_t i = 0; i < e.args.size(); ++i) bound[i] = e.args[i].get();
  bool ok = true;
  for (const ast::KwArg& kw : e.kwargs) {
    auto p = std::find_if(decl.params.begin(), decl.params.end(),
                          [&](const ast::HelperParam& param) { return param.name == kw.name; });
    if (p == decl.params.end()) {
      error(kw.loc, fmt::format("helper '{}' has no parameter '{}'; its parameters are {}", decl.name, kw.name,
                                n == 0 ? "none" : param_list(decl)));
      ok = false;
    } else if (bound[size_t(p - decl.params.begin())]) {
      error(kw.loc, fmt::format("argument '{}' of helper '{}' is given twice", kw.name, decl.name));
      ok = false;
    } else {
      bound[size_t(p - decl.params.begin())] = kw.value.get();
    }
  }
  if (!ok) return false;
  if (given < n && e.kwargs.empty()) return count_error(e.loc);
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    error(e.loc, fmt::format("the call to helper '{}' gives no value for its parameter '{}'", decl.name,
                             decl.params[i].name));
    return false;
  }
  return true;
}

// An argument of an annotated parameter has its dtype and rank; each static size matches, and
// each symbol stands for one dimension in this call (bound by the first argument that has it).
bool FunctionAnalyzer::unify_parameter(const ast::HelperDecl& decl, size_t i, const ast::Expr& arg, Value& value,
                                       HelperFrame& frame, std::map<std::string, std::string>& bound_by) {
  const ast::HelperParam& p = decl.params[i];
  auto declared = resolve_type_expr(*p.type, ctx_.diags);   // valid: checked with the declaration
  if (!declared) return false;
  if (value.is_literal()) {
    auto converted = declared->rank() == 0 ? convert(value, declared->dtype, arg.loc)
                                           : std::optional<Value>(materialize_default(value, arg.loc));
    if (!converted || converted->failed()) return false;
    value = *converted;
  }
  bool same = value.type.dtype == declared->dtype && value.type.rank() == declared->rank();
  for (size_t axis = 0; same && axis < declared->rank(); ++axis)
    same = declared->shape[axis].is_symbolic() || declared->shape[axis] == value.type.shape[axis];
  if (!same) {
    error(arg.loc, fmt::format("argument '{}' of helper '{}' must be {} but '{}' is {}", p.name, decl.name,
                               ir::type_str(*declared), expr_text(arg), ir::type_str(value.type)));
    return false;
  }
  for (size_t axis = 0; axis < declared->rank(); ++axis) {
    const ir::Dim& d = declared->shape[axis];
    if (!d.is_symbolic()) continue;
    const ir::Dim& actual = value.type.shape[axis];
    auto [it, fresh] = frame.dims.emplace(d.symbol, actual);
    if (fresh) {
      bound_by.emplace(d.symbol, p.name);
    } else if (!(it->second == actual)) {
      error(arg.loc, fmt::format("dimension '{}' of helper '{}' is {} in argument '{}' but {} in argument '{}' "
                                 "('{}' is {})", d.symbol, decl.name, dim_text(it->second), bound_by[d.symbol],
                                 dim_text(actual), p.name, expr_text(arg), ir::type_str(value.type)));
      return false;
    }
  }
  return true;
}

std::vector<Value> FunctionAnalyzer::call_helper(const ast::Expr& e, const HelperInfo& helper) {
  const ast::HelperDecl& decl = *helper.decl;
  if (!helper.ok) return {};   // reported with its declaration
  for (const HelperFrame& f : frames_)
    if (f.decl == &decl) return {};   // a recursion, reported by check_recursion
  if (frames_.size() >= kMaxHelperDepth) {
    error(e.loc, fmt::format("helper calls nest too deeply (the limit is {} levels)", kMaxHelperDepth));
    return {};
  }
  if (++helper_calls_ > kMaxHelperCalls) {
    if (helper_calls_ == kMaxHelperCalls + 1)
      error(e.loc, fmt::format("function '{}' calls helpers more than {} times once they are inlined; call fewer",
                               fn_.name, kMaxHelperCalls));
    return {};
  }
  std::vector<const ast::Expr*> bound(decl.params.size(), nullptr);
  if (!match_helper_arguments(e, decl, bound)) return {};
  // Parameters with a type are evaluated now, in order, to check them and bind their symbols;
  // the others where the body first reads them.
  HelperFrame frame{&decl, e.loc, {}, {}};
  std::map<std::string, std::string> bound_by;
  std::map<std::string, Binding> scope;
  for (size_t i = 0; i < decl.params.size(); ++i) {
    Binding b;
    b.kind = Binding::Kind::Let;
    b.loc = decl.params[i].name_loc;
    b.source = bound[i];
    b.source_depth = frames_.size();
    b.source_in_caller = true;
    if (decl.params[i].type) {
      b.value = expr(*bound[i]);
      b.value.let_name.clear();   // a literal let of the caller is not cached by the helper's scope
      if (b.value.failed() || !unify_parameter(decl, i, *bound[i], b.value, frame, bound_by)) return {};
    } else {
      b.argument = bound[i];
      b.argument_depth = frames_.size();
    }
    scope.emplace(decl.params[i].name, std::move(b));
  }
  // Inside the helper: its parameters and lets are its only local names.
  frame.caller_scope = std::exchange(scope_, std::move(scope));
  frames_.push_back(std::move(frame));
  std::vector<Value> results;
  const size_t errors = ctx_.diags.error_count();
  for (const ast::Stmt& s : decl.body) {
    if (s.kind != ast::StmtKind::Return) {
      statement(s);
      continue;
    }
    for (const ast::ExprPtr& v : s.values) {
      results.push_back(expr(*v));
      results.back().let_name.clear();
    }
  }
  // An argument the body never read is still evaluated, so that its errors are reported, unless
  // it is no value (literal_only: it was an operation's literal argument). A list holding anything
  // but literals is evaluated, and reported.
  // The argument may itself be a parameter of the calling helper, holding a literal written
  // further out (c2(x, "same") calling c1(x, p)): what it stands for decides.
  for (const ast::HelperParam& p : decl.params) {
    auto it = scope_.find(p.name);
    if (it == scope_.end() || !it->second.argument) continue;
    ast::Expr name;
    name.kind = ast::ExprKind::Name;
    name.text = p.name;
    if (literal_only(literal_argument(name))) continue;
    // Its value is dead: its random ops take no salt, so the function's later ones draw what the
    // C++ builder's draw (which never writes an unread argument out).
    const int64_t salt = next_salt_;
    argument_read(it->second);
    next_salt_ = salt;
  }
  scope_ = std::move(frames_.back().caller_scope);
  frames_.pop_back();
  // After an error inside, every result is silent: one mistake, one message.
  if (ctx_.diags.error_count() != errors) return {};
  return results;
}

// Evaluates a helper's argument in its caller, as if written out where the helper reads it: the
// caller's scope and frames are put back for the moment.
Value FunctionAnalyzer::argument_read(Binding& b) {
  const ast::Expr* argument = std::exchange(b.argument, nullptr);
  // Arguments written out inside arguments nest like the expression they make (l1(x) = l0(l0(x)),
  // l2(x) = l1(l1(x)), ...: 2^k levels), each a recursion here: the parser's limit on an
  // expression's depth applies to that expression too, before it exhausts the stack.
  if (argument_nesting_ >= size_t(kMaxExpressionDepth)) {
    if (!std::exchange(argument_too_deep_, true))
      error(argument->loc, fmt::format("this helper argument, written out where the helper reads it, makes an "
                                       "expression more than {} levels deep (the limit of an expression); bind "
                                       "intermediate results with let, or give the helper's parameter a type",
                                       kMaxExpressionDepth));
    b.value = Value::error();
    return b.value;
  }
  ++argument_nesting_;
  struct Leave {
    size_t& n;
    ~Leave() { --n; }
  } leave{argument_nesting_};
  const size_t depth = b.argument_depth;
  std::vector<HelperFrame> inner(std::make_move_iterator(frames_.begin() + ptrdiff_t(depth)),
                                 std::make_move_iterator(frames_.end()));
  frames_.resize(depth);
  std::map<std::string, Binding> inner_scope = std::exchange(scope_, std::move(inner.front().caller_scope));
  Value v = expr(*argument);
  inner.front().caller_scope = std::exchange(scope_, std::move(inner_scope));
  for (HelperFrame& f : inner) frames_.push_back(std::move(f));
  v.let_name.clear();   // a literal let of the caller is not cached by the helper's scope
  b.value = v;          // `b` lives in a map node, which the moves above leave in place
  return v;
}

// let a, b = helper(...);   `_` discards a value.
void FunctionAnalyzer::let_many_statement(const ast::Stmt& s) {
  std::vector<ast::NameRef> names{ast::NameRef{s.name, s.name_loc}};
  names.insert(names.end(), s.more_names.begin(), s.more_names.end());
  std::vector<bool> name_ok;
  std::string written;
  for (size_t i = 0; i < names.size(); ++i) {
    written += (i ? ", " : "") + names[i].name;
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated |= names[j].name == names[i].name && names[i].name != "_";
    if (repeated) error(names[i].loc, fmt::format("'{}' is bound twice in one 'let'", names[i].name));
    name_ok.push_back(names[i].name == "_" || (!repeated && check_local_name(names[i].name, names[i].loc, "let")));
  }
  const ast::Expr* call = s.value.get();
  std::vector<Value> values;
  ir::NodeId first_new = ir::NodeId(fn_.nodes.size());
  auto helper = call && call->kind == ast::ExprKind::Call ? ctx_.helpers.find(call->text) : ctx_.helpers.end();
  if (call && call->kind != ast::ExprKind::Error && helper == ctx_.helpers.end()) {
    error(call->loc, fmt::format("'let {}' binds {} names, so its value must be a call of a helper that returns "
                                 "{} values, but '{}' is not a helper call", written, names.size(), names.size(),
                                 expr_text(*call)));
  } else if (helper != ctx_.helpers.end() && helper->second.ok && helper->second.results != names.size()) {
    error(call->loc, fmt::format("helper '{}' returns {} value{} but 'let {}' binds {} names", call->text,
                                 helper->second.results, helper->second.results == 1 ? "" : "s", written,
                                 names.size()));
  } else if (helper != ctx_.helpers.end()) {
    values = call_helper(*call, helper->second);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].name == "_") continue;
    bind_let(names[i].name, names[i].loc, values.size() == names.size() ? values[i] : Value::error(), first_new,
             name_ok[i]);
  }
}

std::optional<ir::Dim> FunctionAnalyzer::helper_dimension(const ast::Expr& item, const char* op) {
  const HelperFrame& frame = frames_.back();
  if (auto it = frame.dims.find(item.text); it != frame.dims.end()) return it->second;
  std::string known;
  for (const auto& [symbol, dim] : frame.dims) known += (known.empty() ? "" : ", ") + symbol;
  error(item.loc, fmt::format("unknown dimension '{}' in {}; {}", item.text, op,
                              known.empty() ? fmt::format("helper '{}' has no symbolic dimensions (name them in "
                                                          "its parameters' types, as in x: f32[n, k])",
                                                          frame.decl->name)
                                            : fmt::format("the dimensions of helper '{}' are {} (from its "
                                                          "parameters' types)", frame.decl->name, known)));
  return std::nullopt;
}

}  // namespace synk::dsl::sema
