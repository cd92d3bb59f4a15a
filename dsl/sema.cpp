// Semantic analysis, module and statement level: declarations of shared variables (types,
// initializers, sliceable), functions (parameters, roles, symbolic dimensions, which row
// dimensions are scattered), and the let / out / update statements with their modes. Every
// error names what was expected and what was found, at the offending token; an error in one
// declaration or statement never produces follow-on errors elsewhere. Expressions are analyzed
// in sema_expr.cpp and sema_builtins.cpp.
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsl/frontend.h"
#include "base/checked_math.h"
#include "base/npy_format.h"
#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl {

using ir::DType;
using ir::ReduceMode;

namespace sema {
namespace {

std::string loc_str(SourceLoc loc) { return fmt::format("{}:{}", loc.line, loc.col); }

}  // namespace

const char* global_kind_text(Global::Kind kind) {
  switch (kind) {
    case Global::Kind::Shared: return "a shared variable";
    case Global::Kind::Function: return "a function";
    case Global::Kind::Optimizer: return "an optimizer";
    case Global::Kind::Helper: return "a helper";
  }
  return "a name";
}

// Resolves `f32[n, 10]`; reports an unknown or reserved dtype at the type.
std::optional<ir::TensorType> resolve_type_expr(const ast::TypeExpr& t, DiagnosticEngine& diags) {
  auto dtype = ir::dtype_from_name(t.dtype);
  if (!dtype) {
    diags.error(t.loc, fmt::format("unknown dtype '{}'; expected f32, f64, i32, i64, u8 or bool", t.dtype));
    return std::nullopt;
  }
  if (std::optional<std::string> why = checks::reserved_dtype_error(*dtype)) {
    diags.error(t.loc, std::move(*why));
    return std::nullopt;
  }
  ir::TensorType type{*dtype, {}};
  for (const ast::DimExpr& d : t.dims) {
    if (d.size) {
      if (std::optional<std::string> why = checks::dimension_size_error(*d.size)) {
        diags.error(d.loc, std::move(*why));
        return std::nullopt;
      }
      type.shape.push_back(ir::Dim::fixed(*d.size));
    } else {
      if (checks::is_builtin_constant(d.symbol)) {
        diags.error(d.loc, *checks::dimension_name_error(d.symbol));
        return std::nullopt;
      }
      type.shape.push_back(ir::Dim::sym(d.symbol));
    }
  }
  // f32[2^62] parses; no array of it can be allocated or indexed.
  if (std::optional<std::string> too_large = size_error(type)) {
    diags.error(t.loc, *too_large);
    return std::nullopt;
  }
  return type;
}

namespace {

// A number in an initializer: a literal (negative literals are folded by the parser), inf, nan.
std::optional<double> number_of(const ast::Expr& e) {
  switch (e.kind) {
    case ast::ExprKind::IntLiteral: return double(e.int_value);
    case ast::ExprKind::FloatLiteral: return e.float_value;
    case ast::ExprKind::Name:
      if (e.text == "inf") return std::numeric_limits<double>::infinity();
      if (e.text == "nan") return std::numeric_limits<double>::quiet_NaN();
      return std::nullopt;
    case ast::ExprKind::Unary:
      if (e.text == "-" && e.args.size() == 1)
        if (auto v = number_of(*e.args[0])) return -*v;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// An integer literal a double does not hold exactly (beyond 2^53): initial values travel as doubles.
bool inexact_integer(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::Unary && e.text == "-" && e.args.size() == 1) return inexact_integer(*e.args[0]);
  return e.kind == ast::ExprKind::IntLiteral && (e.int_value > (int64_t(1) << 53) || e.int_value < -(int64_t(1) << 53));
}

class InitializerAnalyzer {
 public:
  InitializerAnalyzer(ModuleContext& ctx, const ast::SharedDecl& d, const ir::TensorType* type)
      : ctx_(ctx), decl_(d), type_(type) {}

  std::optional<ir::Initializer> run() {
    if (!decl_.init) return ir::InitZeros{};
    const ast::Expr& e = *decl_.init;
    if (e.kind == ast::ExprKind::Error) return std::nullopt;
    if (e.kind == ast::ExprKind::Name && e.text == "zeros") return ir::InitZeros{};
    if (e.kind == ast::ExprKind::Name && e.text == "ones") return ir::InitOnes{};
    if (auto v = number_of(e)) return constant(*v, e.loc, inexact_integer(e));
    if (e.kind == ast::ExprKind::BoolLiteral) return truth(e);
    if (e.kind != ast::ExprKind::Call) return unknown(e);
    if (e.text == "const") return call_const(e);
    if (e.text == "normal" || e.text == "uniform") return call_random(e);
    if (e.text == "load") return call_load(e);
    return unknown(e);
  }

 private:
  std::nullopt_t error(SourceLoc loc, std::string message) {
    ctx_.diags.error(loc, std::move(message));
    return std::nullopt;
  }

  std::nullopt_t unknown(const ast::Expr& e) {
    return error(e.loc, fmt::format("unknown initializer '{}' for shared variable '{}'; expected zeros, "
                                    "ones, a number, true, false, const(v), normal(...), uniform(...) or "
                                    "load(\"file.npy\")", expr_text(e), decl_.name));
  }

  // true/false initialize bool variables only: on a number variable they are more likely a
  // mistake than a way of writing 1 or 0.
  std::optional<ir::Initializer> truth(const ast::Expr& e) {
    if (type_ && type_->dtype != ir::DType::Bool)
      return error(e.loc, fmt::format("{} initializes bool shared variables, but '{}' is {}; write {} instead",
                                      e.int_value ? "true" : "false", decl_.name, ir::dtype_name(type_->dtype),
                                      e.int_value ? 1 : 0));
    return ir::InitConstant{double(e.int_value)};
  }

  std::optional<ir::Initializer> constant(double v, SourceLoc loc, bool inexact = false) {
    if (type_)
      if (std::optional<std::string> why = checks::initial_value_error(decl_.name, *type_, v, inexact))
        return error(loc, std::move(*why));
    return ir::InitConstant{v};
  }

  std::optional<ir::Initializer> call_const(const ast::Expr& e) {
    if (!e.kwargs.empty())
      return error(e.kwargs[0].loc, fmt::format("const takes no keyword arguments, found '{}'", e.kwargs[0].name));
    if (e.args.size() != 1)
      return error(e.loc, fmt::format("const takes one number, as in const(0.5); found {} arguments", e.args.size()));
    auto v = number_of(*e.args[0]);
    if (!v) return error(e.args[0]->loc, fmt::format("const needs a number, found '{}'", expr_text(*e.args[0])));
    return constant(*v, e.args[0]->loc, inexact_integer(*e.args[0]));
  }

  std::optional<ir::Initializer> call_random(const ast::Expr& e) {
    bool normal = e.text == "normal";
    const char* first = normal ? "mean" : "low";
    const char* second = normal ? "std" : "high";
    std::string expected = fmt::format("seed, {} or {}", first, second);
    bool ok = true;
    if (!e.args.empty()) {
      error(e.args[0]->loc, fmt::format("{} takes keyword arguments only: {}(seed=1, {}=..., {}=...)",
                                        e.text, e.text, first, second));
      ok = false;
    }
    std::optional<uint64_t> seed;
    bool seed_given = false;
    double a = 0, b = 1;
    SourceLoc b_loc = e.loc;
    for (const ast::KwArg& kw : e.kwargs) {
      if (kw.name == "seed") {
        seed_given = true;
        const ast::Expr& v = *kw.value;
        if (v.kind != ast::ExprKind::IntLiteral || v.int_value < 0) {
          error(v.loc, fmt::format("seed must be a non-negative integer, found '{}'", expr_text(v)));
          ok = false;
        } else {
          seed = uint64_t(v.int_value);
        }
      } else if (kw.name == first || kw.name == second) {
        auto v = number_of(*kw.value);
        if (!v || std::isnan(*v) || std::isinf(*v)) {
          error(kw.value->loc, fmt::format("{} must be a finite number, found '{}'", kw.name, expr_text(*kw.value)));
          ok = false;
        } else if (kw.name == first) {
          a = *v;
        } else {
          b = *v;
          b_loc = kw.value->loc;
        }
      } else {
        error(kw.loc, fmt::format("unknown argument '{}' for {}; expected {}", kw.name, e.text, expected));
        ok = false;
      }
    }
    if (!seed_given) {
      error(e.loc, fmt::format("{} needs seed=S (an integer) so that every run draws the same values", e.text));
      ok = false;
    }
    if (std::optional<std::string> why = normal ? checks::std_error(b) : std::nullopt) {
      error(b_loc, std::move(*why));
      ok = false;
    }
    if (std::optional<std::string> why = normal ? std::nullopt : checks::uniform_bounds_error(a, b)) {
      error(e.loc, std::move(*why));
      ok = false;
    }
    if (ok && type_)
      if (std::optional<std::string> why = checks::random_dtype_error(e.text.c_str(), decl_.name, *type_))
        return error(e.loc, std::move(*why));
    if (ok && type_)
      if (std::optional<std::string> why = checks::random_parameters_fit_error(normal, a, b, type_->dtype))
        return error(e.loc, std::move(*why));
    if (!ok) return std::nullopt;
    if (normal) return ir::InitNormal{*seed, a, b};
    return ir::InitUniform{*seed, a, b};
  }

  std::optional<ir::Initializer> call_load(const ast::Expr& e) {
    if (!e.kwargs.empty())
      return error(e.kwargs[0].loc, fmt::format("load takes no keyword arguments, found '{}'", e.kwargs[0].name));
    if (e.args.size() != 1 || e.args[0]->kind != ast::ExprKind::StringLiteral)
      return error(e.loc, "load needs one file name, as in load(\"weights.npy\")");
    const std::string& path = e.args[0]->text;
    if (!ctx_.check_load_files) return ir::InitLoad{path};
    std::filesystem::path full = std::filesystem::path(path).is_absolute()
                                     ? std::filesystem::path(path)
                                     : std::filesystem::path(ctx_.base_dir) / path;
    std::error_code ec;
    const bool embedded = is_embedded_npy(full.string());
    if (!embedded && std::filesystem::is_directory(full, ec))
      return error(e.args[0]->loc, fmt::format("\"{}\" is a directory, not an .npy file (looked at {})", path,
                                               full.string()));
    if (!embedded && std::filesystem::exists(full, ec) && !std::filesystem::is_regular_file(full, ec))
      return error(e.args[0]->loc, fmt::format("\"{}\" is not a regular file (a FIFO, socket or device), not an .npy "
                                               "file (looked at {})", path, full.string()));
    if (!embedded && !std::filesystem::is_regular_file(full, ec))
      return error(e.args[0]->loc, fmt::format("cannot find \"{}\" to initialize shared variable '{}' "
                                               "(looked for {})", path, decl_.name, full.string()));
    if (type_ && !check_npy(full.string(), path, e.args[0]->loc)) return std::nullopt;
    return ir::InitLoad{path};
  }

  // The file's dtype must convert safely to the declared one and its shape must match the
  // declared shape (a symbolic dimension takes the file's size, the same size at every use).
  bool check_npy(const std::string& full, const std::string& path, SourceLoc loc) {
    std::string why;
    auto header = read_npy_header(full, &why);
    if (!header) return error(loc, fmt::format("\"{}\" {}", path, why)), false;
    if (!header->dtype)
      return error(loc, fmt::format("\"{}\" holds dtype '{}', which synk cannot load (it reads f32, f64, "
                                    "i32, i64, u8 and bool, little-endian)", path, header->descr)), false;
    if (!can_cast_safely(*header->dtype, type_->dtype))
      return error(loc, fmt::format("\"{}\" holds {} values, which do not convert safely to {}; declare "
                                    "'{}' as {} or save the file as {}", path, ir::dtype_name(*header->dtype),
                                    ir::dtype_name(type_->dtype), decl_.name, ir::dtype_name(*header->dtype),
                                    ir::dtype_name(type_->dtype))), false;
    if (header->fortran_order)
      return error(loc, fmt::format("\"{}\" is stored in Fortran order; save it in C order "
                                    "(numpy.ascontiguousarray)", path)), false;
    // As numpy prints a shape: (9,) for one dimension.
    const std::string dims = fmt::format("{}{}", fmt::join(header->shape, ", "), header->shape.size() == 1 ? "," : "");
    bool match = header->shape.size() == type_->rank();
    std::map<std::string, int64_t> bound;
    for (size_t i = 0; match && i < header->shape.size(); ++i) {
      const ir::Dim& d = type_->shape[i];
      if (!d.is_symbolic()) match = d.size == header->shape[i];
      else match = bound.emplace(d.symbol, header->shape[i]).first->second == header->shape[i];
    }
    if (!match)
      return error(loc, fmt::format("\"{}\" has shape ({}) but shared variable '{}' is declared {}", path,
                                    dims, decl_.name, ir::type_str(*type_))), false;
    // A valid header over too few bytes (a copy cut short) would otherwise fail only when run.
    // (read_npy_header refuses a shape whose size does not fit, so this product is exact.)
    const uint64_t need = uint64_t(checked_shape_bytes(header->shape, ir::dtype_size(*header->dtype)).value_or(INT64_MAX));
    if (header->data_bytes < need)
      return error(loc, fmt::format("\"{}\" is truncated: shape ({}) of {} needs {} bytes of data, the file has {}",
                                    path, dims, ir::dtype_name(*header->dtype), need, header->data_bytes)), false;
    return true;
  }

  ModuleContext& ctx_;
  const ast::SharedDecl& decl_;
  const ir::TensorType* type_;
};

}  // namespace

// Declares a module-level name; reports a duplicate.
bool declare_global(ModuleContext& ctx, const std::string& name, SourceLoc loc, Global g) {
  auto it = ctx.globals.find(name);
  if (it != ctx.globals.end()) {
    ctx.diags.error(loc, checks::already_declared_message("", name, "at " + loc_str(it->second.loc)));
    return false;
  }
  if (is_builtin_constant(name)) {
    ctx.diags.error(loc, fmt::format("'{}' is a built-in constant and cannot be declared", name));
    return false;
  }
  ctx.globals.emplace(name, g);
  return true;
}

namespace {

void analyze_shared(ModuleContext& ctx, const ast::SharedDecl& d) {
  int64_t index = int64_t(ctx.module.shareds.size());
  bool ok = declare_global(ctx, d.name, d.name_loc, Global{Global::Kind::Shared, index, d.name_loc});
  ir::SharedVar var;
  var.name = d.name;
  var.sliceable = d.sliceable;
  var.loc = d.name_loc;
  auto type = resolve_type_expr(d.type, ctx.diags);
  if (type) {
    var.type = *type;
    if (std::optional<std::string> why = checks::sliceable_error(d.name, *type, d.sliceable)) {
      ctx.diags.error(d.type.loc, std::move(*why));
      ok = false;
    }
  } else {
    ok = false;
  }
  auto init = InitializerAnalyzer(ctx, d, type ? &*type : nullptr).run();
  if (init) var.init = *init;
  else ok = false;
  ctx.module.shareds.push_back(std::move(var));
  ctx.shared_ok.push_back(ok);
  ctx.shared_locs.push_back(d.name_loc);
}

// Calls `visit(name_expr)` for every Name in an expression tree.
template <typename F>
void for_each_name(const ast::Expr& e, F&& visit) {
  if (e.kind == ast::ExprKind::Name) visit(e);
  for (const auto& a : e.args)
    if (a) for_each_name(*a, visit);
  for (const auto& k : e.kwargs)
    if (k.value) for_each_name(*k.value, visit);
}

}  // namespace

// ---- FunctionAnalyzer: header and statements ---------------------------------------------

FunctionAnalyzer::FunctionAnalyzer(ModuleContext& context, const ast::FnDecl& decl)
    : ctx_(context), decl_(decl) {
  fn_.name = decl.name;
  fn_.loc = decl.name_loc;
}

void FunctionAnalyzer::error(SourceLoc loc, std::string message) {
  ctx_.diags.error(loc, std::move(message));
  add_call_notes();
  had_error_ = true;
}

// Inside a helper, the symbols of its parameter types stand for what this call bound them to.
std::optional<ir::TensorType> FunctionAnalyzer::resolve_type(const ast::TypeExpr& t) {
  size_t errors = ctx_.diags.error_count();
  auto type = resolve_type_expr(t, ctx_.diags);
  if (!type) {
    if (ctx_.diags.error_count() != errors) add_call_notes();
    had_error_ = true;
    return type;
  }
  if (!frames_.empty()) {
    for (ir::Dim& d : type->shape)
      if (auto it = frames_.back().dims.find(d.symbol); d.is_symbolic() && it != frames_.back().dims.end())
        d = it->second;
  }
  return type;
}

bool FunctionAnalyzer::check_local_name(const std::string& name, SourceLoc loc, const char* what) {
  if (auto it = scope_.find(name); it != scope_.end()) {
    error(loc, checks::already_declared_message("", name, "at " + loc_str(it->second.loc)));
    return false;
  }
  if (auto it = ctx_.globals.find(name); it != ctx_.globals.end() && it->second.kind == Global::Kind::Shared) {
    error(loc, checks::shadow_message(what, name, "", "declared at " + loc_str(it->second.loc)));
    return false;
  }
  if (std::optional<std::string> why = checks::builtin_constant_error(name, what)) {
    error(loc, std::move(*why));
    return false;
  }
  return true;
}

// After a duplicate or shadowing declaration nobody can tell which one a later use means, so
// later uses of the name stay silent instead of producing follow-on errors.
void FunctionAnalyzer::poison_name(const std::string& name, SourceLoc loc) {
  auto it = scope_.find(name);
  if (it == scope_.end()) {
    Binding b;
    b.kind = Binding::Kind::Let;
    b.loc = loc;
    scope_.emplace(name, std::move(b));
  } else if (it->second.kind == Binding::Kind::Let) {
    it->second.value = Value::error();
  } else {
    it->second.param_index = -1;
  }
}

void FunctionAnalyzer::declare_params() {
  for (const ast::ParamDecl& p : decl_.params) {
    ir::Param param;
    param.name = p.name;
    param.role = p.role == "bcast" ? ir::Role::Broadcast
                 : p.role == "minibatch" ? ir::Role::Minibatch : ir::Role::Scatter;
    param.loc = p.name_loc;
    Binding b;
    b.kind = Binding::Kind::Param;
    b.loc = p.name_loc;
    b.param_index = int64_t(fn_.params.size());
    auto type = resolve_type(p.type);
    if (type) {
      param.type = *type;
      if (std::optional<std::string> why = checks::row_dimension_error(param.role, p.name, *type)) {
        error(p.type.loc, std::move(*why));
        type.reset();
      }
    }
    if (!type) b.param_index = -1;   // uses of it stay silent
    if (check_local_name(p.name, p.name_loc, "parameter")) scope_.emplace(p.name, std::move(b));
    else poison_name(p.name, p.name_loc);
    fn_.params.push_back(std::move(param));
  }
}

void FunctionAnalyzer::collect_symbols() {
  auto note_shared = [&](const std::string& name, SourceLoc loc) {
    auto it = ctx_.globals.find(name);
    if (it == ctx_.globals.end() || it->second.kind != Global::Kind::Shared || scope_.count(name)) return;
    used_shareds_.emplace(it->second.index, loc);
  };
  std::set<std::string> helpers_visited;
  for (const ast::Stmt& s : decl_.body) {
    if (s.value) for_each_name(*s.value, [&](const ast::Expr& e) { note_shared(e.text, e.loc); });
    if (s.value) collect_helper_shareds(*s.value, SourceLoc{}, helpers_visited);
    if (s.kind == ast::StmtKind::Update) note_shared(s.name, s.name_loc);
    for (const ast::NameRef& name : s.over) note_shared(name.name, name.loc);
  }
  for (size_t i = 0; i < fn_.params.size(); ++i)
    for (const ir::Dim& d : fn_.params[i].type.shape)
      if (d.is_symbolic()) symbols_.insert(d.symbol);
  for (const auto& [index, loc] : used_shareds_)
    for (const ir::Dim& d : ctx_.module.shareds[size_t(index)].type.shape)
      if (d.is_symbolic()) symbols_.insert(d.symbol);
}

// A row dimension that is split over ranks (axis 0 of scatter and minibatch parameters and of
// sliceable shared variables) has a different size in every rank, so it cannot also size a
// dimension that every rank holds whole.
void FunctionAnalyzer::check_scattered_symbols() {
  std::vector<const ir::SharedVar*> used;
  for (const auto& [index, loc] : used_shareds_) used.push_back(&ctx_.module.shareds[size_t(index)]);
  scattered_ = checks::scattered_rows(fn_.params, used);
  for (size_t i = 0; i < fn_.params.size(); ++i) {
    const ir::Param& p = fn_.params[i];
    const ast::ParamDecl& pd = decl_.params[i];
    for (size_t axis = 0; axis < p.type.shape.size() && axis < pd.type.dims.size(); ++axis)
      if (std::optional<std::string> why = checks::param_axis_error(p, axis, scattered_))
        error(pd.type.dims[axis].loc, std::move(*why));
  }
  for (const auto& [index, loc] : used_shareds_) {
    const ir::SharedVar& s = ctx_.module.shareds[size_t(index)];
    for (size_t axis = 0; axis < s.type.shape.size(); ++axis)
      if (std::optional<std::string> why = checks::shared_axis_error(s, axis, scattered_)) error(loc, std::move(*why));
  }
}

std::optional<ReduceMode> FunctionAnalyzer::resolve_mode(const ast::Stmt& s, bool for_update) {
  if (s.mode.empty()) return ReduceMode::Avg;
  auto mode = ir::mode_from_name(s.mode);
  if (!mode) {
    error(s.mode_loc, fmt::format("unknown mode '{}'; expected {}", s.mode,
                                  for_update ? "avg, sum, prod, max or min"
                                             : "avg, sum, prod, max, min, gather or none"));
    return std::nullopt;
  }
  if (std::optional<std::string> why = for_update ? checks::update_mode_error(*mode) : std::nullopt) {
    error(s.mode_loc, std::move(*why));
    return std::nullopt;
  }
  return mode;
}

void FunctionAnalyzer::let_statement(const ast::Stmt& s) {
  bool name_ok = check_local_name(s.name, s.name_loc, "let");
  ir::NodeId first_new = ir::NodeId(fn_.nodes.size());
  Value v = s.value ? expr(*s.value) : Value::error();
  if (s.type && !v.failed()) {
    auto declared = resolve_type(*s.type);
    if (!declared) {
      v = Value::error();
    } else if (v.is_literal() && declared->rank() == 0) {
      // A literal takes the declared dtype (`let half: f64 = 0.5;`) when it fits.
      auto converted = convert(v, declared->dtype, s.value->loc);
      v = converted ? *converted : Value::error();
    } else {
      if (v.is_literal()) v = materialize_default(v, s.value->loc);
      if (!(v.type == *declared)) {
        error(s.type->loc, fmt::format("'{}' is declared {} but its value has type {}", s.name,
                                       ir::type_str(*declared), ir::type_str(v.type)));
        v = Value::error();
      }
    }
  } else if (s.type) {
    resolve_type(*s.type);  // still report a bad dtype in the annotation
  }
  // `let training = true;` also stands for its literal where an operation needs one.
  // So does `let q = p;` of a helper parameter (or another let) that stands for one.
  const ast::Expr* literal = nullptr;
  if (s.value) {
    const ast::Expr& stands_for = literal_argument(*s.value);
    if (scalar_literal(stands_for)) literal = &stands_for;
  }
  bind_let(s.name, s.name_loc, std::move(v), first_new, name_ok, literal);
}

void FunctionAnalyzer::bind_let(const std::string& name, SourceLoc name_loc, Value v, ir::NodeId first_new,
                                bool name_ok, const ast::Expr* literal) {
  if (v.kind == Value::Kind::Node && v.node >= first_new && fn_.nodes[size_t(v.node)].name.empty())
    fn_.nodes[size_t(v.node)].name = name;
  if (v.is_literal()) v.let_name = name;
  if (!name_ok) return poison_name(name, name_loc);
  Binding b;
  b.kind = Binding::Kind::Let;
  b.value = std::move(v);
  b.loc = name_loc;
  b.source = literal;
  scope_.emplace(name, std::move(b));
}

void FunctionAnalyzer::out_statement(const ast::Stmt& s) {
  bool ok = true;
  if (auto it = outputs_seen_.find(s.name); it != outputs_seen_.end()) {
    error(s.name_loc, checks::already_declared_message("output", s.name, "at " + loc_str(it->second)));
    ok = false;
  } else {
    outputs_seen_.emplace(s.name, s.name_loc);
  }
  auto mode = resolve_mode(s, false);
  Value v = s.value ? expr(*s.value) : Value::error();
  if (v.is_literal()) v = materialize_default(v, s.value->loc);
  if (!mode || v.failed() || !ok) return;
  SourceLoc where = s.mode.empty() ? s.name_loc : s.mode_loc;
  const bool mode_written = !s.mode.empty();
  if (auto why = checks::output_avg_error(s.name, v.type.dtype, *mode, checks::Spelling::Synk, mode_written))
    return error(where, std::move(*why));
  if (auto why = checks::scattered_output_error(s.name, "", v.type, *mode, scattered_))
    return error(where, std::move(*why));
  if (auto why = checks::output_gather_error(s.name, v.type, *mode, checks::Spelling::Synk))
    return error(where, std::move(*why));
  if (!mode_written && v.kind == Value::Kind::Node)
    if (auto why = checks::rows_reduced_by_avg_warning(s.name, fn_, v.node, scattered_))
      ctx_.diags.warning(s.name_loc, std::move(*why));
  fn_.outputs.push_back(ir::Output{s.name, v.node, *mode, s.name_loc});
}

void FunctionAnalyzer::update_statement(const ast::Stmt& s) {
  int64_t index = -1;
  bool ok = true;
  auto global = ctx_.globals.find(s.name);
  if (auto local = scope_.find(s.name); local != scope_.end()) {
    error(s.name_loc, fmt::format("only shared variables can be updated, but '{}' is a {}", s.name,
                                  local->second.kind == Binding::Kind::Param ? "parameter" : "let"));
    ok = false;
  } else if (global == ctx_.globals.end()) {
    error(s.name_loc, fmt::format("unknown shared variable '{}' in update", s.name));
    ok = false;
  } else if (global->second.kind != Global::Kind::Shared) {
    error(s.name_loc, fmt::format("only shared variables can be updated, but '{}' is {}", s.name,
                                  global_kind_text(global->second.kind)));
    ok = false;
  } else {
    index = global->second.index;
    if (auto seen = updates_seen_.find(index); seen != updates_seen_.end()) {
      const auto site = update_call_sites_.find(index);
      error(s.name_loc, checks::updated_twice_message(
                            s.name, "at " + loc_str(seen->second) +
                                        (site == update_call_sites_.end() ? std::string() : site->second)));
      ok = false;
    } else {
      updates_seen_.emplace(index, s.name_loc);
    }
    if (!ctx_.shared_ok[size_t(index)]) ok = false;
  }
  auto mode = resolve_mode(s, true);
  Value v = s.value ? expr(*s.value) : Value::error();
  if (!ok || !mode || v.failed()) return;
  const ir::SharedVar& var = ctx_.module.shareds[size_t(index)];
  if (v.is_literal()) {
    auto converted = convert(v, var.type.dtype, s.value->loc);
    if (!converted) return;
    v = *converted;
  }
  if (auto why = checks::update_type_error(s.name, var.type, v.type)) return error(s.value->loc, std::move(*why));
  if (auto why = checks::update_avg_error(s.name, var.type.dtype, *mode, checks::Spelling::Synk, !s.mode.empty()))
    return error(s.mode.empty() ? s.name_loc : s.mode_loc, std::move(*why));
  fn_.updates.push_back(ir::Update{index, v.node, *mode, s.name_loc});
  if (!s.optimizer.empty()) training_update(s, index, v);
}

void FunctionAnalyzer::statement(const ast::Stmt& s) {
  switch (s.kind) {
    case ast::StmtKind::Let: return s.more_names.empty() ? let_statement(s) : let_many_statement(s);
    case ast::StmtKind::Out: return out_statement(s);
    case ast::StmtKind::Update: return update_statement(s);
    case ast::StmtKind::Minimize: return minimize_statement(s);
    case ast::StmtKind::Return: return;   // only in helpers, whose calls evaluate it (call_helper)
  }
}

bool FunctionAnalyzer::run() {
  errors_at_start_ = ctx_.diags.error_count();
  declare_params();
  collect_symbols();
  check_scattered_symbols();
  for (const ast::Stmt& s : decl_.body) statement(s);
  check_training_conflicts();
  bool any_result = false;
  for (const ast::Stmt& s : decl_.body) any_result |= s.kind != ast::StmtKind::Let;
  // A body with syntax errors may have lost its out statements; do not add to that message.
  if (!any_result && !ctx_.syntax_errors)
    error(decl_.name_loc, checks::no_results_message(decl_.name));
  return !had_error_ && ctx_.diags.error_count() == errors_at_start_;
}

}  // namespace sema

std::optional<ir::Module> analyze(const ast::Program& program, DiagnosticEngine& diags,
                                  const std::string& base_dir, LoadFiles load_files) {
  size_t errors_before = diags.error_count();
  sema::ModuleContext ctx{diags, base_dir.empty() ? std::string(".") : base_dir, diags.has_errors(),
                          {}, {}, {}, {}, {}, {}, {}, {}};
  ctx.check_load_files = load_files == LoadFiles::Checked;
  for (const ast::SharedDecl& d : program.shareds) sema::analyze_shared(ctx, d);
  for (const ast::OptimizerDecl& d : program.optimizers) sema::analyze_optimizer(ctx, d);
  sema::declare_helpers(ctx, program.helpers);
  std::vector<bool> declared;
  for (const ast::FnDecl& f : program.functions)
    declared.push_back(sema::declare_global(ctx, f.name, f.name_loc,
                                            sema::Global{sema::Global::Kind::Function,
                                                         int64_t(declared.size()), f.name_loc}));
  for (const ast::FnDecl& f : program.functions) {
    sema::FunctionAnalyzer analyzer(ctx, f);
    if (analyzer.run()) {
      if (auto step = analyzer.train_step()) ctx.module.train_steps.push_back(*step);
      ctx.module.functions.push_back(analyzer.take());
    }
  }
  sema::check_training_names(ctx);
  if (diags.error_count() != errors_before || diags.has_errors()) return std::nullopt;
  std::vector<std::string> violations = ir::verify(ctx.module);
  if (!violations.empty()) {
    std::string all;
    for (const std::string& v : violations) all += "\n  " + v;
    internal_error("semantic analysis produced invalid IR:" + all);
  }
  return std::move(ctx.module);
}

}  // namespace synk::dsl
