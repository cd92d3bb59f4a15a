// The C++ expression builder's core: expression nodes and literals, typing through infer_type,
// writing trees into functions in sema's order, the let / out / update statements, parameters,
// shared variables and the final module with the checks only a whole function shows. The
// operation constructors are in builder_ops.cpp. Every check mirrors sema (dsl/sema*.cpp) so
// that a program is accepted or rejected the same way from C++ as from a .synk file.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/builder_internal.h"
#include "dsl/sema.h"
#include "dsl/sema_optimizer.h"
#include "ir/type_infer.h"

namespace synk::dsl {

using builder_detail::ExprNode;
using builder_detail::FunctionState;
using builder_detail::LiteralKind;
using builder_detail::ModuleState;
using builder_detail::Operand;
using ir::DType;
using ir::Op;

namespace {

std::atomic<uint64_t> next_serial{1};

constexpr const char* kKeywords[] = {"fn",      "shared",  "let",       "out",       "update", "scatter",
                                     "bcast",   "minibatch", "sliceable", "true",    "false"};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  for (const char* k : kKeywords)
    if (s == k) return false;
  return true;
}

void require_identifier(const std::string& name, const char* what) {
  if (!is_identifier(name))
    throw UserError(fmt::format("'{}' is not a valid {} name: use letters, digits and '_', not starting "
                                "with a digit, and not a keyword", name, what));
  if (sema::is_builtin_constant(name))
    throw UserError(fmt::format("'{}' is a built-in constant and cannot name a {}", name, what));
}

// Resolves a declared type: a dtype that is supported and sizes that are 0 or more.
ir::TensorType declared_type(DType dtype, const ShapeArg& shape) {
  if (ir::is_reserved(dtype))
    throw UserError(fmt::format("dtype '{}' is reserved and not supported yet; use f32 or f64", ir::dtype_name(dtype)));
  ir::TensorType t{dtype, {}};
  for (const DimArg& d : shape) {
    if (d.dim.is_symbolic()) {
      if (!is_identifier(d.dim.symbol))
        throw UserError(fmt::format("'{}' is not a valid dimension name", d.dim.symbol));
    } else if (d.dim.size < 0) {
      throw UserError(fmt::format("a dimension size must be 0 or more, found {}", d.dim.size));
    }
    t.shape.push_back(d.dim);
  }
  return t;
}

std::string literal_text(const ExprNode& n) {
  switch (n.literal) {
    case LiteralKind::Int: return std::to_string(n.ivalue);
    case LiteralKind::Bool: return n.ivalue ? "true" : "false";
    case LiteralKind::Float: return fmt::format("{}", n.fvalue);
  }
  return "?";
}

// Same initial-value rule as sema's shared-variable initializers.
bool value_fits(double v, DType t) {
  if (ir::is_float(t)) return true;
  if (v != std::floor(v)) return false;
  switch (t) {
    case DType::Bool: return v == 0 || v == 1;
    case DType::U8: return v >= 0 && v <= 255;
    case DType::I32: return v >= -2147483648.0 && v <= 2147483647.0;
    default: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  }
}

}  // namespace

// ---- Initializers -----------------------------------------------------------------------

namespace init {
ir::Initializer zeros() { return ir::InitZeros{}; }
ir::Initializer ones() { return ir::InitOnes{}; }
ir::Initializer constant(double value) { return ir::InitConstant{value}; }
ir::Initializer normal(uint64_t seed, double mean, double stddev) { return ir::InitNormal{seed, mean, stddev}; }
ir::Initializer uniform(uint64_t seed, double low, double high) { return ir::InitUniform{seed, low, high}; }
ir::Initializer load(std::string path) { return ir::InitLoad{std::move(path)}; }
}  // namespace init

namespace builder_detail {

// Releases long chains (a loop that adds 10^6 terms) without one stack frame per node.
ExprNode::~ExprNode() {
  std::vector<std::shared_ptr<const ExprNode>> pending;
  for (Operand& o : operands) pending.push_back(std::move(o.node));
  while (!pending.empty()) {
    std::shared_ptr<const ExprNode> n = std::move(pending.back());
    pending.pop_back();
    if (n && n.use_count() == 1) {
      auto& ops = const_cast<ExprNode&>(*n).operands;   // the last owner: nobody else can see it
      for (Operand& o : ops) pending.push_back(std::move(o.node));
      ops.clear();
    }
  }
}

std::shared_ptr<ModuleState> FunctionState::lock_module() const {
  auto m = module.lock();
  if (!m)
    throw UserError(fmt::format("the ModuleBuilder of function '{}' no longer exists", fn.name));
  return m;
}

void FunctionState::note_shared_use(int64_t index) {
  if (std::find(used_shareds.begin(), used_shareds.end(), index) == used_shareds.end())
    used_shareds.push_back(index);
}

const std::shared_ptr<const ExprNode>& require(const Expr& e, const char* op) {
  if (!e.valid()) throw UserError(fmt::format("{}: an operand is an empty Expr (default-constructed)", op));
  return e.node();
}

Expr make_literal(LiteralKind kind, int64_t ivalue, double fvalue) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::Literal;
  n->literal = kind;
  n->ivalue = ivalue;
  n->fvalue = fvalue;
  switch (kind) {
    case LiteralKind::Int: n->type = sema::int_literal(ivalue).type; break;
    case LiteralKind::Float: n->type = sema::float_literal(fvalue).type; break;
    case LiteralKind::Bool: n->type = sema::bool_literal(ivalue != 0).type; break;
  }
  return Expr(std::move(n));
}

void check_literal_fits(const ExprNode& literal, DType dtype) {
  switch (literal.literal) {
    case LiteralKind::Int:
      if (dtype == DType::Bool)
        throw UserError(fmt::format("integer {} cannot be used as a bool; use true or false", literal.ivalue));
      if (!ir::is_float(dtype)) {
        const int64_t v = literal.ivalue;
        const bool fits = dtype == DType::I64 || (dtype == DType::I32 && v >= INT32_MIN && v <= INT32_MAX) ||
                          (dtype == DType::U8 && v >= 0 && v <= 255);
        if (!fits) throw UserError(fmt::format("integer {} does not fit in {}", v, ir::dtype_name(dtype)));
      }
      return;
    case LiteralKind::Float:
      if (!ir::is_float(dtype))
        throw UserError(fmt::format("{} is not an integer but {} is needed here; use cast({}, {})",
                                    literal_text(literal), ir::dtype_name(dtype), literal_text(literal),
                                    ir::dtype_name(dtype)));
      return;
    case LiteralKind::Bool: return;
  }
}

DType weak_dtype(DType strong, LiteralKind kind) {
  switch (kind) {
    case LiteralKind::Int: return sema::weak_dtype(strong, sema::LiteralKind::Int);
    case LiteralKind::Float: return sema::weak_dtype(strong, sema::LiteralKind::Float);
    case LiteralKind::Bool: return sema::weak_dtype(strong, sema::LiteralKind::Bool);
  }
  return strong;
}

DType common_dtype(const std::vector<const ExprNode*>& operands) {
  std::optional<DType> strong;
  for (const ExprNode* n : operands)
    if (n->kind != ExprNode::Kind::Literal) strong = strong ? promote(*strong, n->type.dtype) : n->type.dtype;
  if (!strong) {
    for (const ExprNode* n : operands) strong = strong ? promote(*strong, n->type.dtype) : n->type.dtype;
    return *strong;
  }
  DType result = *strong;
  for (const ExprNode* n : operands)
    if (n->kind == ExprNode::Kind::Literal) result = weak_dtype(result, n->literal);
  return result;
}

std::string describe(const ExprNode& node) {
  if (node.kind == ExprNode::Kind::Literal) return fmt::format("the literal {}", literal_text(node));
  return ir::type_str(node.type);
}

Expr make_op(Op op, std::vector<Operand> operands, ir::Attrs attrs, const ir::TensorType* requested,
             std::vector<std::string> shape_symbols) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::Op;
  n->op = op;
  std::vector<ir::TensorType> types;
  std::vector<std::string> described;
  for (const Operand& o : operands) {
    const ExprNode& x = *o.node;
    if (x.kind == ExprNode::Kind::Literal) check_literal_fits(x, o.dtype);
    types.push_back(ir::TensorType{o.dtype, x.kind == ExprNode::Kind::Literal ? ir::Shape{} : x.type.shape});
    described.push_back(ir::type_str(types.back()));
    if (x.function) {
      if (n->function && n->function != x.function)
        throw UserError(fmt::format("{}: its operands come from different functions ('{}' and '{}'); an "
                                    "expression belongs to the function of its parameters",
                                    ir::op_name(op), n->function->fn.name, x.function->fn.name));
      n->function = x.function;
    }
    if (x.module_id != 0) {
      if (n->module_id != 0 && n->module_id != x.module_id)
        throw UserError(fmt::format("{}: its operands come from different ModuleBuilders", ir::op_name(op)));
      n->module_id = x.module_id;
    }
  }
  InferResult r = infer_type(op, types, attrs, requested);
  if (!r.ok()) {
    std::string where = n->function ? fmt::format(" in function '{}'", n->function->fn.name) : "";
    throw UserError(fmt::format("{}({}){}: {}", ir::op_name(op), fmt::join(described, ", "), where, r.error));
  }
  n->type = *r.type;
  n->attrs = std::move(attrs);
  n->operands = std::move(operands);
  n->shape_symbols = std::move(shape_symbols);
  return Expr(std::move(n));
}

Expr make_typed_constant(const ExprNode& literal, DType dtype) {
  check_literal_fits(literal, dtype);
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::Op;
  n->op = Op::Constant;
  n->type = ir::TensorType{dtype, {}};
  if (literal.literal == LiteralKind::Float) n->attrs.value = literal.fvalue;
  else if (ir::is_float(dtype)) n->attrs.value = double(literal.ivalue);
  else n->attrs.ivalue = literal.ivalue;
  return Expr(std::move(n));
}

namespace {

// Writes expression trees into one function, in sema's order (see builder_internal.h). Works
// with an explicit stack so that very deep trees cannot overflow the C++ stack.
class Emitter {
 public:
  explicit Emitter(FunctionState& f) : f_(f) {}

  // A literal on its own becomes a Constant of `dtype` (sema's convert), cached when it is named.
  ir::NodeId emit_literal(const ExprNode& literal, DType dtype) { return constant(literal, dtype); }

  ir::NodeId emit(const ExprNode& root) {
    if (root.kind == ExprNode::Kind::Literal) return constant(root, root.type.dtype);
    if (auto id = done(root)) return *id;
    struct Frame {
      const ExprNode* node;
      size_t next = 0;
      std::vector<ir::NodeId> ids;
    };
    std::vector<Frame> stack;
    stack.push_back(Frame{&root, 0, {}});
    ir::NodeId result = -1;
    while (!stack.empty()) {
      Frame& fr = stack.back();
      const ExprNode& n = *fr.node;
      if (fr.next < n.operands.size()) {
        const Operand& o = n.operands[fr.next];
        const ExprNode& child = *o.node;
        if (child.kind == ExprNode::Kind::Literal) {
          fr.ids.push_back(o.immediate ? constant(child, o.dtype) : -1);
          ++fr.next;
        } else if (auto id = done(child)) {
          fr.ids.push_back(*id);
          ++fr.next;
        } else {
          stack.push_back(Frame{&child, 0, {}});
        }
        continue;
      }
      // Every operand is evaluated: convert the deferred ones in order, then the op itself.
      for (size_t i = 0; i < n.operands.size(); ++i) {
        const Operand& o = n.operands[i];
        if (o.immediate) continue;
        if (o.node->kind == ExprNode::Kind::Literal) {
          fr.ids[i] = constant(*o.node, o.dtype);
        } else if (o.node->type.dtype != o.dtype) {
          fr.ids[i] = add(Op::Cast, {fr.ids[i]}, {}, ir::TensorType{o.dtype, o.node->type.shape});
        }
      }
      const ir::NodeId id = add(n.op, std::move(fr.ids), n.attrs, n.type);
      for (const std::string& s : n.shape_symbols) f_.shape_symbols.emplace_back(s, ir::op_name(n.op));
      n.emitted[{f_.serial, -1}] = id;
      stack.pop_back();
      if (stack.empty()) {
        result = id;
      } else {
        stack.back().ids.push_back(id);
        ++stack.back().next;
      }
    }
    return result;
  }

 private:
  // The node already written for a leaf or op (making a leaf's node now), or nullopt.
  std::optional<ir::NodeId> done(const ExprNode& n) {
    switch (n.kind) {
      case ExprNode::Kind::Param: {
        if (auto it = n.emitted.find({f_.serial, -1}); it != n.emitted.end()) return it->second;
        ir::Attrs a;
        a.index = n.index;
        const ir::NodeId id = add(Op::Input, {}, a, n.type, n.name);
        n.emitted[{f_.serial, -1}] = id;
        return id;
      }
      case ExprNode::Kind::Shared: {
        f_.note_shared_use(n.index);
        if (auto it = f_.shared_reads.find(n.index); it != f_.shared_reads.end()) return it->second;
        ir::Attrs a;
        a.index = n.index;
        const ir::NodeId id = add(Op::SharedRead, {}, a, n.type, n.name);
        f_.shared_reads.emplace(n.index, id);
        return id;
      }
      case ExprNode::Kind::Op:
        if (auto it = n.emitted.find({f_.serial, -1}); it != n.emitted.end()) return it->second;
        return std::nullopt;
      case ExprNode::Kind::Literal: break;
    }
    return std::nullopt;
  }

  ir::NodeId constant(const ExprNode& literal, DType dtype) {
    const bool named = !literal.let_name.empty();
    if (named)
      if (auto it = literal.emitted.find({f_.serial, int(dtype)}); it != literal.emitted.end()) return it->second;
    check_literal_fits(literal, dtype);
    ir::Attrs a;
    switch (literal.literal) {
      case LiteralKind::Int:
        if (ir::is_float(dtype)) a.value = double(literal.ivalue);
        else a.ivalue = literal.ivalue;
        break;
      case LiteralKind::Float: a.value = literal.fvalue; break;
      case LiteralKind::Bool:
        if (ir::is_float(dtype)) a.value = double(literal.ivalue);
        else a.ivalue = literal.ivalue;
        break;
    }
    const ir::NodeId id = add(Op::Constant, {}, a, ir::TensorType{dtype, {}}, literal.let_name);
    if (named) literal.emitted[{f_.serial, int(dtype)}] = id;
    return id;
  }

  ir::NodeId add(Op op, std::vector<ir::NodeId> operands, ir::Attrs attrs, ir::TensorType type,
                 std::string name = {}) {
    ir::Node node;
    node.op = op;
    node.type = std::move(type);
    node.operands = std::move(operands);
    node.attrs = std::move(attrs);
    node.name = std::move(name);
    return f_.fn.add(std::move(node));
  }

  FunctionState& f_;
};

// A statement may only use trees of its own function and module.
void check_belongs(const FunctionState& f, const ExprNode& n, const char* statement, const std::string& name) {
  if (n.function && n.function.get() != &f)
    throw UserError(fmt::format("{} '{}' of function '{}' uses an expression of function '{}'; each "
                                "function has its own parameters", statement, name, f.fn.name,
                                n.function->fn.name));
  if (n.module_id != 0 && n.module_id != f.module_id)
    throw UserError(fmt::format("{} '{}' of function '{}' uses a shared variable of another ModuleBuilder",
                                statement, name, f.fn.name));
}

// The Expr of shared variable `index` of module `m` (what ModuleBuilder::shared returns).
Expr shared_expr(const ModuleState& m, int64_t index) {
  const ir::SharedVar& var = m.shareds.at(size_t(index));
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::Shared;
  n->type = var.type;
  n->index = index;
  n->name = var.name;
  n->module_id = m.id;
  return Expr(std::move(n));
}

}  // namespace
}  // namespace builder_detail

using builder_detail::check_belongs;
using builder_detail::shared_expr;
using builder_detail::Emitter;

// ---- Expr -------------------------------------------------------------------------------

Expr::Expr(bool value) : Expr(builder_detail::make_literal(LiteralKind::Bool, value ? 1 : 0, 0)) {}
Expr::Expr(double value) : Expr(builder_detail::make_literal(LiteralKind::Float, 0, value)) {}
Expr Expr::make_int(int64_t value) { return builder_detail::make_literal(LiteralKind::Int, value, 0); }

const ir::TensorType& Expr::type() const { return builder_detail::require(*this, "type")->type; }
bool Expr::is_literal() const { return valid() && node_->kind == ExprNode::Kind::Literal; }
bool Expr::is_shared() const { return valid() && node_->kind == ExprNode::Kind::Shared; }
std::string Expr::str() const {
  if (!valid()) return "<empty Expr>";
  return node_->kind == ExprNode::Kind::Literal ? literal_text(*node_) : ir::type_str(node_->type);
}

// ---- FunctionBuilder ----------------------------------------------------------------------

const std::string& FunctionBuilder::name() const { return state_->fn.name; }

namespace {

// sema's check_local_name, against the shared variables declared so far (build() checks again
// against all of them).
void check_local_name(FunctionState& f, const std::string& name, const char* what) {
  require_identifier(name, what);
  if (f.locals.count(name))
    throw UserError(fmt::format("'{}' is already declared in function '{}'", name, f.fn.name));
  auto m = f.lock_module();
  if (auto it = m->globals.find(name); it != m->globals.end() && it->second == "shared variable")
    throw UserError(fmt::format("{} '{}' would shadow the shared variable '{}'; choose another name", what,
                                name, name));
}

}  // namespace

Expr FunctionBuilder::param(ir::Role role, const std::string& name, DType dtype, ShapeArg shape) {
  FunctionState& f = *state_;
  ir::TensorType type = declared_type(dtype, shape);
  if (role != ir::Role::Broadcast && (type.rank() == 0 || !type.shape[0].is_symbolic()))
    throw UserError(fmt::format("{} parameter '{}' is split by rows and needs a symbolic row dimension "
                                "(axis 0), like f32[n, 10]; found {}", ir::role_name(role), name,
                                ir::type_str(type)));
  check_local_name(f, name, "parameter");
  f.locals.emplace(name, "parameter");
  f.fn.params.push_back(ir::Param{name, role, type, {}});
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::Param;
  n->type = type;
  n->index = int64_t(f.fn.params.size() - 1);
  n->name = name;
  n->function = state_;
  n->module_id = f.module_id;
  return Expr(std::move(n));
}

Expr FunctionBuilder::scatter(const std::string& name, DType dtype, ShapeArg shape) {
  return param(ir::Role::Scatter, name, dtype, std::move(shape));
}
Expr FunctionBuilder::bcast(const std::string& name, DType dtype, ShapeArg shape) {
  return param(ir::Role::Broadcast, name, dtype, std::move(shape));
}
Expr FunctionBuilder::minibatch(const std::string& name, DType dtype, ShapeArg shape) {
  return param(ir::Role::Minibatch, name, dtype, std::move(shape));
}

Expr FunctionBuilder::let(const std::string& name, const Expr& value) {
  FunctionState& f = *state_;
  const ExprNode& v = *builder_detail::require(value, "let");
  check_local_name(f, name, "let");
  check_belongs(f, v, "let", name);
  if (v.kind == ExprNode::Kind::Literal) {
    // As in sema, a literal stays weak; its Constants (one per dtype used) carry the name.
    Expr named = builder_detail::make_literal(v.literal, v.ivalue, v.fvalue);
    const_cast<ExprNode&>(*named.node()).let_name = name;
    f.locals.emplace(name, "let");
    return named;
  }
  const ir::NodeId first_new = ir::NodeId(f.fn.nodes.size());
  const ir::NodeId id = Emitter(f).emit(v);
  if (id >= first_new && f.fn.nodes[size_t(id)].name.empty()) f.fn.nodes[size_t(id)].name = name;
  f.locals.emplace(name, "let");
  return value;
}

void FunctionBuilder::out(const std::string& name, const Expr& value, ir::ReduceMode mode) {
  FunctionState& f = *state_;
  const ExprNode& v = *builder_detail::require(value, "out");
  require_identifier(name, "output");
  if (f.output_names.count(name))
    throw UserError(fmt::format("output '{}' is already declared in function '{}'", name, f.fn.name));
  check_belongs(f, v, "output", name);
  const ir::TensorType& type = v.type;   // a literal: its default type, as sema materializes it
  if (mode == ir::ReduceMode::Avg && !ir::is_float(type.dtype))
    throw UserError(fmt::format("output '{}' has dtype {}, which cannot be averaged (avg is the default "
                                "mode); give it another mode, e.g. ReduceMode::Sum or ReduceMode::Gather",
                                name, ir::dtype_name(type.dtype)));
  if (mode == ir::ReduceMode::Gather && type.rank() == 0)
    throw UserError(fmt::format("output '{}' is a scalar, but mode gather concatenates along axis 0; use "
                                "another mode or reshape(x, {{1}})", name));
  const ir::NodeId id = Emitter(f).emit(v);
  f.output_names.insert(name);
  f.outputs.push_back(builder_detail::OutputInfo{name, type, mode});
  f.fn.outputs.push_back(ir::Output{name, id, mode, {}});
}

void FunctionBuilder::update(const Expr& shared, const Expr& value, ir::ReduceMode mode) {
  FunctionState& f = *state_;
  const ExprNode& s = *builder_detail::require(shared, "update");
  const ExprNode& v = *builder_detail::require(value, "update");
  if (s.kind != ExprNode::Kind::Shared)
    throw UserError(fmt::format("only shared variables can be updated, but the target in function '{}' is {}{}",
                                f.fn.name, builder_detail::describe(s),
                                s.kind == ExprNode::Kind::Param ? fmt::format(" (parameter '{}')", s.name) : ""));
  check_belongs(f, s, "update", s.name);
  check_belongs(f, v, "update", s.name);
  if (f.updated.count(s.index))
    throw UserError(fmt::format("'{}' is already updated in function '{}'; a shared variable is updated at "
                                "most once per function", s.name, f.fn.name));
  if (mode == ir::ReduceMode::Gather || mode == ir::ReduceMode::None)
    throw UserError(fmt::format("an update accumulates over slices with avg, sum, prod, max or min; mode "
                                "'{}' is for outputs only", ir::mode_name(mode)));
  ir::TensorType type = v.type;
  if (v.kind == ExprNode::Kind::Literal) {
    builder_detail::check_literal_fits(v, s.type.dtype);
    type = ir::TensorType{s.type.dtype, {}};
  }
  if (!(type == s.type))
    throw UserError(fmt::format("update of '{}' needs a value of type {} but this one has type {}", s.name,
                                ir::type_str(s.type), ir::type_str(type)));
  if (mode == ir::ReduceMode::Avg && !ir::is_float(s.type.dtype))
    throw UserError(fmt::format("update of '{}' has dtype {}, which cannot be averaged over slices (avg is "
                                "the default mode); give it another mode, e.g. ReduceMode::Sum", s.name,
                                ir::dtype_name(s.type.dtype)));
  f.note_shared_use(s.index);
  Emitter emitter(f);
  const ir::NodeId id = v.kind == ExprNode::Kind::Literal ? emitter.emit_literal(v, s.type.dtype) : emitter.emit(v);
  f.updated.insert(s.index);
  f.fn.updates.push_back(ir::Update{s.index, id, mode, {}});
}

void FunctionBuilder::minimize(const Expr& loss, std::vector<Expr> variables, const std::string& optimizer) {
  FunctionState& f = *state_;
  std::shared_ptr<ModuleState> m = f.lock_module();
  if (f.train_step)
    throw UserError(fmt::format("function '{}' already has a training step; a function minimizes one loss", f.fn.name));
  auto global = m->globals.find(optimizer);
  if (global == m->globals.end())
    throw UserError(fmt::format("unknown optimizer '{}' (declare one first, e.g. ModuleBuilder::optimizer(\"{}\", "
                                "\"momentum\", {{{{\"lr\", 0.05}}}}))", optimizer, optimizer));
  if (global->second != "optimizer")
    throw UserError(fmt::format("'{}' is a {}, not an optimizer", optimizer, global->second));
  const auto found = std::find_if(m->optimizers.begin(), m->optimizers.end(),
                                  [&](const ir::Optimizer& o) { return o.name == optimizer; });
  const int64_t index = int64_t(found - m->optimizers.begin());

  // The same checks, in the same order, as sema's minimize statement; all of them before the
  // module changes (a statement that throws leaves the builders as they were).
  Expr gradient = grad(loss, variables);
  check_belongs(f, *gradient.node(), "minimize using", optimizer);
  std::vector<int64_t> parameters;
  DType dtype = DType::F32;
  int64_t size = 0;
  for (size_t i = 0; i < variables.size(); ++i) {
    const ExprNode& v = *variables[i].node();
    const ElementCount count = element_count(v.type.shape);
    if (!count.symbols.empty())
      throw UserError(fmt::format("minimize trains variables of static shape, but '{}' is {}", v.name,
                                  ir::type_str(v.type)));
    parameters.push_back(v.index);
    size += count.fixed;
    dtype = i == 0 ? v.type.dtype : promote(dtype, v.type.dtype);
  }
  if (loss.dtype() != dtype)
    throw UserError(fmt::format("the loss of minimize is {} but the variables' dtype is {}: the flat gradient must "
                                "have the variables' dtype; use cast(loss, {})", ir::dtype_name(loss.dtype()),
                                ir::dtype_name(dtype), ir::dtype_name(dtype)));

  // The optimizer's flat gradient variable: made by the first step that uses the optimizer.
  ir::Optimizer& o = m->optimizers[size_t(index)];
  auto names = [&](const std::vector<int64_t>& indices) {
    std::vector<std::string> out;
    for (int64_t i : indices) out.push_back(m->shareds[size_t(i)].name);
    return fmt::format("{}", fmt::join(out, ", "));
  };
  const ir::TensorType flat{dtype, {ir::Dim::fixed(size)}};
  const std::string gradient_name = o.gradient_variable();
  int64_t existing = -1;   // the gradient variable, when it exists already
  if (o.gradient >= 0) {
    if (o.parameters != parameters)
      throw UserError(fmt::format("optimizer '{}' already trains {}; every step that uses it must train the same "
                                  "variables in the same order, not {}", o.name, names(o.parameters),
                                  names(parameters)));
    existing = o.gradient;
  } else if (auto g = m->globals.find(gradient_name); g != m->globals.end()) {
    auto it = std::find_if(m->shareds.begin(), m->shareds.end(),
                           [&](const ir::SharedVar& v) { return v.name == gradient_name; });
    const bool fits = it != m->shareds.end() && it->type == flat && !it->sliceable;
    if (!fits)
      throw UserError(fmt::format("optimizer '{}' keeps the flat gradient in the shared variable '{}: {}', but '{}' "
                                  "is already a {}; rename it", o.name, gradient_name, ir::type_str(flat),
                                  gradient_name, g->second));
    existing = int64_t(it - m->shareds.begin());
  }
  if (existing >= 0 && f.updated.count(existing))
    throw UserError(fmt::format("'{}' is already updated in function '{}'; minimize writes the gradient there",
                                gradient_name, f.fn.name));
  // Everything is checked: bind the optimizer (making its gradient variable on first use).
  if (existing < 0) {
    m->globals.emplace(gradient_name, "shared variable");
    m->shareds.push_back(ir::SharedVar{gradient_name, flat, ir::InitZeros{}, false, {}});
    existing = int64_t(m->shareds.size() - 1);
  }
  o.gradient = existing;
  o.parameters = parameters;
  if (!(gradient.type() == flat)) gradient = gradient.reshape({size});   // one variable: grad has its shape
  update(shared_expr(*m, o.gradient), gradient, ir::ReduceMode::Avg);
  f.train_step = ir::TrainStep{f.fn.name, index, {}};
  f.trained = parameters;
}

// ---- ModuleBuilder --------------------------------------------------------------------------

ModuleBuilder::ModuleBuilder() : state_(std::make_shared<ModuleState>()) { state_->id = next_serial++; }

namespace {

void declare_global(ModuleState& m, const std::string& name, const char* what) {
  require_identifier(name, what);
  if (auto it = m.globals.find(name); it != m.globals.end())
    throw UserError(fmt::format("'{}' is already declared as a {}", name, it->second));
  m.globals.emplace(name, what);
}

void check_initializer(const std::string& name, const ir::TensorType& type, const ir::Initializer& init) {
  auto finite = [&](double v, const char* what) {
    if (!std::isfinite(v)) throw UserError(fmt::format("{} must be a finite number, found {}", what, v));
  };
  if (auto* c = std::get_if<ir::InitConstant>(&init)) {
    if (!value_fits(c->value, type.dtype))
      throw UserError(fmt::format("initial value {} does not fit shared variable '{}' of dtype {}", c->value,
                                  name, ir::dtype_name(type.dtype)));
    return;
  }
  const bool normal = std::holds_alternative<ir::InitNormal>(init);
  if (normal || std::holds_alternative<ir::InitUniform>(init)) {
    const char* kind = normal ? "normal" : "uniform";
    uint64_t seed = normal ? std::get<ir::InitNormal>(init).seed : std::get<ir::InitUniform>(init).seed;
    if (seed > uint64_t(INT64_MAX))
      throw UserError(fmt::format("{}'s seed must be at most 2^63-1, found {}", kind, seed));
    if (!ir::is_float(type.dtype))
      throw UserError(fmt::format("{} initializes floating variables, but '{}' is {}", kind, name,
                                  ir::dtype_name(type.dtype)));
    if (normal) {
      const auto& n = std::get<ir::InitNormal>(init);
      finite(n.mean, "mean");
      finite(n.stddev, "std");
      if (n.stddev < 0) throw UserError(fmt::format("std must be 0 or more, found {}", n.stddev));
    } else {
      const auto& u = std::get<ir::InitUniform>(init);
      finite(u.low, "low");
      finite(u.high, "high");
      if (!(u.low < u.high))
        throw UserError(fmt::format("uniform needs low < high, found low={} and high={}", u.low, u.high));
    }
    return;
  }
  if (auto* l = std::get_if<ir::InitLoad>(&init); l && l->path.empty())
    throw UserError(fmt::format("load needs a file name for shared variable '{}'", name));
}

}  // namespace

Expr ModuleBuilder::shared(const std::string& name, DType dtype, ShapeArg shape, ir::Initializer init,
                           bool sliceable) {
  ModuleState& m = *state_;
  ir::TensorType type = declared_type(dtype, shape);
  if (sliceable && (type.rank() == 0 || !type.shape[0].is_symbolic()))
    throw UserError(fmt::format("sliceable shared variable '{}' holds rows and needs a symbolic row "
                                "dimension (axis 0), like f32[rows, 10]; found {}", name, ir::type_str(type)));
  check_initializer(name, type, init);
  declare_global(m, name, "shared variable");
  m.shareds.push_back(ir::SharedVar{name, type, std::move(init), sliceable, {}});
  return shared_expr(m, int64_t(m.shareds.size() - 1));
}

FunctionBuilder ModuleBuilder::function(const std::string& name) {
  declare_global(*state_, name, "function");
  auto f = std::make_shared<FunctionState>();
  f->serial = next_serial++;
  f->module_id = state_->id;
  f->module = state_;
  f->fn.name = name;
  state_->functions.push_back(f);
  return FunctionBuilder(f);
}

void ModuleBuilder::optimizer(const std::string& name, const std::string& rule,
                              const std::vector<std::pair<std::string, double>>& hyper_parameters) {
  ModuleState& m = *state_;
  require_identifier(name, "optimizer");
  if (auto it = m.globals.find(name); it != m.globals.end())
    throw UserError(fmt::format("'{}' is already declared as a {}", name, it->second));
  if (!update_rule_from_name(rule))
    throw UserError(fmt::format("optimizer '{}': unknown update rule '{}' (known rules: {})", name, rule,
                                fmt::join(update_rule_names(), ", ")));
  ir::Optimizer opt;
  opt.name = name;
  opt.rule = rule;
  for (const auto& [keyword, value] : hyper_parameters) {
    if (keyword == "num_packs") {   // the step's all-reduce, not the rule's
      if (!(value >= 1 && value <= double(INT32_MAX) && value == std::floor(value)))
        throw UserError(fmt::format("optimizer '{}': num_packs must be an integer >= 1 (the number of buffers the "
                                    "gradient's all-reduce uses)", name));
      opt.num_packs = int64_t(value);
      continue;
    }
    // One keyword at a time, so that the message names the keyword that is wrong, as sema's does.
    if (std::optional<std::string> why = hyper_parameter_error(rule, keyword, value))
      throw UserError(fmt::format("optimizer '{}': {}", name, *why));
    opt.hyper_parameters.emplace_back(keyword, value);
  }
  try {
    make_update_rule(rule, opt.hyper_parameters);
  } catch (const UserError& e) {
    throw UserError(fmt::format("optimizer '{}': {}", name, e.what()));
  }
  m.globals.emplace(name, "optimizer");
  m.optimizers.push_back(std::move(opt));
}

namespace {

// What only the whole function shows (sema's check_scattered_symbols, the scattered-row rule
// for outputs, the symbols of reshape targets, at least one result), against the final module.
void check_function(const ModuleState& m, const FunctionState& f) {
  const ir::Function& fn = f.fn;
  if (fn.outputs.empty() && fn.updates.empty())
    throw UserError(fmt::format("function '{}' has no 'out' or 'update' statement, so it computes nothing", fn.name));
  for (int64_t p : f.trained)
    if (f.updated.count(p) && p != m.optimizers[size_t(f.train_step->optimizer)].gradient)
      throw UserError(fmt::format("'{}' is trained by the step of function '{}' (its optimizer updates it after the "
                                  "gradient is averaged), so '{}' cannot also update it", m.shareds[size_t(p)].name,
                                  fn.name, fn.name));
  for (const auto& [name, what] : f.locals)
    if (auto it = m.globals.find(name); it != m.globals.end() && it->second == "shared variable")
      throw UserError(fmt::format("{} '{}' of function '{}' would shadow the shared variable '{}'; choose "
                                  "another name", what, name, fn.name, name));

  std::vector<int64_t> used = f.used_shareds;
  std::sort(used.begin(), used.end());
  std::map<std::string, std::string> scattered;   // row symbol -> what scatters it
  for (const ir::Param& p : fn.params)
    if (p.role != ir::Role::Broadcast && !p.type.shape.empty() && p.type.shape[0].is_symbolic())
      scattered.emplace(p.type.shape[0].symbol,
                        fmt::format("axis 0 of {} parameter '{}'", ir::role_name(p.role), p.name));
  for (int64_t index : used) {
    const ir::SharedVar& s = m.shareds[size_t(index)];
    if (s.sliceable && !s.type.shape.empty() && s.type.shape[0].is_symbolic())
      scattered.emplace(s.type.shape[0].symbol, fmt::format("axis 0 of sliceable shared variable '{}'", s.name));
  }
  for (const ir::Param& p : fn.params)
    for (size_t axis = 0; axis < p.type.shape.size(); ++axis) {
      const ir::Dim& d = p.type.shape[axis];
      if (!d.is_symbolic() || (axis == 0 && p.role != ir::Role::Broadcast)) continue;
      if (auto it = scattered.find(d.symbol); it != scattered.end())
        throw UserError(fmt::format("'{}' is a scattered row dimension ({}), so it cannot also size axis {} "
                                    "of {} parameter '{}'; use another symbol", d.symbol, it->second, axis,
                                    ir::role_name(p.role), p.name));
    }
  for (int64_t index : used) {
    const ir::SharedVar& s = m.shareds[size_t(index)];
    for (size_t axis = 0; axis < s.type.shape.size(); ++axis) {
      const ir::Dim& d = s.type.shape[axis];
      if (!d.is_symbolic() || (axis == 0 && s.sliceable)) continue;
      if (auto it = scattered.find(d.symbol); it != scattered.end())
        throw UserError(fmt::format("'{}' is a scattered row dimension ({}), but shared variable '{}' of type "
                                    "{} uses it for a dimension every rank holds whole", d.symbol, it->second,
                                    s.name, ir::type_str(s.type)));
    }
  }
  for (const builder_detail::OutputInfo& o : f.outputs) {
    if (o.mode == ir::ReduceMode::Gather || o.mode == ir::ReduceMode::None) continue;
    for (const ir::Dim& d : o.type.shape)
      if (d.is_symbolic())
        if (auto it = scattered.find(d.symbol); it != scattered.end())
          throw UserError(fmt::format("output '{}' of function '{}' has shape {}, which depends on the "
                                      "scattered row dimension '{}' ({}); use mode gather or none", o.name,
                                      fn.name, ir::shape_str(o.type.shape), d.symbol, it->second));
  }

  std::set<std::string> symbols;
  for (const ir::Param& p : fn.params)
    for (const ir::Dim& d : p.type.shape)
      if (d.is_symbolic()) symbols.insert(d.symbol);
  for (int64_t index : used)
    for (const ir::Dim& d : m.shareds[size_t(index)].type.shape)
      if (d.is_symbolic()) symbols.insert(d.symbol);
  for (const auto& [symbol, op] : f.shape_symbols)
    if (!symbols.count(symbol))
      throw UserError(fmt::format("unknown dimension '{}' in {} of function '{}'; {}", symbol, op, fn.name,
                                  symbols.empty() ? "this function has no symbolic dimensions"
                                                  : fmt::format("the dimensions of this function are {}",
                                                                fmt::join(symbols, ", "))));
}

// The names jit::compile's expansion adds for every optimizer some step uses (its update
// function and state) must be free: sema's check_training_names.
void check_training_names(const ModuleState& m) {
  std::map<std::string, size_t> added;
  for (size_t i = 0; i < m.optimizers.size(); ++i) {
    const ir::Optimizer& o = m.optimizers[i];
    if (o.gradient < 0) continue;
    for (const std::string& name : names_added_by(o, m.shareds)) {
      std::string clash;
      if (auto g = m.globals.find(name); g != m.globals.end()) clash = "a " + g->second;
      else if (auto a = added.find(name); a != added.end())
        clash = fmt::format("what optimizer '{}' adds too", m.optimizers[a->second].name);
      if (!clash.empty())
        throw UserError(fmt::format("optimizer '{}' ({}) adds '{}' for its update function and state, but '{}' is "
                                    "{}; rename one of them", o.name, o.rule, name, name, clash));
      added.emplace(name, i);
    }
  }
}

}  // namespace

ir::Module ModuleBuilder::build() const {
  const ModuleState& m = *state_;
  ir::Module module;
  module.shareds = m.shareds;
  for (const auto& f : m.functions) {
    check_function(m, *f);
    module.functions.push_back(f->fn);
    if (f->train_step) module.train_steps.push_back(*f->train_step);
  }
  module.optimizers = m.optimizers;
  check_training_names(m);
  std::vector<std::string> violations = ir::verify(module);
  if (!violations.empty())
    internal_error(fmt::format("the C++ builder produced invalid IR:\n  {}", fmt::join(violations, "\n  ")));
  return module;
}

}  // namespace synk::dsl
