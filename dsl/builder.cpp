// The C++ expression builder's core: expression nodes and literals, typing through infer_type,
// writing trees into functions in sema's order, the let / out / update statements, parameters,
// shared variables and the final module with the checks only a whole function shows. The
// operation constructors are in builder_ops.cpp. The rules it checks are sema's (dsl/checks.h,
// in sema's order) so that a program is accepted or rejected the same way from C++ as from a
// .synk file.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/builder_internal.h"
#include "dsl/checks.h"
#include "dsl/sema.h"
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

// A check's verdict as the builder reports it.
void throw_if_error(std::optional<std::string> error) {
  if (error) throw UserError(std::move(*error));
}

// Where something is, in messages: the builder has functions' names, not source locations.
std::string in_function(const std::string& function) { return fmt::format("in function '{}'", function); }
std::string of_function(const std::string& function) { return fmt::format(" of function '{}'", function); }
std::string quoted(const std::string& name) { return fmt::format("'{}'", name); }

// Resolves a declared type: a dtype that is supported and sizes that are 0 or more.
ir::TensorType declared_type(DType dtype, const ShapeArg& shape) {
  throw_if_error(checks::reserved_dtype_error(dtype));
  ir::TensorType t{dtype, {}};
  for (const DimArg& d : shape) {
    throw_if_error(d.dim.is_symbolic() ? checks::dimension_name_error(d.dim.symbol)
                                       : checks::dimension_size_error(d.dim.size));
    t.shape.push_back(d.dim);
  }
  return t;
}

std::string literal_text(const ExprNode& n) { return checks::literal_text(n.literal, n.ivalue, n.fvalue); }

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
  throw_if_error(checks::literal_error(literal.literal, literal.ivalue, literal.fvalue, dtype));
}

DType weak_dtype(DType strong, LiteralKind kind) { return sema::weak_dtype(strong, kind); }

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
  n->attrs = checks::constant_attrs(literal.literal, literal.ivalue, literal.fvalue, dtype);
  return Expr(std::move(n));
}

Expr with_sequence(Expr e, std::vector<std::shared_ptr<const ExprNode>> before, std::vector<ExprNode::After> after) {
  auto& node = const_cast<ExprNode&>(*e.node());
  for (const auto& b : before)   // a draw has no operands: it belongs where its `_like` operand does
    if (!node.function && b->function) node.function = b->function;
  node.before = std::move(before);
  node.after = std::move(after);
  return e;
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
      bool before_done = false;
    };
    std::vector<Frame> stack;
    stack.push_back(Frame{&root, 0, {}});
    ir::NodeId result = -1;
    while (!stack.empty()) {
      Frame& fr = stack.back();
      const ExprNode& n = *fr.node;
      if (!fr.before_done && !n.before.empty()) {
        fr.before_done = true;
        for (const auto& b : n.before) Emitter(f_).emit(*b);   // a fresh stack: `fr` stays valid
        continue;
      }
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
      ir::Attrs attrs = n.attrs;
      if (n.op == Op::Random) attrs.salt = f_.next_salt++;   // numbered as sema numbers them
      const ir::NodeId id = add(n.op, std::move(fr.ids), std::move(attrs), n.type);
      for (const std::string& s : n.shape_symbols) f_.shape_symbols.emplace_back(s, ir::op_name(n.op));
      n.emitted[{f_.serial, -1}] = id;
      for (const ExprNode::After& a : n.after) write_after(a);
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
  // A tree written after an op (ExprNode::after); an update's target is checked as
  // FunctionBuilder::update checks it.
  void write_after(const ExprNode::After& a) {
    const ir::NodeId value = Emitter(f_).emit(*a.value);
    if (a.update < 0) return;
    std::shared_ptr<ModuleState> m = f_.lock_module();
    if (f_.updated.count(a.update))
      throw UserError(checks::updated_twice_message(m->shareds[size_t(a.update)].name, in_function(f_.fn.name)));
    f_.note_shared_use(a.update);
    f_.updated.insert(a.update);
    f_.fn.updates.push_back(ir::Update{a.update, value, ir::ReduceMode::Avg, {}});
  }

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
    const ir::Attrs a = checks::constant_attrs(literal.literal, literal.ivalue, literal.fvalue, dtype);
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
  throw_if_error(checks::name_error(name, what));
  if (f.locals.count(name))
    throw UserError(checks::already_declared_message("", name, in_function(f.fn.name)));
  auto m = f.lock_module();
  if (auto it = m->globals.find(name); it != m->globals.end() && it->second == "shared variable")
    throw UserError(checks::shadow_message(what, name, "", quoted(name)));
}

}  // namespace

Expr FunctionBuilder::param(ir::Role role, const std::string& name, DType dtype, ShapeArg shape) {
  FunctionState& f = *state_;
  ir::TensorType type = declared_type(dtype, shape);
  throw_if_error(checks::row_dimension_error(role, name, type));
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
  throw_if_error(checks::name_error(name, "output"));
  if (f.output_names.count(name))
    throw UserError(checks::already_declared_message("output", name, in_function(f.fn.name)));
  check_belongs(f, v, "output", name);
  const ir::TensorType& type = v.type;   // a literal: its default type, as sema materializes it
  // The mode is always passed here, so the message says what the default is.
  throw_if_error(checks::output_avg_error(name, type.dtype, mode, checks::Spelling::Builder, false));
  throw_if_error(checks::output_gather_error(name, type, mode, checks::Spelling::Builder));
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
  if (f.updated.count(s.index)) throw UserError(checks::updated_twice_message(s.name, in_function(f.fn.name)));
  throw_if_error(checks::update_mode_error(mode));
  ir::TensorType type = v.type;
  if (v.kind == ExprNode::Kind::Literal) {
    builder_detail::check_literal_fits(v, s.type.dtype);
    type = ir::TensorType{s.type.dtype, {}};
  }
  throw_if_error(checks::update_type_error(s.name, s.type, type));
  throw_if_error(checks::update_avg_error(s.name, s.type.dtype, mode, checks::Spelling::Builder, false));
  f.note_shared_use(s.index);
  Emitter emitter(f);
  const ir::NodeId id = v.kind == ExprNode::Kind::Literal ? emitter.emit_literal(v, s.type.dtype) : emitter.emit(v);
  f.updated.insert(s.index);
  f.fn.updates.push_back(ir::Update{s.index, id, mode, {}});
}

void FunctionBuilder::minimize(const Expr& loss, std::vector<Expr> variables, const std::string& optimizer) {
  FunctionState& f = *state_;
  std::shared_ptr<ModuleState> m = f.lock_module();
  if (f.train_step) throw UserError(checks::second_training_step_message(f.fn.name, ""));
  auto global = m->globals.find(optimizer);
  if (global == m->globals.end())
    throw UserError(fmt::format("unknown optimizer '{}' (declare one first, e.g. ModuleBuilder::optimizer(\"{}\", "
                                "\"momentum\", {{{{\"lr\", 0.05}}}}))", optimizer, optimizer));
  if (global->second != "optimizer")
    throw UserError(checks::not_an_optimizer_message(optimizer, "a " + global->second));
  const auto found = std::find_if(m->optimizers.begin(), m->optimizers.end(),
                                  [&](const ir::Optimizer& o) { return o.name == optimizer; });
  const int64_t index = int64_t(found - m->optimizers.begin());

  // The same checks, in the same order, as sema's minimize statement; all of them before the
  // module changes (a statement that throws leaves the builders as they were). grad also takes
  // inputs; minimize trains shared variables only.
  for (const Expr& variable : variables) {
    const ExprNode& v = *builder_detail::require(variable, "minimize");
    if (v.kind != ExprNode::Kind::Shared)
      throw UserError(fmt::format("minimize differentiates with respect to shared variables, but {} in function "
                                  "'{}' is {}", v.kind == ExprNode::Kind::Param ? "'" + v.name + "'" : "a variable",
                                  f.fn.name, v.kind == ExprNode::Kind::Param ? "a parameter" : builder_detail::describe(v)));
  }
  Expr gradient = grad(loss, variables);
  check_belongs(f, *gradient.node(), "minimize using", optimizer);
  checks::FlatGradient trained;
  for (const Expr& variable : variables) {
    const ExprNode& v = *variable.node();
    throw_if_error(checks::static_shape_error(v.name, v.type));
    trained.add(v.index, v.type);
  }
  throw_if_error(checks::loss_dtype_error(loss.dtype(), trained.dtype, "loss"));

  // The optimizer's flat gradient variable: made by the first step that uses the optimizer.
  ir::Optimizer& o = m->optimizers[size_t(index)];
  const std::vector<int64_t>& parameters = trained.parameters;
  const ir::TensorType flat = trained.type();
  const int64_t size = trained.size;
  const std::string gradient_name = o.gradient_variable();
  int64_t existing = -1;   // the gradient variable, when it exists already
  throw_if_error(checks::already_trains_error(o, parameters, m->shareds, ""));
  if (o.gradient >= 0) {
    existing = o.gradient;
  } else if (auto g = m->globals.find(gradient_name); g != m->globals.end()) {
    auto it = std::find_if(m->shareds.begin(), m->shareds.end(),
                           [&](const ir::SharedVar& v) { return v.name == gradient_name; });
    const ir::SharedVar* shared = it != m->shareds.end() ? &*it : nullptr;
    throw_if_error(checks::gradient_variable_error(o, flat, shared, "a " + g->second));
    existing = int64_t(it - m->shareds.begin());
  }
  if (existing >= 0 && f.updated.count(existing))
    throw UserError(checks::gradient_updated_message(gradient_name, in_function(f.fn.name)));
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

// A module-level name: shared variables, functions and optimizers share one namespace.
void check_global_name(const ModuleState& m, const std::string& name, const char* what) {
  throw_if_error(checks::name_error(name, what));
  if (auto it = m.globals.find(name); it != m.globals.end())
    throw UserError(checks::already_declared_message("", name, "as a " + it->second));
}

void declare_global(ModuleState& m, const std::string& name, const char* what) {
  check_global_name(m, name, what);
  m.globals.emplace(name, what);
}

}  // namespace

Expr ModuleBuilder::shared(const std::string& name, DType dtype, ShapeArg shape, ir::Initializer init,
                           bool sliceable) {
  ModuleState& m = *state_;
  ir::TensorType type = declared_type(dtype, shape);
  throw_if_error(checks::sliceable_error(name, type, sliceable));
  throw_if_error(checks::initializer_error(name, type, init));
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

void ModuleBuilder::declare_helper(const std::string& name) {
  throw_if_error(checks::helper_name_error(name));
  declare_global(*state_, name, "helper");
}

namespace builder_detail {

HelperCall::HelperCall(FunctionBuilder& f, const std::string& helper)
    : f_(f.state_), helper_(helper), caller_locals_(std::exchange(f_->locals, {})) {
  f_->helper_stack.push_back(helper);
}

HelperCall::~HelperCall() {
  for (const auto& [name, what] : f_->locals) f_->helper_locals.emplace_back(name, what);
  f_->locals = std::move(caller_locals_);
  f_->helper_stack.pop_back();
}

void HelperCall::rethrow(const UserError& e) const {
  const std::vector<std::string>& stack = f_->helper_stack;
  std::string caller = stack.size() >= 2 ? fmt::format("helper '{}'", stack[stack.size() - 2])
                                         : fmt::format("function '{}'", f_->fn.name);
  throw UserError(fmt::format("{}\n  in call to helper '{}' from {}", e.what(), helper_, caller));
}

}  // namespace builder_detail

void ModuleBuilder::optimizer(const std::string& name, const std::string& rule,
                              const std::vector<std::pair<std::string, double>>& hyper_parameters) {
  ModuleState& m = *state_;
  check_global_name(m, name, "optimizer");
  throw_if_error(checks::unknown_rule_error(name, rule));
  ir::Optimizer opt;
  opt.name = name;
  opt.rule = rule;
  for (const auto& [keyword, value] : hyper_parameters) {
    if (keyword == "num_packs") {   // the step's all-reduce, not the rule's
      // A double is a number of packs when it is a whole number that an int32 holds.
      const bool whole = value >= double(INT32_MIN) && value <= double(INT32_MAX) && value == std::floor(value);
      throw_if_error(checks::num_packs_error(name, whole ? std::optional<int64_t>(int64_t(value)) : std::nullopt));
      opt.num_packs = int64_t(value);
      continue;
    }
    // One keyword at a time, so that the message names the keyword that is wrong, as sema's does.
    throw_if_error(checks::hyper_parameter_error(name, rule, keyword, value));
    opt.hyper_parameters.emplace_back(keyword, value);
  }
  throw_if_error(checks::update_rule_error(name, rule, opt.hyper_parameters));
  m.globals.emplace(name, "optimizer");
  m.optimizers.push_back(std::move(opt));
}

namespace {

// What only the whole function shows (sema's check_scattered_symbols, the scattered-row rule
// for outputs, the symbols of reshape targets, at least one result), against the final module.
checks::ScatteredRows check_function(const ModuleState& m, const FunctionState& f) {
  const ir::Function& fn = f.fn;
  if (fn.outputs.empty() && fn.updates.empty()) throw UserError(checks::no_results_message(fn.name));
  for (int64_t p : f.trained)
    if (f.updated.count(p) && p != m.optimizers[size_t(f.train_step->optimizer)].gradient)
      throw UserError(checks::trained_update_message(m.shareds[size_t(p)].name,
                                                     fmt::format("of function '{}'", fn.name), fn.name));
  std::vector<std::pair<std::string, std::string>> locals(f.locals.begin(), f.locals.end());
  locals.insert(locals.end(), f.helper_locals.begin(), f.helper_locals.end());
  for (const auto& [name, what] : locals)
    if (auto it = m.globals.find(name); it != m.globals.end() && it->second == "shared variable")
      throw UserError(checks::shadow_message(what.c_str(), name, of_function(fn.name), quoted(name)));

  std::vector<int64_t> used_indices = f.used_shareds;
  std::sort(used_indices.begin(), used_indices.end());
  std::vector<const ir::SharedVar*> used;
  for (int64_t index : used_indices) used.push_back(&m.shareds[size_t(index)]);
  const checks::ScatteredRows scattered = checks::scattered_rows(fn.params, used);
  for (const ir::Param& p : fn.params)
    for (size_t axis = 0; axis < p.type.shape.size(); ++axis)
      throw_if_error(checks::param_axis_error(p, axis, scattered));
  for (const ir::SharedVar* s : used)
    for (size_t axis = 0; axis < s->type.shape.size(); ++axis)
      throw_if_error(checks::shared_axis_error(*s, axis, scattered));
  for (const builder_detail::OutputInfo& o : f.outputs)
    throw_if_error(checks::scattered_output_error(o.name, of_function(fn.name), o.type, o.mode, scattered));

  std::set<std::string> symbols;
  for (const ir::Param& p : fn.params)
    for (const ir::Dim& d : p.type.shape)
      if (d.is_symbolic()) symbols.insert(d.symbol);
  for (const ir::SharedVar* s : used)
    for (const ir::Dim& d : s->type.shape)
      if (d.is_symbolic()) symbols.insert(d.symbol);
  for (const auto& [symbol, op] : f.shape_symbols)
    throw_if_error(checks::unknown_dimension_error(symbol, op + of_function(fn.name), symbols));
  return scattered;
}

// A draw whose axis 0 is a scattered row dimension draws at the call's rows (sema's random_node);
// which dimensions are scattered is known once the whole function is.
void mark_global_rows(ir::Function& fn, const checks::ScatteredRows& scattered) {
  for (ir::Node& n : fn.nodes)
    if (n.op == Op::Random)
      n.attrs.global_rows =
          n.type.rank() > 0 && n.type.shape[0].is_symbolic() && scattered.count(n.type.shape[0].symbol) > 0;
}

// The names jit::compile's expansion adds for every optimizer some step uses (its update
// function and state) must be free, as sema checks them.
void check_training_names(const ModuleState& m) {
  std::map<std::string, std::string> declared;
  for (const auto& [name, what] : m.globals) declared.emplace(name, "a " + what);
  const auto errors = checks::training_name_errors(m.optimizers, m.shareds, declared);
  if (!errors.empty()) throw UserError(errors.front().second);
}

}  // namespace

ir::Module ModuleBuilder::build() const {
  const ModuleState& m = *state_;
  ir::Module module;
  module.shareds = m.shareds;
  for (const auto& f : m.functions) {
    const checks::ScatteredRows scattered = check_function(m, *f);
    module.functions.push_back(f->fn);
    mark_global_rows(module.functions.back(), scattered);
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
