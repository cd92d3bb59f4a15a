// The CPU code generator (see codegen_cpu.h): one emitter per kernel kind, each writing a
// `static noinline` body whose buffer parameters are `__restrict__` (so LLVM knows arrays do
// not overlap and vectorises), plus the `extern "C"` entry that unpacks the buffer array.
#include "compiler/cpu/codegen_cpu.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "compiler/codegen/emitter.h"

namespace synk::compiler {
using emitter::Writer;

namespace {

constexpr int kLanes = 16;   // independent accumulators in inner reductions (one zmm of f32)

using emitter::buffer_of;
using emitter::node_of;
std::string buf(int b) { return fmt::format("b{}", b); }
std::string vtype(ir::DType t) { return emitter::c_value_type(t); }

// Stores a value into a buffer element, converting bool to its byte.
std::string store(int b, const std::string& index, ir::DType t, const std::string& value) {
  return fmt::format("{}[{}] = {};", buf(b), index, t == ir::DType::Bool ? "(uint8_t)" + value : value);
}

// --- pointwise and concat: loop nests over fused expressions ------------------------------------

// One loop nest computing `values` (with `stores`, value index -> store access) over `domain`.
void emit_pointwise_nest(Writer& w, const emitter::ExprBuilder& eb, const std::vector<Poly>& domain,
                         const std::vector<std::pair<int, int>>& stores) {
  emitter::Nest nest = emitter::collapse(domain, {}, eb.accesses);
  w.open("");
  emitter::emit_nest_constants(w, nest);
  int r = int(nest.size.size());
  std::vector<int> outer;
  for (int d = 0; d + 1 < r; ++d) outer.push_back(d);
  int opened = emitter::open_outer_loops(w, nest, outer);
  int inner = r - 1;
  std::string var = fmt::format("i{}", inner);
  if (r > 0) w.open(fmt::format("for (int64_t {0} = 0; {0} < n{1}; ++{0})", var, inner));
  emitter::emit_values(w, eb, nest, inner, var);
  for (auto [value, access] : stores) {
    const emitter::Access& a = eb.accesses.at(size_t(access));
    w.line(store(a.buffer, emitter::address(nest, access, inner, var), a.dtype, fmt::format("v{}", value)));
  }
  if (r > 0) w.close();
  for (int i = 0; i < opened; ++i) w.close();
  w.close();
}

void emit_pointwise(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::TensorType& type = node_of(plan, k.roots[0]).type;
  emitter::ExprBuilder eb(plan, k, type.rank());
  std::vector<std::pair<int, int>> stores;
  for (ir::NodeId root : k.roots) {
    int v = eb.value(root, emitter::identity_map(type.rank()));
    emitter::Access a = emitter::make_access(buffer_of(plan, root), node_of(plan, root).type, emitter::identity_map(type.rank()), type.rank());
    a.store = true;
    stores.push_back({v, eb.add_access(std::move(a))});
  }
  emit_pointwise_nest(w, eb, emitter::domain_of(type.shape), stores);
}

void emit_concat(Writer& w, const KernelPlan& plan, const Kernel& k) {
  emitter::emit_concat_parts(plan, k, [&](emitter::ExprBuilder& eb, const std::vector<Poly>& domain, int v, int s) {
    emit_pointwise_nest(w, eb, domain, {{v, s}});
  });
}

// --- reductions ----------------------------------------------------------------------------------

// The output access of a reduction over `domain`: kept dims walk the output row-major, reduced
// dims stay put.
emitter::Access reduction_output(int buffer, ir::DType dtype, const ir::Shape& domain, const std::vector<bool>& reduced) {
  emitter::Access a;
  a.buffer = buffer;
  a.dtype = dtype;
  a.store = true;
  a.stride.assign(domain.size(), Poly());
  Poly acc = Poly::constant(1);
  for (size_t d = domain.size(); d-- > 0;) {
    if (reduced[d]) continue;
    a.stride[d] = acc;
    acc = acc * Poly::dim(domain[d]);
  }
  return a;
}

// `auto elem = [&](int64_t i) -> T { ...; return v; };` for the inner dim.
void emit_elem_lambda(Writer& w, const emitter::ExprBuilder& eb, const emitter::Nest& nest, int inner, int value) {
  w.open(fmt::format("auto elem = [&](int64_t i) -> {}", vtype(eb.values.at(size_t(value)).dtype)));
  emitter::emit_values(w, eb, nest, inner, "i");
  w.line(fmt::format("return v{};", value));
  w.close(";");
}

// Column sums (every outer dim reduced, a short static inner dim kept: batch norm's per-channel
// sums over NHWC) accumulate rows in kRowPartials partial results taken in turn, so that
// consecutive rows do not wait on each other's store (one chain of load-add-store per row ran at
// 16 GB/s), then combine them pairwise in a fixed order: the same bits on every run.
constexpr int64_t kRowPartials = 4;
constexpr int64_t kMaxPartialColumns = 256;
static_assert(kRowPartials == 4, "emit_row_partials_out combines four partial results");

// The kept inner dim's static size when the row-partials form applies, else 0.
int64_t row_partial_columns(const emitter::Nest& nest, bool inner_reduced) {
  const int r = int(nest.size.size());
  if (r < 2 || inner_reduced) return 0;
  for (int d = 0; d + 1 < r; ++d)
    if (nest.cls[size_t(d)] != 1) return 0;
  for (int64_t c = 1; c <= kMaxPartialColumns; ++c)
    if (nest.size[size_t(r - 1)].is_constant(c)) return c;
  return 0;
}

template <class Combine>
void emit_row_partials_out(Writer& w, const emitter::Nest& nest, int out, int inner, int64_t columns,
                           const std::string& out_buf, const Combine& combine, const std::string& parts) {
  const std::string var = fmt::format("i{}", inner);
  auto part = [&](int64_t k) { return fmt::format("{}[{} + {}]", parts, k * columns, var); };
  w.open("");
  w.line(fmt::format("const int64_t a{} = off{};", out, out));   // no outer strides: all reduced
  w.line(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) {2}[{3}] = {4};", var, columns, out_buf,
                     emitter::address(nest, out, inner, var),
                     combine(combine(part(0), part(1)), combine(part(2), part(3)))));
  w.close();
}

void emit_reduce(Writer& w, const KernelPlan& plan, const Kernel& k) {
  emitter::ReductionKernel rk(plan, k);
  const ir::Node& red = rk.node;
  const ir::DType t = red.type.dtype;
  const std::string T = vtype(t);
  const ir::Op op = red.op;
  const Poly& count = rk.dims.count;
  emitter::ExprBuilder& eb = rk.eb;
  const int v = rk.value, out_buffer = rk.out_buffer;
  int out = eb.add_access(reduction_output(out_buffer, t, rk.in.shape, rk.dims.reduced));
  emitter::Nest nest = rk.nest();
  const std::string id = emitter::c_identity(op, t);
  auto combine = [&](const std::string& a, const std::string& b) { return emitter::c_combine(op, t, a, b); };

  w.open("");
  emitter::emit_nest_constants(w, nest);
  w.line(fmt::format("const int64_t out_size = {};", Poly::product(red.type.shape, 0, red.type.rank()).c_expr()));
  if (op == ir::Op::ReduceMax || op == ir::Op::ReduceMin)
    w.line(fmt::format("if ({} == 0) return {};", count.c_expr(), int64_t(KernelError::EmptyReduction)));
  const int r = int(nest.size.size());
  const int inner = r - 1;
  bool outer_reduced = false;
  for (int d = 0; d < inner; ++d) outer_reduced |= nest.cls[size_t(d)] == 1;
  const bool inner_reduced = r > 0 && nest.cls[size_t(inner)] == 1;
  if (r > 0 && (!inner_reduced || outer_reduced))
    w.line(fmt::format("for (int64_t q = 0; q < out_size; ++q) {}[q] = {};", buf(out_buffer), id));
  std::vector<int> outer;
  for (int d = 0; d < inner; ++d) outer.push_back(d);
  int opened = emitter::open_outer_loops(w, nest, outer);
  if (r == 0) {
    emitter::emit_values(w, eb, nest, -1, "i");
    w.line(store(out_buffer, emitter::address(nest, out, -1, "i"), t, fmt::format("v{}", v)));
  } else if (inner_reduced && (op == ir::Op::ReduceSum || op == ir::Op::ReduceMean || op == ir::Op::ReduceProd)) {
    // The vectoriser keeps VF x interleave partial results (several accumulators); the pragma
    // allows it to reassociate the float sum, which it would not do on its own.
    emit_elem_lambda(w, eb, nest, inner, v);
    w.line(fmt::format("{} r = {};", T, id));
    w.line("#pragma clang loop vectorize(enable) interleave_count(4)");
    w.line(fmt::format("for (int64_t i = 0; i < n{}; ++i) r = {};", inner, combine("r", "elem(i)")));
    std::string target = fmt::format("{}[{}]", buf(out_buffer), emitter::address(nest, out, -1, "i"));
    w.line(fmt::format("{} = {};", target, outer_reduced ? combine(target, "r") : "r"));
  } else if (inner_reduced) {
    // max / min propagate NaN, which is no reduction pattern LLVM knows: explicit lanes make
    // it an element-wise loop over `acc`, which it vectorises.
    emit_elem_lambda(w, eb, nest, inner, v);
    w.line(fmt::format("{} acc[{}];", T, kLanes));
    w.line(fmt::format("for (int l = 0; l < {}; ++l) acc[l] = {};", kLanes, id));
    w.line("int64_t i = 0;");
    w.open(fmt::format("for (; i + {0} <= n{1}; i += {0})", kLanes, inner));
    w.line(fmt::format("for (int l = 0; l < {}; ++l) acc[l] = {};", kLanes, combine("acc[l]", "elem(i + l)")));
    w.close();
    w.line(fmt::format("{} r = {};", T, id));
    w.line(fmt::format("for (int l = 0; l < {}; ++l) r = {};", kLanes, combine("r", "acc[l]")));
    w.line(fmt::format("for (; i < n{}; ++i) r = {};", inner, combine("r", "elem(i)")));
    std::string target = fmt::format("{}[{}]", buf(out_buffer), emitter::address(nest, out, -1, "i"));
    w.line(fmt::format("{} = {};", target, outer_reduced ? combine(target, "r") : "r"));
  } else {
    std::string var = fmt::format("i{}", inner);
    w.open(fmt::format("for (int64_t {0} = 0; {0} < n{1}; ++{0})", var, inner));
    emitter::emit_values(w, eb, nest, inner, var);
    std::string target = fmt::format("{}[{}]", buf(out_buffer), emitter::address(nest, out, inner, var));
    w.line(fmt::format("{} = {};", target, combine(target, fmt::format("v{}", v))));
    w.close();
  }
  for (int i = 0; i < opened; ++i) w.close();
  if (op == ir::Op::ReduceMean) {
    w.line(fmt::format("const {} count = ({})({});", T, T, count.c_expr()));
    w.line(fmt::format("for (int64_t q = 0; q < out_size; ++q) {0}[q] = {0}[q] / count;", buf(out_buffer)));
  }
  w.close();
}

// The column form of a reduce kernel with one root or several (FusionOptions::sibling_column_sums,
// batch norm's sum(g) and sum(g * x)): one pass computes every root's operand and combines each
// into its own rotating partial rows; a kernel not of that form goes to emit_reduce, root by root.
void emit_reduce_kernel(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& first = node_of(plan, k.roots[0]);
  const ir::TensorType& in = node_of(plan, first.operands[0]).type;
  const emitter::ReductionDims dims = emitter::reduction_dims(first, in);
  emitter::ExprBuilder eb(plan, k, in.rank());
  struct Root {
    const ir::Node* node;
    int value, buffer, out;
  };
  std::vector<Root> roots;
  for (ir::NodeId id : k.roots) {
    const ir::Node& r = node_of(plan, id);
    roots.push_back({&r, eb.value(r.operands[0], emitter::identity_map(in.rank())), buffer_of(plan, id), -1});
  }
  for (Root& r : roots) r.out = eb.add_access(reduction_output(r.buffer, r.node->type.dtype, in.shape, dims.reduced));
  const emitter::Nest nest = emitter::collapse(emitter::domain_of(in.shape), dims.cls, eb.accesses);
  const int rank = int(nest.size.size()), inner = rank - 1;
  const int64_t columns = row_partial_columns(nest, rank > 0 && nest.cls[size_t(inner)] == 1);
  if (columns == 0) {   // fusion merges only column sums; a single root may be any reduction
    for (ir::NodeId id : k.roots) {
      Kernel single = k;
      single.roots = {id};
      emit_reduce(w, plan, single);
    }
    return;
  }
  const ir::DType t = first.type.dtype;
  const ir::Op op = first.op;   // siblings are sums and means, which combine alike
  auto combine = [&](const std::string& a, const std::string& b) { return emitter::c_combine(op, t, a, b); };
  w.open("");
  emitter::emit_nest_constants(w, nest);
  if (op == ir::Op::ReduceMax || op == ir::Op::ReduceMin)
    w.line(fmt::format("if ({} == 0) return {};", dims.count.c_expr(), int64_t(KernelError::EmptyReduction)));
  for (size_t j = 0; j < roots.size(); ++j) {
    w.line(fmt::format("{} part{}[{}];", vtype(t), j, kRowPartials * columns));
    w.line(fmt::format("for (int64_t q = 0; q < {}; ++q) part{}[q] = {};", kRowPartials * columns, j,
                       emitter::c_identity(op, t)));
  }
  std::vector<int> outer;
  for (int d = 0; d < inner; ++d) outer.push_back(d);
  const std::string var = fmt::format("i{}", inner);
  auto emit_row = [&] {   // the current row into every root's partials at `slot`
    w.open(fmt::format("for (int64_t {0} = 0; {0} < n{1}; ++{0})", var, inner));
    emitter::emit_values(w, eb, nest, inner, var);
    for (size_t j = 0; j < roots.size(); ++j) {
      const std::string target = fmt::format("part{}[slot + {}]", j, var);
      w.line(fmt::format("{} = {};", target, combine(target, fmt::format("v{}", roots[j].value))));
    }
    w.close();
  };
  if (inner == 1) {
    // One outer dim (the usual case: NHWC's N, H and W collapse into one): the rows are unrolled
    // by four, each with a constant slot, so that the partials can live in registers; a slot
    // computed per row kept them in memory (docs/performance/models.md, "Column sums with their
    // partial rows in registers").
    // The rows meet the partials in the same order: the same bits.
    w.open("auto row_at = [&](const int64_t i0, const int64_t slot) __attribute__((always_inline))");
    emitter::emit_outer_addresses(w, nest, outer);
    emit_row();
    w.close(";");
    w.line("int64_t i0 = 0;");
    w.line(fmt::format("for (; i0 + 4 <= n0; i0 += 4) {{ row_at(i0, 0); row_at(i0 + 1, {}); row_at(i0 + 2, {}); "
                       "row_at(i0 + 3, {}); }}", columns, 2 * columns, 3 * columns));
    w.line(fmt::format("for (int64_t slot = 0; i0 < n0; ++i0, slot += {}) row_at(i0, slot);", columns));
  } else {
    w.line("int64_t row = 0;");
    const int opened = emitter::open_outer_loops(w, nest, outer);
    w.line(fmt::format("const int64_t slot = (row++ % {}) * {};", kRowPartials, columns));
    emit_row();
    for (int i = 0; i < opened; ++i) w.close();
  }
  for (size_t j = 0; j < roots.size(); ++j) {
    emit_row_partials_out(w, nest, roots[j].out, inner, columns, buf(roots[j].buffer), combine, fmt::format("part{}", j));
    if (roots[j].node->op != ir::Op::ReduceMean) continue;
    w.line(fmt::format("for (int64_t q = 0; q < {0}; ++q) {1}[q] = {1}[q] / ({2})({3});", columns, buf(roots[j].buffer),
                       vtype(t), dims.count.c_expr()));
  }
  w.close();
}

void emit_argmax(Writer& w, const KernelPlan& plan, const Kernel& k) {
  emitter::ReductionKernel rk(plan, k);
  const ir::Node& am = rk.node;
  emitter::ExprBuilder& eb = rk.eb;
  const int v = rk.value, out_buffer = rk.out_buffer;
  int out = eb.add_access(reduction_output(out_buffer, am.type.dtype, rk.in.shape, rk.dims.reduced));
  emitter::Nest nest = rk.nest();
  std::vector<int> outer;
  const int axis_dim = emitter::argmax_axis_dim(nest, &outer);
  w.open("");
  emitter::emit_nest_constants(w, nest);
  if (axis_dim < 0) {   // the axis has static size 1: the answer is always 0
    w.line(fmt::format("const int64_t out_size = {};", Poly::product(am.type.shape, 0, am.type.rank()).c_expr()));
    w.line(fmt::format("for (int64_t q = 0; q < out_size; ++q) {}[q] = 0;", buf(out_buffer)));
    w.close();
    return;
  }
  w.line(fmt::format("if (n{} == 0) return {};", axis_dim, int64_t(KernelError::EmptyReduction)));
  int opened = emitter::open_outer_loops(w, nest, outer);
  emit_elem_lambda(w, eb, nest, axis_dim, v);
  const std::string T = vtype(eb.values.at(size_t(v)).dtype);
  w.line(fmt::format("{} best = elem(0);", T));
  w.line("int64_t best_index = 0;");
  w.open(fmt::format("for (int64_t i = 1; i < n{}; ++i)", axis_dim));
  w.line(fmt::format("const {} x = elem(i);", T));
  // The first maximum wins; the first NaN beats everything (numpy's argmax).
  if (ir::is_float(eb.values.at(size_t(v)).dtype))
    w.line("if (x > best || (x != x && best == best)) { best = x; best_index = i; }");
  else
    w.line("if (x > best) { best = x; best_index = i; }");
  w.close();
  w.line(fmt::format("{}[{}] = best_index;", buf(out_buffer), emitter::address(nest, out, -1, "i")));
  for (int i = 0; i < opened; ++i) w.close();
  w.close();
}

// --- whole-array kernels -------------------------------------------------------------------------

// outer * len * inner sizes around `axis` of a contiguous shape.
struct AxisSplit { Poly outer, len, inner; };
AxisSplit split_at(const ir::Shape& s, size_t axis) {
  return {Poly::product(s, 0, axis), Poly::dim(s.at(axis)), Poly::product(s, axis + 1, s.size())};
}

void emit_softmax(Writer& w, const KernelPlan& plan, const Kernel& k, bool log) {
  const ir::Node& sm = node_of(plan, k.roots[0]);
  const ir::DType t = sm.type.dtype;
  const std::string T = vtype(t);
  const char* sfx = t == ir::DType::F32 ? "f32" : "f64";
  AxisSplit s = split_at(sm.type.shape, size_t(sm.attrs.axis));
  const bool unit = s.inner.is_constant(1);
  const std::string x = buf(buffer_of(plan, sm.operands[0])), y = buf(buffer_of(plan, k.roots[0]));
  auto at = [&](const std::string& row) { return unit ? row + "[t]" : row + "[t * ni]"; };
  w.open("");
  w.line(fmt::format("const int64_t no = {}, nl = {}, ni = {};", s.outer.c_expr(), s.len.c_expr(), s.inner.c_expr()));
  w.open("for (int64_t o = 0; o < no; ++o)");
  w.open("for (int64_t j = 0; j < ni; ++j)");
  w.line(fmt::format("const {} *__restrict__ xr = {} + o * nl * ni + j;", T, x));
  w.line(fmt::format("{} *__restrict__ yr = {} + o * nl * ni + j;", T, y));
  w.line(fmt::format("{} m = -__builtin_inf{}();", T, t == ir::DType::F32 ? "f" : ""));
  w.line(fmt::format("for (int64_t t = 0; t < nl; ++t) m = synk_max_{}(m, {});", sfx, at("xr")));
  w.line(fmt::format("{} s = 0;", T));
  w.line("#pragma clang loop vectorize(enable)");
  w.open("for (int64_t t = 0; t < nl; ++t)");
  w.line(fmt::format("const {} e = synk_exp_{}({} - m);", T, sfx, at("xr")));
  if (!log) w.line(fmt::format("{} = e;", at("yr")));
  w.line("s += e;");
  w.close();
  if (log) {
    // (x - m) - log(s), in this order: m + log(s) would absorb log(s) when |m| is huge.
    w.line(fmt::format("const {} ls = synk_log_{}(s);", T, sfx));
    w.line(fmt::format("for (int64_t t = 0; t < nl; ++t) {} = ({} - m) - ls;", at("yr"), at("xr")));
  } else {
    w.line(fmt::format("const {} inv = ({})1 / s;", T, T));
    w.line(fmt::format("for (int64_t t = 0; t < nl; ++t) {} *= inv;", at("yr")));
  }
  w.close();
  w.close();
  w.close();
}

// Lines along the axis one after another; consecutive j walk neighbouring elements, so each
// step of the scan touches one cache line per ni elements of the inner block.
void emit_cumsum(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const emitter::CumsumKernel c = emitter::open_cumsum(w, plan, k);
  w.open("for (int64_t o = 0; o < no; ++o)");
  w.open("for (int64_t j = 0; j < ni; ++j)");
  emitter::emit_cumsum_line(w, c);
  w.close();
  w.close();
  w.close();
}

void emit_cross_entropy(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const auto [ce, logits, labels, t, T, sfx, x, lab, y] = emitter::open_cross_entropy(w, plan, k);
  w.open("for (int64_t i = 0; i < n; ++i)");
  w.line(fmt::format("const {} *__restrict__ xr = {} + i * nk;", T, x));
  w.line(fmt::format("{} m = -__builtin_inf{}();", T, t == ir::DType::F32 ? "f" : ""));
  w.line(fmt::format("for (int64_t j = 0; j < nk; ++j) m = synk_max_{}(m, xr[j]);", sfx));
  w.line(fmt::format("{} s = 0;", T));
  w.line("#pragma clang loop vectorize(enable)");
  w.line(fmt::format("for (int64_t j = 0; j < nk; ++j) s += synk_exp_{}(xr[j] - m);", sfx));
  w.line(fmt::format("const {} ls = synk_log_{}(s);", T, sfx));
  if (ir::is_float(labels.type.dtype)) {
    w.line(fmt::format("const {} *__restrict__ pr = {} + i * nk;", emitter::c_type(labels.type.dtype), lab));
    w.line(fmt::format("{} loss = 0;", T));
    w.line("#pragma clang loop vectorize(enable)");
    w.line(fmt::format("for (int64_t j = 0; j < nk; ++j) loss -= ({})pr[j] * ((xr[j] - m) - ls);", T));
    w.line(fmt::format("{}[i] = loss;", y));
  } else {
    w.line(fmt::format("const int64_t label = (int64_t){}[i];", lab));
    w.line(fmt::format("if (label < 0 || label >= nk) {{ err[1] = i; err[2] = label; err[3] = nk; return {}; }}",
                       int64_t(KernelError::LabelOutOfRange)));
    w.line(fmt::format("{}[i] = -((xr[label] - m) - ls);", y));
  }
  w.close();
  w.close();
}

void emit_take(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const emitter::TakeBuffers b = emitter::open_take(w, plan, k);
  w.open("for (int64_t i = 0; i < n; ++i)");
  w.line(fmt::format("const int64_t r = (int64_t){}[i];", b.idx));
  w.line(fmt::format("if (r < 0 || r >= rows) {{ err[1] = i; err[2] = r; err[3] = rows; return {}; }}",
                     int64_t(KernelError::IndexOutOfRange)));
  w.line(fmt::format("for (int64_t t = 0; t < row; ++t) {}[i * row + t] = {}[r * row + t];", b.y, b.x));
  w.close();
  w.close();
}

void emit_one_hot(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const auto [lab, y, T] = emitter::open_one_hot(w, plan, k);
  w.open("for (int64_t i = 0; i < n; ++i)");
  w.line(fmt::format("const int64_t label = (int64_t){}[i];", lab));
  w.line(fmt::format("if (label < 0 || label >= nk) {{ err[1] = i; err[2] = label; err[3] = nk; return {}; }}",
                     int64_t(KernelError::LabelOutOfRange)));
  w.line(fmt::format("for (int64_t j = 0; j < nk; ++j) {}[i * nk + j] = ({})(j == label);", y, T));
  w.close();
  w.close();
}

// A random op's draws (base/philox.h), row by row: element e of row r at (row, e).
void emit_random(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::Node& rn = node_of(plan, k.roots[0]);
  const ir::TensorType& t = rn.type;
  w.open("");
  w.line(random_prologue(rn));
  w.open("for (int64_t r = 0; r < rows; ++r)");
  w.line(fmt::format("{} *__restrict__ out = {} + r * per_row;", emitter::c_type(t.dtype), buf(buffer_of(plan, k.roots[0]))));
  w.line(fmt::format("for (int64_t e = 0; e < per_row; ++e) out[e] = {};", random_draw(rn, "r", "e")));
  w.close();
  w.close();
}

// Integer (and any non-BLAS) matrix products: C[i, j] = sum_p A[i, p] * B[p, j] with vector
// operands as 1 x K / K x 1 matrices, transposes as strides; the j loop is contiguous in C.
void emit_matmul_loops(Writer& w, const KernelPlan& plan, const Kernel& k) {
  const ir::DType t = node_of(plan, k.roots[0]).type.dtype;
  const std::string T = vtype(t);
  const char* sfx = emitter::arith_suffix(t);
  w.open("");
  emitter::emit_matmul_dims(w, plan, k);
  const std::string a = buf(k.matmul_a), b = buf(k.matmul_b), c = buf(buffer_of(plan, k.roots[0]));
  w.line(fmt::format("for (int64_t q = 0; q < M * N; ++q) {}[q] = 0;", c));
  w.open("for (int64_t i = 0; i < M; ++i)");
  w.open("for (int64_t p = 0; p < K; ++p)");
  w.line(fmt::format("const {} av = {}[i * sam + p * sak];", T, a));
  w.line(fmt::format("for (int64_t j = 0; j < N; ++j) {0}[i * N + j] = synk_add_{1}({0}[i * N + j], synk_mul_{1}(av, {2}[p * sbk + j * sbn]));",
                     c, sfx, b));
  w.close();
  w.close();
  w.close();
}

void emit_kernel_body(Writer& w, const KernelPlan& plan, const Kernel& k) {
  switch (k.kind) {
    case KernelKind::Pointwise: emit_pointwise(w, plan, k); break;
    case KernelKind::Concat: emit_concat(w, plan, k); break;
    case KernelKind::Reduce: emit_reduce_kernel(w, plan, k); break;
    case KernelKind::ArgMax: emit_argmax(w, plan, k); break;
    case KernelKind::Softmax: emit_softmax(w, plan, k, false); break;
    case KernelKind::LogSoftmax: emit_softmax(w, plan, k, true); break;
    case KernelKind::Cumsum: emit_cumsum(w, plan, k); break;
    case KernelKind::CrossEntropy: emit_cross_entropy(w, plan, k); break;
    case KernelKind::Take: emit_take(w, plan, k); break;
    case KernelKind::OneHot: emit_one_hot(w, plan, k); break;
    case KernelKind::Random: emit_random(w, plan, k); break;
    case KernelKind::MatMul: emit_matmul_loops(w, plan, k); break;
    case KernelKind::Dnn: synk::internal_error("a dnn step has no generated code");   // a library step
  }
}

}  // namespace

CpuSourceParts generate_cpu_source_parts(const ir::Module& module, const KernelPlan& plan, std::string_view module_prefix) {
  Writer w;
  w.line(fmt::format("// synk: CPU kernels of function '{}' ({} kernels; BLAS calls run on the host).",
                     plan.function.name, plan.kernels.size()));
  CpuSourceParts parts;
  parts.head = w.str() + cpu::cpu_prelude();
  for (const Kernel& k : plan.kernels) {
    Writer kw;
    kw.line("");
    std::string sym = kernel_symbol(plan, k, module_prefix);
    if (k.kind == KernelKind::Dnn) {
      kw.line(fmt::format("// {}: {} on the host (compiler/dnn)", k.name, node_str(&module, plan.function, k.roots.at(0))));
      parts.kernels.push_back(kw.str());
      continue;
    }
    if (kernel_uses_blas(plan, k)) {
      kw.line(fmt::format("// {}: {} via BLAS on the host (b{}{} x b{}{} -> b{})", k.name, kernel_kind_name(k.kind),
                          k.matmul_a, k.trans_a ? "^T" : "", k.matmul_b, k.trans_b ? "^T" : "", k.outputs.at(0)));
      parts.kernels.push_back(kw.str());
      continue;
    }
    kw.line(fmt::format("// {}: {}", k.name, kernel_kind_name(k.kind)));
    for (ir::NodeId id : k.nodes) kw.line("//   " + node_str(&module, plan.function, id));
    std::vector<std::string> params, casts;
    for (int b : kernel_buffer_params(k)) {
      bool out = std::count(k.outputs.begin(), k.outputs.end(), b) > 0;
      const char* ct = emitter::c_type(plan.buffers.at(size_t(b)).type.dtype);
      params.push_back(fmt::format("{}{} *__restrict__ b{}", out ? "" : "const ", ct, b));
      casts.push_back(fmt::format("({}{}*)bufs[{}]", out ? "" : "const ", ct, casts.size()));
    }
    params.push_back("const int64_t *__restrict__ syms");
    params.push_back("int64_t *__restrict__ err");
    kw.open(fmt::format("static __attribute__((noinline)) int64_t {}_body({})", sym, fmt::join(params, ", ")));
    for (size_t s = 0; s < plan.symbols.size(); ++s)
      kw.line(fmt::format("const int64_t s_{} = syms[{}]; (void)s_{};", plan.symbols[s], s, plan.symbols[s]));
    kw.line(hidden_symbol_lines(plan.symbols.size(), "syms"));
    kw.line("const bool synk_keep = synk_opaque_true; (void)synk_keep;");
    kw.line("bool cast_bad = false; (void)cast_bad;");
    kw.line("bool div_bad = false; (void)div_bad;");
    emit_kernel_body(kw, plan, k);
    kw.line(fmt::format("return cast_bad ? {} : div_bad ? {} : 0;", int64_t(KernelError::CastOutOfRange),
                        int64_t(KernelError::DivisionByZero)));
    kw.close();
    kw.open(fmt::format("extern \"C\" int64_t {}(void* const* bufs, const int64_t* syms, int64_t* err)", sym));
    casts.push_back("syms");
    casts.push_back("err");
    kw.line(fmt::format("return {}_body({});", sym, fmt::join(casts, ", ")));
    kw.close();
    parts.kernels.push_back(kw.str());
  }
  return parts;
}

std::string CpuSourceParts::joined() const {
  std::string text = head;
  for (const std::string& k : kernels) text += k;
  return text;
}

std::string generate_cpu_source(const ir::Module& module, const KernelPlan& plan, std::string_view module_prefix) {
  return generate_cpu_source_parts(module, plan, module_prefix).joined();
}

std::vector<std::string> split_translation_units(const CpuSourceParts& parts, int units) {
  size_t total = 0;
  for (const std::string& k : parts.kernels) total += k.size();
  // A unit repeats the head (Clang parses the prelude again): not worth it for a few small
  // kernels.
  constexpr size_t kMinKernelText = 2000;
  const size_t count = std::min<size_t>(size_t(std::max(units, 1)), std::max<size_t>(total / kMinKernelText, 1));
  if (count <= 1) return {parts.joined()};
  std::vector<std::string> out;
  std::string unit = parts.head;
  size_t done = 0, in_unit = 0;
  for (const std::string& k : parts.kernels) {
    // Close the unit once it holds its share of what is left.
    const size_t share = (total - done + in_unit) / (count - out.size());
    if (in_unit > 0 && in_unit + k.size() / 2 > share && out.size() + 1 < count) {
      out.push_back(std::move(unit));
      unit = parts.head;
      in_unit = 0;
    }
    unit += k;
    in_unit += k.size();
    done += k.size();
  }
  out.push_back(std::move(unit));
  return out;
}

}  // namespace synk::compiler
