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

// Resolves `f32[n, 10]`; reports an unknown or reserved dtype at the type.
std::optional<ir::TensorType> resolve_type_expr(const ast::TypeExpr& t, DiagnosticEngine& diags) {
  auto dtype = ir::dtype_from_name(t.dtype);
  if (!dtype) {
    diags.error(t.loc, fmt::format("unknown dtype '{}'; expected f32, f64, i32, i64, u8 or bool", t.dtype));
    return std::nullopt;
  }
  if (ir::is_reserved(*dtype)) {
    diags.error(t.loc, fmt::format("dtype '{}' is reserved and not supported yet; use f32 or f64", t.dtype));
    return std::nullopt;
  }
  ir::TensorType type{*dtype, {}};
  for (const ast::DimExpr& d : t.dims) {
    if (d.size) {
      if (*d.size < 0) {
        diags.error(d.loc, fmt::format("a dimension size must be 0 or more, found {}", *d.size));
        return std::nullopt;
      }
      type.shape.push_back(ir::Dim::fixed(*d.size));
    } else {
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

bool fits(double v, DType t) {
  if (ir::is_float(t)) return true;
  if (v != std::floor(v)) return false;
  switch (t) {
    case DType::Bool: return v == 0 || v == 1;
    case DType::U8: return v >= 0 && v <= 255;
    case DType::I32: return v >= -2147483648.0 && v <= 2147483647.0;
    default: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  }
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
    if (auto v = number_of(e)) return constant(*v, e.loc);
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
                                    "ones, a number, const(v), normal(...), uniform(...) or "
                                    "load(\"file.npy\")", expr_text(e), decl_.name));
  }

  std::optional<ir::Initializer> constant(double v, SourceLoc loc) {
    if (type_ && !fits(v, type_->dtype))
      return error(loc, fmt::format("initial value {} does not fit shared variable '{}' of dtype {}", v,
                                    decl_.name, ir::dtype_name(type_->dtype)));
    return ir::InitConstant{v};
  }

  std::optional<ir::Initializer> call_const(const ast::Expr& e) {
    if (!e.kwargs.empty())
      return error(e.kwargs[0].loc, fmt::format("const takes no keyword arguments, found '{}'", e.kwargs[0].name));
    if (e.args.size() != 1)
      return error(e.loc, fmt::format("const takes one number, as in const(0.5); found {} arguments", e.args.size()));
    auto v = number_of(*e.args[0]);
    if (!v) return error(e.args[0]->loc, fmt::format("const needs a number, found '{}'", expr_text(*e.args[0])));
    return constant(*v, e.args[0]->loc);
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
    if (normal && b < 0) {
      error(b_loc, fmt::format("std must be 0 or more, found {}", b));
      ok = false;
    }
    if (!normal && !(a < b)) {
      error(e.loc, fmt::format("uniform needs low < high, found low={} and high={}", a, b));
      ok = false;
    }
    if (ok && type_ && !ir::is_float(type_->dtype))
      return error(e.loc, fmt::format("{} initializes floating variables, but '{}' is {}", e.text,
                                      decl_.name, ir::dtype_name(type_->dtype)));
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
    std::filesystem::path full = std::filesystem::path(path).is_absolute()
                                     ? std::filesystem::path(path)
                                     : std::filesystem::path(ctx_.base_dir) / path;
    std::error_code ec;
    const bool embedded = is_embedded_npy(full.string());
    if (!embedded && std::filesystem::is_directory(full, ec))
      return error(e.args[0]->loc, fmt::format("\"{}\" is a directory, not an .npy file (looked at {})", path,
                                               full.string()));
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
    const std::string dims = fmt::format("{}", fmt::join(header->shape, ", "));
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
    ctx.diags.error(loc, fmt::format("'{}' is already declared at {}", name, loc_str(it->second.loc)));
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
    if (d.sliceable && (type->rank() == 0 || !type->shape[0].is_symbolic())) {
      ctx.diags.error(d.type.loc, fmt::format("sliceable shared variable '{}' holds rows and needs a "
                                              "symbolic row dimension (axis 0), like f32[rows, 10]; found {}",
                                              d.name, ir::type_str(*type)));
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
  had_error_ = true;
}

std::optional<ir::TensorType> FunctionAnalyzer::resolve_type(const ast::TypeExpr& t) {
  auto type = resolve_type_expr(t, ctx_.diags);
  if (!type) had_error_ = true;
  return type;
}

bool FunctionAnalyzer::check_local_name(const std::string& name, SourceLoc loc, const char* what) {
  if (auto it = scope_.find(name); it != scope_.end()) {
    error(loc, fmt::format("'{}' is already declared at {}", name, loc_str(it->second.loc)));
    return false;
  }
  if (auto it = ctx_.globals.find(name); it != ctx_.globals.end() && it->second.kind == Global::Kind::Shared) {
    error(loc, fmt::format("{} '{}' would shadow the shared variable declared at {}; choose another name",
                           what, name, loc_str(it->second.loc)));
    return false;
  }
  if (is_builtin_constant(name)) {
    error(loc, fmt::format("'{}' is a built-in constant and cannot name a {}", name, what));
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
      if (param.role != ir::Role::Broadcast && (type->rank() == 0 || !type->shape[0].is_symbolic())) {
        error(p.type.loc, fmt::format("{} parameter '{}' is split by rows and needs a symbolic row "
                                      "dimension (axis 0), like f32[n, 10]; found {}", p.role, p.name,
                                      ir::type_str(*type)));
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
  for (const ast::Stmt& s : decl_.body) {
    if (s.value) for_each_name(*s.value, [&](const ast::Expr& e) { note_shared(e.text, e.loc); });
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
  for (size_t i = 0; i < fn_.params.size(); ++i) {
    const ir::Param& p = fn_.params[i];
    if (p.role != ir::Role::Broadcast && !p.type.shape.empty() && p.type.shape[0].is_symbolic())
      scattered_.emplace(p.type.shape[0].symbol, fmt::format("axis 0 of {} parameter '{}'",
                                                             ir::role_name(p.role), p.name));
  }
  for (const auto& [index, loc] : used_shareds_) {
    const ir::SharedVar& s = ctx_.module.shareds[size_t(index)];
    if (s.sliceable && !s.type.shape.empty() && s.type.shape[0].is_symbolic())
      scattered_.emplace(s.type.shape[0].symbol, fmt::format("axis 0 of sliceable shared variable '{}'", s.name));
  }
  for (size_t i = 0; i < fn_.params.size(); ++i) {
    const ir::Param& p = fn_.params[i];
    const ast::ParamDecl& pd = decl_.params[i];
    for (size_t axis = 0; axis < p.type.shape.size() && axis < pd.type.dims.size(); ++axis) {
      const ir::Dim& d = p.type.shape[axis];
      if (!d.is_symbolic() || (axis == 0 && p.role != ir::Role::Broadcast)) continue;
      if (auto it = scattered_.find(d.symbol); it != scattered_.end())
        error(pd.type.dims[axis].loc,
              fmt::format("'{}' is a scattered row dimension ({}), so it cannot also size axis {} of {} "
                          "parameter '{}'; use another symbol", d.symbol, it->second, axis,
                          ir::role_name(p.role), p.name));
    }
  }
  for (const auto& [index, loc] : used_shareds_) {
    const ir::SharedVar& s = ctx_.module.shareds[size_t(index)];
    for (size_t axis = 0; axis < s.type.shape.size(); ++axis) {
      const ir::Dim& d = s.type.shape[axis];
      if (!d.is_symbolic() || (axis == 0 && s.sliceable)) continue;
      if (auto it = scattered_.find(d.symbol); it != scattered_.end())
        error(loc, fmt::format("'{}' is a scattered row dimension ({}), but shared variable '{}' of type "
                               "{} uses it for a dimension every rank holds whole", d.symbol, it->second,
                               s.name, ir::type_str(s.type)));
    }
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
  if (for_update && (*mode == ReduceMode::Gather || *mode == ReduceMode::None)) {
    error(s.mode_loc, fmt::format("an update accumulates over slices with avg, sum, prod, max or min; "
                                  "mode '{}' is for outputs only", s.mode));
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
  if (v.kind == Value::Kind::Node && v.node >= first_new && fn_.nodes[size_t(v.node)].name.empty())
    fn_.nodes[size_t(v.node)].name = s.name;
  if (v.is_literal()) v.let_name = s.name;
  if (!name_ok) return poison_name(s.name, s.name_loc);
  Binding b;
  b.kind = Binding::Kind::Let;
  b.value = std::move(v);
  b.loc = s.name_loc;
  scope_.emplace(s.name, std::move(b));
}

void FunctionAnalyzer::out_statement(const ast::Stmt& s) {
  bool ok = true;
  if (auto it = outputs_seen_.find(s.name); it != outputs_seen_.end()) {
    error(s.name_loc, fmt::format("output '{}' is already declared at {}", s.name, loc_str(it->second)));
    ok = false;
  } else {
    outputs_seen_.emplace(s.name, s.name_loc);
  }
  auto mode = resolve_mode(s, false);
  Value v = s.value ? expr(*s.value) : Value::error();
  if (v.is_literal()) v = materialize_default(v, s.value->loc);
  if (!mode || v.failed() || !ok) return;
  SourceLoc where = s.mode.empty() ? s.name_loc : s.mode_loc;
  if (*mode == ReduceMode::Avg && !ir::is_float(v.type.dtype)) {
    return error(where, fmt::format("output '{}' has dtype {}, which cannot be averaged{}; give it "
                                    "another mode, e.g. 'out {}: sum = ...' or 'out {}: gather = ...'",
                                    s.name, ir::dtype_name(v.type.dtype),
                                    s.mode.empty() ? " (avg is the default mode)" : "", s.name, s.name));
  }
  if (*mode != ReduceMode::Gather && *mode != ReduceMode::None) {
    for (const ir::Dim& d : v.type.shape) {
      if (!d.is_symbolic()) continue;
      if (auto it = scattered_.find(d.symbol); it != scattered_.end())
        return error(where, fmt::format("output '{}' has shape {}, which depends on the scattered row "
                                        "dimension '{}' ({}); use mode gather or none",
                                        s.name, ir::shape_str(v.type.shape), d.symbol, it->second));
    }
  }
  if (*mode == ReduceMode::Gather && v.type.rank() == 0)
    return error(where, fmt::format("output '{}' is a scalar, but mode gather concatenates along axis 0; "
                                    "use another mode or reshape(x, [1])", s.name));
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
    error(s.name_loc, fmt::format("only shared variables can be updated, but '{}' is a function", s.name));
    ok = false;
  } else {
    index = global->second.index;
    if (auto seen = updates_seen_.find(index); seen != updates_seen_.end()) {
      error(s.name_loc, fmt::format("'{}' is already updated at {}; a shared variable is updated at "
                                    "most once per function", s.name, loc_str(seen->second)));
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
  if (!(v.type == var.type))
    return error(s.value->loc, fmt::format("update of '{}' needs a value of type {} but this one has type {}",
                                           s.name, ir::type_str(var.type), ir::type_str(v.type)));
  if (*mode == ReduceMode::Avg && !ir::is_float(var.type.dtype))
    return error(s.mode.empty() ? s.name_loc : s.mode_loc,
                 fmt::format("update of '{}' has dtype {}, which cannot be averaged over slices{}; give "
                             "it another mode, e.g. 'update {}: sum = ...'", s.name,
                             ir::dtype_name(var.type.dtype),
                             s.mode.empty() ? " (avg is the default mode)" : "", s.name));
  fn_.updates.push_back(ir::Update{index, v.node, *mode, s.name_loc});
  if (!s.optimizer.empty()) training_update(s, index, v);
}

void FunctionAnalyzer::statement(const ast::Stmt& s) {
  switch (s.kind) {
    case ast::StmtKind::Let: return let_statement(s);
    case ast::StmtKind::Out: return out_statement(s);
    case ast::StmtKind::Update: return update_statement(s);
    case ast::StmtKind::Minimize: return minimize_statement(s);
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
    error(decl_.name_loc, fmt::format("function '{}' has no 'out' or 'update' statement, so it computes "
                                      "nothing", decl_.name));
  return !had_error_ && ctx_.diags.error_count() == errors_at_start_;
}

}  // namespace sema

std::optional<ir::Module> analyze(const ast::Program& program, DiagnosticEngine& diags,
                                  const std::string& base_dir) {
  size_t errors_before = diags.error_count();
  sema::ModuleContext ctx{diags, base_dir.empty() ? std::string(".") : base_dir, diags.has_errors(),
                          {}, {}, {}, {}, {}, {}};
  for (const ast::SharedDecl& d : program.shareds) sema::analyze_shared(ctx, d);
  for (const ast::OptimizerDecl& d : program.optimizers) sema::analyze_optimizer(ctx, d);
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
