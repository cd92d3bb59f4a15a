// The shared C-like kernel emitter (see emitter.h): index maps, array accesses, fused expression
// DAGs, loop nests, and the set-up of the kernels both dialects write alike. The loops are shaped
// for vectorisers: an inner loop whose every access has stride 0, 1 or a loop-invariant stride,
// and all index arithmetic in int64_t.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "compiler/codegen/emitter.h"

namespace synk::compiler::emitter {

void Writer::line(const std::string& text) {
  size_t start = 0;
  for (;;) {   // each line of a multi-line text at the current indentation
    const size_t end = text.find('\n', start);
    text_.append(size_t(indent_) * 2, ' ');
    text_.append(text, start, end == std::string::npos ? std::string::npos : end - start);
    text_ += '\n';
    if (end == std::string::npos) return;
    start = end + 1;
  }
}
void Writer::open(const std::string& text) {
  line(text + (text.empty() ? "{" : " {"));
  ++indent_;
}
void Writer::close(const std::string& suffix) {
  --indent_;
  line("}" + suffix);
}

const char* c_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return "float";
    case ir::DType::F64: return "double";
    case ir::DType::I32: return "int32_t";
    case ir::DType::I64: return "int64_t";
    case ir::DType::U8: return "uint8_t";
    case ir::DType::Bool: return "uint8_t";
    default: synk::internal_error(std::string("CPU code generation: unsupported dtype ") + ir::dtype_name(t));
  }
}

const char* c_value_type(ir::DType t) { return t == ir::DType::Bool ? "bool" : c_type(t); }

std::string c_literal(ir::DType t, double value, int64_t ivalue) {
  switch (t) {
    case ir::DType::F32:
    case ir::DType::F64: {
      const char* f = t == ir::DType::F32 ? "f" : "";
      const double v = t == ir::DType::F32 ? double(float(value)) : value;   // 1e39 is inf as an f32
      if (std::isnan(v)) return fmt::format("__builtin_nan{}(\"\")", f);
      if (std::isinf(v)) return fmt::format("{}__builtin_inf{}()", v < 0 ? "-" : "", f);
      return fmt::format("{:a}{}", v, f);
    }
    case ir::DType::I32: return fmt::format("(int32_t){}", ivalue == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(ivalue));
    case ir::DType::I64:
      return ivalue == INT64_MIN ? "(int64_t)(-9223372036854775807LL - 1)" : fmt::format("(int64_t){}LL", ivalue);
    case ir::DType::U8: return fmt::format("(uint8_t){}", ivalue);
    case ir::DType::Bool: return ivalue ? "true" : "false";
    default: synk::internal_error("CPU code generation: literal of unsupported dtype");
  }
}

std::string c_identity(ir::Op op, ir::DType t) {
  bool flt = ir::is_float(t);
  switch (op) {
    case ir::Op::ReduceSum: case ir::Op::ReduceMean: return c_literal(t, 0, 0);
    case ir::Op::ReduceProd: return c_literal(t, 1, 1);
    case ir::Op::ReduceMax:
      if (flt) return c_literal(t, -INFINITY, 0);
      return t == ir::DType::I32 ? c_literal(t, 0, INT32_MIN) : t == ir::DType::I64 ? c_literal(t, 0, INT64_MIN) : c_literal(t, 0, 0);
    case ir::Op::ReduceMin:
      if (flt) return c_literal(t, INFINITY, 0);
      return t == ir::DType::I32 ? c_literal(t, 0, INT32_MAX) : t == ir::DType::I64 ? c_literal(t, 0, INT64_MAX)
             : c_literal(t, 0, t == ir::DType::U8 ? 255 : 1);
    default: synk::internal_error("c_identity: not a reduction");
  }
}

namespace {
const char* suffix(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return "f32";
    case ir::DType::F64: return "f64";
    case ir::DType::I32: return "i32";
    case ir::DType::I64: return "i64";
    case ir::DType::U8: return "u8";
    default: return "b";
  }
}
}  // namespace

std::string c_combine(ir::Op op, ir::DType t, const std::string& a, const std::string& b) {
  switch (op) {
    case ir::Op::ReduceSum: case ir::Op::ReduceMean: return fmt::format("synk_add_{}({}, {})", suffix(t), a, b);
    case ir::Op::ReduceProd: return fmt::format("synk_mul_{}({}, {})", suffix(t), a, b);
    case ir::Op::ReduceMax: return fmt::format("synk_max_{}({}, {})", suffix(t), a, b);
    case ir::Op::ReduceMin: return fmt::format("synk_min_{}({}, {})", suffix(t), a, b);
    default: synk::internal_error("c_combine: not a reduction");
  }
}

IndexMap identity_map(size_t rank) {
  IndexMap m(rank);
  for (size_t i = 0; i < rank; ++i) m[i].kdim = int(i);
  return m;
}

Access make_access(int buffer, const ir::TensorType& type, const IndexMap& map, size_t rank) {
  Access a;
  a.buffer = buffer;
  a.dtype = type.dtype;
  a.stride.assign(rank, Poly());
  std::vector<Poly> strides = row_major_strides(type.shape);
  for (size_t j = 0; j < map.size(); ++j) {
    if (map[j].kdim >= 0) a.stride.at(size_t(map[j].kdim)) = a.stride[size_t(map[j].kdim)] + strides[j];
    if (map[j].off != 0) a.offset = a.offset + strides[j] * map[j].off;
  }
  return a;
}

std::vector<Poly> domain_of(const ir::Shape& shape) {
  std::vector<Poly> d;
  for (const ir::Dim& dim : shape) d.push_back(Poly::dim(dim));
  return d;
}

ExprBuilder::ExprBuilder(const KernelPlan& plan, const Kernel& kernel, size_t domain_rank)
    : plan_(plan), kernel_(kernel), rank_(domain_rank) {}

bool ExprBuilder::computed_here(ir::NodeId id) const {
  bool member = std::count(kernel_.nodes.begin(), kernel_.nodes.end(), id) > 0;
  bool root = std::count(kernel_.roots.begin(), kernel_.roots.end(), id) > 0;
  return member && (root || plan_.node_buffer.at(size_t(id)) < 0);
}

int ExprBuilder::add_access(Access a) {
  for (size_t i = 0; i < accesses.size(); ++i) {
    const Access& b = accesses[i];
    if (b.buffer == a.buffer && b.store == a.store && b.stride == a.stride && b.offset == a.offset) return int(i);
  }
  accesses.push_back(std::move(a));
  return int(accesses.size() - 1);
}

namespace {

// The operand's map under numpy broadcasting: dims align on the right; an operand dim of static
// size 1 under a result dim that is not is always index 0.
IndexMap broadcast_operand_map(const IndexMap& map, const ir::Shape& result, const ir::Shape& operand) {
  IndexMap m(operand.size());
  size_t lead = result.size() - operand.size();
  for (size_t j = 0; j < operand.size(); ++j) {
    const ir::Dim& od = operand[j];
    const ir::Dim& rd = result[j + lead];
    bool broadcast = !od.is_symbolic() && od.size == 1 && !(!rd.is_symbolic() && rd.size == 1);
    m[j] = broadcast ? MapDim{} : map[j + lead];
  }
  return m;
}

}  // namespace

int ExprBuilder::value(ir::NodeId id, const IndexMap& map) {
  auto key = std::make_pair(id, map);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const ir::Node& n = plan_.function.node(id);
  Value v;
  v.dtype = n.type.dtype;
  v.node = id;
  if (n.op == ir::Op::Constant) {
    v.kind = Value::Kind::Const;
  } else if (!computed_here(id)) {
    int buffer = plan_.node_buffer.at(size_t(id));
    if (buffer < 0) synk::internal_error(fmt::format("CPU codegen: node %{} has no buffer and is not in kernel {}", id, kernel_.name));
    v.kind = Value::Kind::Load;
    v.access = add_access(make_access(buffer, n.type, map, rank_));
  } else {
    switch (n.op) {
      case ir::Op::Transpose: {
        IndexMap m(n.type.rank());
        for (size_t i = 0; i < n.attrs.perm.size(); ++i) m[size_t(n.attrs.perm[i])] = map[i];
        int r = value(n.operands[0], m);
        memo_[key] = r;
        return r;
      }
      case ir::Op::Slice: {
        IndexMap m = map;
        m[size_t(n.attrs.axis)].off += n.attrs.start;
        int r = value(n.operands[0], m);
        memo_[key] = r;
        return r;
      }
      case ir::Op::BroadcastTo: {
        const ir::Node& o = plan_.function.node(n.operands[0]);
        int r = value(n.operands[0], broadcast_operand_map(map, n.type.shape, o.type.shape));
        memo_[key] = r;
        return r;
      }
      default:
        if (!ir::is_pointwise(n.op))
          synk::internal_error(fmt::format("CPU codegen: {} cannot be computed inside a fused expression", ir::op_name(n.op)));
        v.kind = Value::Kind::Op;
        for (ir::NodeId o : n.operands)
          v.args.push_back(value(o, broadcast_operand_map(map, n.type.shape, plan_.function.node(o).type.shape)));
    }
  }
  values.push_back(std::move(v));
  int r = int(values.size() - 1);
  memo_[key] = r;
  return r;
}

Nest collapse(const std::vector<Poly>& domain, const std::vector<int>& cls, const std::vector<Access>& accesses) {
  Nest nest;
  nest.stride.resize(accesses.size());
  for (size_t k = 0; k < accesses.size(); ++k) nest.offset.push_back(accesses[k].offset);
  for (size_t d = 0; d < domain.size(); ++d) {
    if (domain[d].is_constant(1)) continue;
    nest.size.push_back(domain[d]);
    nest.cls.push_back(cls.empty() ? 0 : cls[d]);
    for (size_t k = 0; k < accesses.size(); ++k) nest.stride[k].push_back(accesses[k].stride.at(d));
  }
  for (size_t d = nest.size.size(); d-- > 1;) {
    // Merge d-1 into d when every access walks them as one contiguous run.
    bool ok = nest.cls[d - 1] == nest.cls[d];
    for (size_t k = 0; k < accesses.size() && ok; ++k)
      ok = nest.stride[k][d - 1] == nest.stride[k][d] * nest.size[d];
    if (!ok) continue;
    nest.size[d - 1] = nest.size[d - 1] * nest.size[d];
    nest.size.erase(nest.size.begin() + long(d));
    nest.cls.erase(nest.cls.begin() + long(d));
    for (size_t k = 0; k < accesses.size(); ++k) {
      nest.stride[k][d - 1] = nest.stride[k][d];
      nest.stride[k].erase(nest.stride[k].begin() + long(d));
    }
  }
  return nest;
}

void emit_nest_constants(Writer& w, const Nest& nest) {
  for (size_t d = 0; d < nest.size.size(); ++d) w.line(fmt::format("const int64_t n{} = {};", d, nest.size[d].c_expr()));
  for (size_t k = 0; k < nest.stride.size(); ++k) {
    for (size_t d = 0; d < nest.size.size(); ++d) {
      const Poly& s = nest.stride[k][d];
      if (!s.is_zero() && !s.is_constant(1)) w.line(fmt::format("const int64_t st{}_{} = {};", k, d, s.c_expr()));
    }
    w.line(fmt::format("const int64_t off{} = {};", k, nest.offset[k].c_expr()));
  }
}

namespace {
std::string stride_term(const Nest& nest, size_t k, size_t d, const std::string& var) {
  const Poly& s = nest.stride[k][d];
  if (s.is_zero()) return "";
  if (s.is_constant(1)) return " + " + var;
  return fmt::format(" + {} * st{}_{}", var, k, d);
}
}  // namespace

int open_outer_loops(Writer& w, const Nest& nest, const std::vector<int>& outer) {
  for (int d : outer) w.open(fmt::format("for (int64_t i{0} = 0; i{0} < n{0}; ++i{0})", d));
  emit_outer_addresses(w, nest, outer);
  return int(outer.size());
}

void emit_outer_addresses(Writer& w, const Nest& nest, const std::vector<int>& outer) {
  for (size_t k = 0; k < nest.stride.size(); ++k) {
    std::string base = fmt::format("off{}", k);
    for (int d : outer) base += stride_term(nest, k, size_t(d), fmt::format("i{}", d));
    w.line(fmt::format("const int64_t a{} = {};", k, base));
  }
}

std::string address(const Nest& nest, int k, int inner, const std::string& var) {
  std::string a = fmt::format("a{}", k);
  if (inner >= 0) a += stride_term(nest, size_t(k), size_t(inner), var);
  return a;
}

std::string value_expr(const ExprBuilder& eb, const KernelPlan& plan, int i, const std::string& prefix,
                       const std::function<std::string(int access)>& load) {
  const Value& v = eb.values.at(size_t(i));
  if (v.kind == Value::Kind::Load) {
    std::string l = load(v.access);
    return v.dtype == ir::DType::Bool ? "(" + l + " != 0)" : l;
  }
  const ir::Node& n = plan.function.node(v.node);
  if (v.kind == Value::Kind::Const) return c_literal(n.type.dtype, n.attrs.value, n.attrs.ivalue);
  auto arg = [&](size_t j) { return fmt::format("{}{}", prefix, v.args.at(j)); };
  const ir::DType t = n.type.dtype;
  const bool flt = ir::is_float(t);
  const std::string T = c_value_type(t);
  const std::string fs = t == ir::DType::F32 ? "f" : "";   // libm suffix
  const std::string sfx = suffix(t);
  switch (n.op) {
    case ir::Op::Neg: return flt ? "-" + arg(0) : fmt::format("synk_neg_{}({})", sfx, arg(0));
    case ir::Op::Abs: return flt ? fmt::format("__builtin_fabs{}({})", fs, arg(0)) : fmt::format("synk_abs_{}({})", sfx, arg(0));
    case ir::Op::Exp: return fmt::format("synk_exp_{}({})", sfx, arg(0));
    case ir::Op::Log: return fmt::format("synk_log_{}({})", sfx, arg(0));
    case ir::Op::Sqrt: return fmt::format("__builtin_sqrt{}({})", fs, arg(0));
    case ir::Op::Tanh: return fmt::format("synk_tanh_{}({})", sfx, arg(0));
    case ir::Op::Sigmoid: return fmt::format("synk_sigmoid_{}({})", sfx, arg(0));
    // Float selects take `& synk_keep` (a true the optimiser cannot see; see below).
    case ir::Op::Relu:
      return flt ? fmt::format("(({0} < ({1})0) & synk_keep ? ({1})0 : {0})", arg(0), T)
                 : fmt::format("({0} < ({1})0 ? ({1})0 : {0})", arg(0), T);
    case ir::Op::Log1p: return fmt::format("__builtin_log1p{}({})", fs, arg(0));
    case ir::Op::Expm1: return fmt::format("__builtin_expm1{}({})", fs, arg(0));
    case ir::Op::Sin: return fmt::format("__builtin_sin{}({})", fs, arg(0));
    case ir::Op::Cos: return fmt::format("__builtin_cos{}({})", fs, arg(0));
    case ir::Op::Softplus: return fmt::format("synk_softplus_{}({})", sfx, arg(0));
    // Integers are already whole: floor, ceil and round are the identity there.
    case ir::Op::Floor: return flt ? fmt::format("__builtin_floor{}({})", fs, arg(0)) : arg(0);
    case ir::Op::Ceil: return flt ? fmt::format("__builtin_ceil{}({})", fs, arg(0)) : arg(0);
    case ir::Op::Round: return flt ? fmt::format("__builtin_rint{}({})", fs, arg(0)) : arg(0);   // half to even
    case ir::Op::Sign: return fmt::format("synk_sign_{}({})", sfx, arg(0));
    case ir::Op::Not: return "!" + arg(0);
    case ir::Op::Cast: {
      ir::DType from = eb.values.at(size_t(v.args[0])).dtype;
      if (t == ir::DType::Bool) return fmt::format("({} != 0)", arg(0));
      if (ir::is_float(from) && !flt) return fmt::format("synk_cast_{}_{}({}, cast_bad)", suffix(from), sfx, arg(0));
      return fmt::format("({})({})", T, arg(0));
    }
    case ir::Op::Add: return fmt::format("synk_add_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Sub: return fmt::format("synk_sub_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Mul: return fmt::format("synk_mul_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Div: return fmt::format("({} / {})", arg(0), arg(1));
    case ir::Op::Pow: return fmt::format("synk_pow_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Maximum: return fmt::format("synk_max_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Minimum: return fmt::format("synk_min_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Mod: case ir::Op::FloorDiv: {
      const char* name = n.op == ir::Op::Mod ? "mod" : "floordiv";
      if (flt) return fmt::format("synk_{}_{}({}, {})", name, sfx, arg(0), arg(1));
      return fmt::format("synk_{}_{}({}, {}, div_bad)", name, sfx, arg(0), arg(1));
    }
    case ir::Op::BceWithLogits: return fmt::format("synk_bce_{}({}, {})", sfx, arg(0), arg(1));
    case ir::Op::Eq: return fmt::format("({} == {})", arg(0), arg(1));
    case ir::Op::Ne: return fmt::format("({} != {})", arg(0), arg(1));
    case ir::Op::Lt: return fmt::format("({} < {})", arg(0), arg(1));
    case ir::Op::Le: return fmt::format("({} <= {})", arg(0), arg(1));
    case ir::Op::Gt: return fmt::format("({} > {})", arg(0), arg(1));
    case ir::Op::Ge: return fmt::format("({} >= {})", arg(0), arg(1));
    case ir::Op::And: return fmt::format("(bool)({} & {})", arg(0), arg(1));
    case ir::Op::Or: return fmt::format("(bool)({} | {})", arg(0), arg(1));
    case ir::Op::Where:
      return flt ? fmt::format("(({}) & synk_keep ? {} : {})", arg(0), arg(1), arg(2))
                 : fmt::format("({} ? {} : {})", arg(0), arg(1), arg(2));
    default:
      synk::internal_error(fmt::format("CPU codegen: no scalar form for {}", ir::op_name(n.op)));
  }
}

void emit_values(Writer& w, const ExprBuilder& eb, const Nest& nest, int inner, const std::string& var,
                 const std::string& prefix) {
  for (size_t i = 0; i < eb.values.size(); ++i) {
    const Value& v = eb.values[i];
    std::string e = value_expr(eb, eb.plan(), int(i), prefix, [&](int k) {
      return fmt::format("b{}[{}]", eb.accesses.at(size_t(k)).buffer, address(nest, k, inner, var));
    });
    w.line(fmt::format("const {} {}{} = {};", c_value_type(v.dtype), prefix, i, e));
  }
}

void emit_concat_parts(const KernelPlan& plan, const Kernel& k, const ConcatPartEmitter& emit_part) {
  const ir::Node& cat = node_of(plan, k.roots[0]);
  const size_t axis = size_t(cat.attrs.axis);
  std::vector<Poly> out_strides = row_major_strides(cat.type.shape);
  Poly start;
  for (ir::NodeId part : cat.operands) {
    const ir::TensorType& pt = node_of(plan, part).type;
    ExprBuilder eb(plan, k, pt.rank());
    int v = eb.value(part, identity_map(pt.rank()));
    Access a;
    a.buffer = buffer_of(plan, k.roots[0]);
    a.dtype = cat.type.dtype;
    a.stride = out_strides;
    a.offset = start * out_strides.at(axis);
    a.store = true;
    int s = eb.add_access(std::move(a));
    emit_part(eb, domain_of(pt.shape), v, s);
    start = start + Poly::dim(pt.shape.at(axis));
  }
}

ReductionDims reduction_dims(const ir::Node& reduction, const ir::TensorType& input) {
  ReductionDims dims;
  dims.reduced.assign(input.rank(), false);
  for (int64_t a : reduction.attrs.axes) dims.reduced.at(size_t(a)) = true;
  for (size_t d = 0; d < input.rank(); ++d) {
    dims.cls.push_back(dims.reduced[d] ? 1 : 0);
    if (dims.reduced[d]) dims.count = dims.count * Poly::dim(input.shape[d]);
  }
  return dims;
}

namespace {

// An argmax's dims: its axis reduced (class 1), the dims before it class 0, after it class 2.
ReductionDims argmax_dims(const ir::Node& argmax, const ir::TensorType& input) {
  const size_t axis = size_t(argmax.attrs.axes.at(0));
  ReductionDims dims;
  dims.reduced.assign(input.rank(), false);
  dims.reduced.at(axis) = true;
  for (size_t d = 0; d < input.rank(); ++d) dims.cls.push_back(d < axis ? 0 : d == axis ? 1 : 2);
  dims.count = Poly::dim(input.shape.at(axis));
  return dims;
}

}  // namespace

ReductionKernel::ReductionKernel(const KernelPlan& plan, const Kernel& k)
    : node(node_of(plan, k.roots[0])),
      in(node_of(plan, node.operands[0]).type),
      dims(node.op == ir::Op::ArgMax ? argmax_dims(node, in) : reduction_dims(node, in)),
      eb(plan, k, in.rank()),
      value(eb.value(node.operands[0], identity_map(in.rank()))),
      out_buffer(buffer_of(plan, k.roots[0])) {}

Nest ReductionKernel::nest() const { return collapse(domain_of(in.shape), dims.cls, eb.accesses); }

int argmax_axis_dim(const Nest& nest, std::vector<int>* others) {
  int axis_dim = -1;
  for (int d = 0; d < int(nest.size.size()); ++d) {
    if (nest.cls[size_t(d)] == 1) axis_dim = d;
    else others->push_back(d);
  }
  return axis_dim;
}

TakeBuffers open_take(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& take = node_of(plan, k.roots[0]);
  const ir::TensorType& xt = node_of(plan, take.operands[0]).type;
  auto name = [&](ir::NodeId id) { return fmt::format("b{}", buffer_of(plan, id)); };
  w.open("");
  w.line(fmt::format("const int64_t rows = {}, row = {}, n = {};", Poly::dim(xt.shape.at(0)).c_expr(),
                     Poly::product(xt.shape, 1, xt.rank()).c_expr(), Poly::dim(take.type.shape.at(0)).c_expr()));
  return {name(take.operands[0]), name(take.operands[1]), name(k.roots[0])};
}

OneHotBuffers open_one_hot(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& oh = node_of(plan, k.roots[0]);
  w.open("");
  w.line(fmt::format("const int64_t n = {}, nk = {};", Poly::dim(oh.type.shape.at(0)).c_expr(), oh.attrs.num_classes));
  return {fmt::format("b{}", buffer_of(plan, oh.operands[0])), fmt::format("b{}", buffer_of(plan, k.roots[0])),
          c_type(oh.type.dtype)};
}

CrossEntropyKernel open_cross_entropy(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& ce = node_of(plan, k.roots[0]);
  const ir::Node& logits = node_of(plan, ce.operands[0]);
  const ir::DType t = ce.type.dtype;
  w.open("");
  w.line(fmt::format("const int64_t n = {}, nk = {};", Poly::dim(logits.type.shape.at(0)).c_expr(),
                     Poly::dim(logits.type.shape.at(1)).c_expr()));
  return {ce,
          logits,
          node_of(plan, ce.operands[1]),
          t,
          c_value_type(t),
          t == ir::DType::F32 ? "f32" : "f64",
          fmt::format("b{}", buffer_of(plan, ce.operands[0])),
          fmt::format("b{}", buffer_of(plan, ce.operands[1])),
          fmt::format("b{}", buffer_of(plan, k.roots[0]))};
}

CumsumKernel open_cumsum(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& cs = node_of(plan, k.roots[0]);
  const ir::Shape& shape = cs.type.shape;
  const size_t axis = size_t(cs.attrs.axis);
  w.open("");
  w.line(fmt::format("const int64_t no = {}, nl = {}, ni = {};", Poly::product(shape, 0, axis).c_expr(),
                     Poly::dim(shape.at(axis)).c_expr(), Poly::product(shape, axis + 1, shape.size()).c_expr()));
  return {fmt::format("b{}", buffer_of(plan, cs.operands[0])), fmt::format("b{}", buffer_of(plan, k.roots[0])),
          c_value_type(cs.type.dtype), cs.type.dtype, cs.attrs.reverse};
}

void emit_cumsum_line(Writer& w, const CumsumKernel& c) {
  w.line(fmt::format("const {} *__restrict__ xr = {} + o * nl * ni + j;", c.T, c.x));
  w.line(fmt::format("{} *__restrict__ yr = {} + o * nl * ni + j;", c.T, c.y));
  // Floats start from -0.0, the exact identity of addition, so that a leading -0.0 stays -0.0 as
  // in numpy (which copies the first element); integers wrap (synk_add_<sfx>).
  w.line(fmt::format("{} acc = {};", c.T, c_literal(c.t, ir::is_float(c.t) ? -0.0 : 0.0, 0)));
  w.open("for (int64_t t = 0; t < nl; ++t)");
  w.line(fmt::format("const int64_t e = {};", c.reverse ? "(nl - 1 - t) * ni" : "t * ni"));
  w.line(fmt::format("acc = {};", c_combine(ir::Op::ReduceSum, c.t, "acc", "xr[e]")));
  w.line("yr[e] = acc;");
  w.close();
}

void emit_matmul_dims(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::TensorType& at = plan.buffers.at(size_t(k.matmul_a)).type;
  const ir::TensorType& bt = plan.buffers.at(size_t(k.matmul_b)).type;
  auto dim = [](const ir::TensorType& tt, size_t i) { return Poly::dim(tt.shape.at(i)).c_expr(); };
  if (at.rank() == 1) w.line(fmt::format("const int64_t M = 1, K = {}, sam = 0, sak = 1;", dim(at, 0)));
  else if (!k.trans_a) w.line(fmt::format("const int64_t M = {}, K = {}, sam = K, sak = 1;", dim(at, 0), dim(at, 1)));
  else w.line(fmt::format("const int64_t M = {}, K = {}, sam = 1, sak = M;", dim(at, 1), dim(at, 0)));
  if (bt.rank() == 1) w.line("const int64_t N = 1, sbk = 1, sbn = 0;");
  else if (!k.trans_b) w.line(fmt::format("const int64_t N = {}, sbk = N, sbn = 1;", dim(bt, 1)));
  else w.line(fmt::format("const int64_t N = {}, sbk = 1, sbn = K;", dim(bt, 0)));
}

const char* arith_suffix(ir::DType t) {
  return t == ir::DType::I32 ? "i32" : t == ir::DType::I64 ? "i64" : t == ir::DType::U8 ? "u8"
         : t == ir::DType::F32 ? "f32" : t == ir::DType::F64 ? "f64" : "b";
}

}  // namespace synk::compiler::emitter
