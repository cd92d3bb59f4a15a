// CUDA kernels that combine many elements into one (see codegen_cuda.h): reductions with their
// fused pointwise producers, argmax, softmax / log_softmax, cumsum (a scan along an axis) and
// cross_entropy. Rows whose reduced elements are contiguous get a block each (RowTeams: threads
// stride over the row, 16-byte vector loads when aligned, then synk_block_reduce); reductions
// over outer dims get a thread per output (Columns), which keeps a warp's loads coalesced along
// the kept inner dim. Large reductions with few outputs split each output over several blocks:
// every block leaves a partial in scratch, and the last one to arrive (an atomic counter per
// output) combines them in a fixed order, so the result is deterministic and the whole thing
// stays one launch.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/emitter.h"
#include "compiler/cuda/codegen_cuda.h"

namespace synk::compiler::cuda_detail {
namespace {

using emitter::Writer;

using emitter::buffer_of;
using emitter::node_of;
std::string vtype(ir::DType t) { return emitter::c_value_type(t); }

ir::Shape dims_where(const ir::Shape& shape, const std::vector<bool>& pick, bool value) {
  ir::Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (pick[d] == value) out.push_back(shape[d]);
  return out;
}

// Nest dims of class 0 (kept) and class 1 (reduced).
void split_dims(const emitter::Nest& nest, std::vector<int>* kept, std::vector<int>* reduced) {
  for (size_t d = 0; d < nest.size.size(); ++d) (nest.cls[d] == 1 ? reduced : kept)->push_back(int(d));
}

// The scalar (non-vector) step over reduced index `r`: addresses, values, and `accumulate`
// applied to the reduced value's name.
void emit_scalar_step(Writer& w, const emitter::ExprBuilder& eb, const emitter::Nest& nest, const std::vector<int>& reduced,
                      const std::string& accumulate_line) {
  emit_decompose(w, "r", reduced, "r");
  emit_addresses(w, nest, "a", "c", reduced);
  emitter::emit_values(w, eb, nest, -1, "");
  w.line(accumulate_line);
}

// The loops of a reduction kernel after its constants, in one of the two launch shapes: the nest
// with its kept and reduced dims, the accumulator's C type `T` and the operand's value `v`.
struct ReduceBody {
  Writer& w;
  const emitter::ExprBuilder& eb;
  const emitter::Nest& nest;
  const std::vector<int>& kept;
  const std::vector<int>& reduced;
  ir::Op op;
  ir::DType t;
  std::string T;
  int v;
  int out_buffer;
  std::string accumulate = fmt::format("acc = combine(acc, ({})(v{}));", T, v);

  // The stored result: a mean divides the combined value by the number of elements.
  std::string finish(const std::string& x) const {
    return op == ir::Op::ReduceMean ? fmt::format("{} / ({})count", x, T) : x;
  }

  void row_teams(CudaKernelLaunch& launch) const {
    // RowTeams: block-stride over (output, split) work items.
    const bool contiguous_row = reduced.size() == 1 && reduced[0] == int(nest.size.size()) - 1;
    const int width = contiguous_row ? vector_width(eb, nest, reduced[0]) : 1;
    launch.vector_width = width;
    w.line(fmt::format("{0}* partials = ({0}*)((char*)scratch + (out_size * 4 + 15) / 16 * 16);", T));
    w.line(fmt::format("const int64_t chunk = splits > 1 ? synk_split_chunk(count, splits, (int64_t)blockDim.x * {}) : count;",
                       width));
    w.open("for (int64_t w = blockIdx.x; w < out_size * splits; w += gridDim.x)");
    w.line("const int64_t q = w / splits, part = w - q * splits;");
    emit_decompose(w, "q", kept, "q");
    emit_addresses(w, nest, "c", "off", kept);
    w.line("const int64_t lo = part * chunk < count ? part * chunk : count;");
    w.line("const int64_t hi = count - lo > chunk ? lo + chunk : count;");
    w.line(fmt::format("{} acc = identity;", T));
    w.line("int64_t scalar_lo = lo;");
    if (width > 1) {
      w.open(fmt::format("if ({})", vector_aligned_condition(eb, nest, reduced[0], width, "c")));
      w.line(fmt::format("const int64_t vector_hi = lo + (hi - lo) / {0} * {0};", width));
      w.open(fmt::format("for (int64_t r = lo + (int64_t)threadIdx.x * {0}; r < vector_hi; r += (int64_t)blockDim.x * {0})",
                         width));
      emit_vector_values(w, eb, nest, reduced[0], width, "c", "r");
      for (int l = 0; l < width; ++l) w.line(fmt::format("acc = combine(acc, ({})(v{}_{}));", T, l, v));
      w.close();
      w.line("scalar_lo = vector_hi;");
      w.close();
    }
    w.open("for (int64_t r = scalar_lo + threadIdx.x; r < hi; r += blockDim.x)");
    emit_scalar_step(w, eb, nest, reduced, accumulate);
    w.close();
    w.line("acc = synk_block_reduce(acc, identity, combine);");
    w.open("if (splits == 1)");
    w.line("if (threadIdx.x == 0) " + store(out_buffer, "q", t, finish("acc")));
    w.close();
    w.open("else");
    // The last block to finish a part of output q combines every part, the whole block reading
    // the partials in a fixed assignment (deterministic).
    w.line("__shared__ bool last_block;");
    w.open("if (threadIdx.x == 0)");
    w.line("partials[w] = acc;");
    w.line("__threadfence();");
    w.line("last_block = atomicAdd(&counters[q], 1u) == (unsigned int)(splits - 1);");
    w.close();
    w.line("__syncthreads();");
    w.open("if (last_block)");
    w.line("__threadfence();");
    w.line(fmt::format("{} total = identity;", T));
    w.line(fmt::format("for (int64_t s = threadIdx.x; s < splits; s += blockDim.x) total = combine(total, ((volatile {}*)partials)[q * splits + s]);", T));
    w.line("total = synk_block_reduce(total, identity, combine);");
    w.line("if (threadIdx.x == 0) " + store(out_buffer, "q", t, finish("total")));
    w.close();
    w.close();
    w.close();
  }

  void columns() const {
    // Columns: thread per output, grid.y splits the reduced range.
    w.line(fmt::format("{0}* partials = ({0}*)((char*)scratch + ((int64_t)gridDim.x * 4 + 15) / 16 * 16);", T));
    w.line("const int64_t q = synk_thread(), part = blockIdx.y;");
    w.line("const int64_t chunk = (count + splits - 1) / splits;");
    w.line(fmt::format("{} acc = identity;", T));
    w.open("if (q < out_size)");
    emit_decompose(w, "q", kept, "q");
    emit_addresses(w, nest, "c", "off", kept);
    w.line("const int64_t lo = part * chunk < count ? part * chunk : count;");
    w.line("const int64_t hi = count - lo > chunk ? lo + chunk : count;");
    w.open("for (int64_t r = lo; r < hi; ++r)");
    emit_scalar_step(w, eb, nest, reduced, accumulate);
    w.close();
    w.close();
    w.open("if (splits == 1)");
    w.line("if (q < out_size) " + store(out_buffer, "q", t, finish("acc")));
    w.close();
    w.open("else");
    w.line("__shared__ bool last_block;");
    w.line("if (q < out_size) partials[part * out_size + q] = acc;");
    w.line("__threadfence();");
    w.line("__syncthreads();");
    w.line("if (threadIdx.x == 0) last_block = atomicAdd(&counters[blockIdx.x], 1u) == (unsigned int)(splits - 1);");
    w.line("__syncthreads();");
    w.open("if (last_block && q < out_size)");
    w.line("__threadfence();");
    w.line(fmt::format("{} total = identity;", T));
    w.line(fmt::format("for (int64_t s = 0; s < splits; ++s) total = combine(total, ((volatile {}*)partials)[s * out_size + q]);", T));
    w.line(store(out_buffer, "q", t, finish("total")));
    w.close();
    w.close();
  }
};

}  // namespace

void emit_cuda_reduce(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  if (k.roots.size() != 1)   // FusionOptions::sibling_column_sums is the CPU plans' alone
    synk::internal_error(fmt::format("codegen_cuda: reduce kernel {} has {} roots", k.name, k.roots.size()));
  const emitter::ReductionKernel rk(plan, k);
  const ir::Node& red = rk.node;
  const ir::DType t = red.type.dtype;
  const std::string T = vtype(t);
  const ir::Op op = red.op;
  const emitter::ExprBuilder& eb = rk.eb;
  const int v = rk.value, out_buffer = rk.out_buffer;
  emitter::Nest nest = rk.nest();
  std::vector<int> kept, reduced;
  split_dims(nest, &kept, &reduced);
  const bool columns = !nest.size.empty() && nest.cls.back() == 0;

  launch.kind = columns ? CudaLaunchKind::Columns : CudaLaunchKind::RowTeams;
  launch.work = red.type.shape;
  launch.reduced = dims_where(rk.in.shape, rk.dims.reduced, true);
  launch.splittable = true;
  launch.partial_bytes = int(ir::dtype_size(t == ir::DType::Bool ? ir::DType::U8 : t));
  launch.empty_reduction_error = op == ir::Op::ReduceMax || op == ir::Op::ReduceMin;

  const ReduceBody body{w, eb, nest, kept, reduced, op, t, T, v, out_buffer};
  w.open("");
  emitter::emit_nest_constants(w, nest);
  w.line(fmt::format("const int64_t out_size = {};", product_of(nest, kept)));
  w.line(fmt::format("const int64_t count = {};", product_of(nest, reduced)));
  w.line(fmt::format("const {} identity = {};", T, emitter::c_identity(op, t)));
  w.line(fmt::format("auto combine = []({0} a, {0} b) -> {0} {{ return {1}; }};", T, emitter::c_combine(op, t, "a", "b")));
  w.line("unsigned int* counters = (unsigned int*)scratch;");
  if (!columns) body.row_teams(launch);
  else body.columns();
  w.close();
}

void emit_cuda_argmax(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const emitter::ReductionKernel rk(plan, k);
  const ir::Node& am = rk.node;
  const emitter::ExprBuilder& eb = rk.eb;
  const int v = rk.value, out_buffer = rk.out_buffer;
  emitter::Nest nest = rk.nest();
  std::vector<int> kept;
  const int axis_dim = emitter::argmax_axis_dim(nest, &kept);
  launch.work = am.type.shape;
  launch.reduced = {rk.in.shape.at(size_t(am.attrs.axes.at(0)))};
  launch.empty_reduction_error = true;
  w.open("");
  emitter::emit_nest_constants(w, nest);
  if (axis_dim < 0) {   // the axis has static size 1: the answer is always 0
    launch.kind = CudaLaunchKind::Flat;
    launch.empty_reduction_error = false;
    w.line(fmt::format("const int64_t out_size = {};", Poly::product(am.type.shape, 0, am.type.rank()).c_expr()));
    w.line(fmt::format("for (int64_t e = synk_thread(); e < out_size; e += synk_threads()) {}[e] = 0;", buf(out_buffer)));
    w.close();
    return;
  }
  const std::string T = vtype(eb.values.at(size_t(v)).dtype);
  const bool columns = nest.cls.back() != 1;
  launch.kind = columns ? CudaLaunchKind::Columns : CudaLaunchKind::RowTeams;
  w.line(fmt::format("const int64_t out_size = {}, count = n{};", product_of(nest, kept), axis_dim));
  const std::string step = fmt::format("synk_argmax_combine(best, best_index, ({})(v{}), r);", T, v);
  // RowTeams: a block per output, its threads striding over the axis; Columns: a thread per output.
  w.open(columns ? "for (int64_t q = synk_thread(); q < out_size; q += synk_threads())"
                 : "for (int64_t q = blockIdx.x; q < out_size; q += gridDim.x)");
  emit_decompose(w, "q", kept, "q");
  emit_addresses(w, nest, "c", "off", kept);
  w.line(fmt::format("{} best = ({})0;", T, T));
  w.line("int64_t best_index = -1;");
  w.open(columns ? "for (int64_t r = 0; r < count; ++r)" : "for (int64_t r = threadIdx.x; r < count; r += blockDim.x)");
  emit_scalar_step(w, eb, nest, {axis_dim}, step);
  w.close();
  if (columns) {
    w.line(fmt::format("{}[q] = best_index;", buf(out_buffer)));
  } else {
    w.line("synk_block_argmax(best, best_index);");
    w.line(fmt::format("if (threadIdx.x == 0) {}[q] = best_index;", buf(out_buffer)));
  }
  w.close();
  w.close();
}

namespace {

// Rows of at most this many bytes are read from global memory once: the first pass keeps them in
// shared memory, where the later passes read them (16 KiB per block leaves 14 blocks of 256
// threads room on an SM of sm_80/sm_90, more than their thread limit allows). Longer rows are read
// again by every pass. Each thread touches only its own elements of the cache, so the passes need
// no barrier beyond those of the block reductions; the arithmetic, and so the bits, are the same
// on both paths.
constexpr int kRowCacheBytes = 16384;

// The declaration of a block's row cache of element type `T` and the flag `cached` saying whether
// a row (its length is `dim`, printed as `len`) fits in it. A row of static length gets a cache of
// its own size, so narrow rows (a classifier's ten logits, 32-thread blocks) keep every block
// resident that would be without it; a static row too long for the cache gets none.
void open_row_cache(Writer& w, ir::DType t, const std::string& T, const ir::Dim& dim, const std::string& len) {
  const int64_t capacity = kRowCacheBytes / int64_t(ir::dtype_size(t));
  if (dim.is_symbolic()) {
    w.line(fmt::format("__shared__ {} cache[{}];", T, capacity));
    w.line(fmt::format("const bool cached = {} <= {};", len, capacity));
  } else {
    const bool fits = dim.size <= capacity;
    w.line(fmt::format("__shared__ {} cache[{}];", T, fits ? std::max<int64_t>(dim.size, 1) : 1));
    w.line(fmt::format("const bool cached = {};", fits ? "true" : "false"));
  }
}

}  // namespace

void emit_cuda_softmax(Writer& w, const KernelPlan& plan, const Kernel& k, bool log, CudaKernelLaunch& launch) {
  const ir::Node& sm = node_of(plan, k.roots[0]);
  const ir::DType t = sm.type.dtype;
  const std::string T = vtype(t);
  const char* sfx = t == ir::DType::F32 ? "f32" : "f64";
  const size_t axis = size_t(sm.attrs.axis);
  const ir::Shape& shape = sm.type.shape;
  const Poly outer = Poly::product(shape, 0, axis), len = Poly::dim(shape.at(axis));
  const Poly inner = Poly::product(shape, axis + 1, shape.size());
  const std::string x = buf(buffer_of(plan, sm.operands[0])), y = buf(buffer_of(plan, k.roots[0]));
  const std::string minus_inf = fmt::format("-__builtin_inf{}()", t == ir::DType::F32 ? "f" : "");
  // The two passes after the maximum, shared by both launch shapes, given how a row's element is
  // read (`x_at`), where an exponential goes (`keep_e`, softmax only), how the kept exponential is
  // read back (`e_at`) and where the result goes (`y_at`); a block's threads (`team`) then add
  // their partial sums.
  struct Access {
    bool team;
    std::string loop, x_at, keep_e, e_at, y_at;
  };
  auto emit_exp_sum_and_result = [&](const Access& a) {
    w.line(fmt::format("{} s = 0;", T));
    w.open(a.loop);
    w.line(fmt::format("const {} e = synk_exp_{}({} - m);", T, sfx, a.x_at));
    if (!log) w.line(a.keep_e);
    w.line("s += e;");
    w.close();
    if (a.team)
      w.line(fmt::format("s = synk_block_reduce(s, ({0})0, []({0} a, {0} b) {{ return a + b; }});", T));
    if (log) {
      w.line(fmt::format("const {} lse = m + synk_log_{}(s);", T, sfx));
      w.line(fmt::format("{} {} = {} - lse;", a.loop, a.y_at, a.x_at));
    } else {
      w.line(fmt::format("const {0} inv = ({0})1 / s;", T));
      w.line(fmt::format("{} {} = {} * inv;", a.loop, a.y_at, a.e_at));
    }
  };
  w.open("");
  w.line(fmt::format("const int64_t no = {}, nl = {}, ni = {};", outer.c_expr(), len.c_expr(), inner.c_expr()));
  if (inner.is_constant(1)) {
    // A block per row, three passes (max; exponentials and their sum; the scaled or shifted
    // result), the row kept in the block's cache when it fits: softmax caches the exponentials,
    // log_softmax the inputs.
    launch.kind = CudaLaunchKind::RowTeams;
    launch.work = ir::Shape(shape.begin(), shape.begin() + long(axis));
    launch.reduced = {shape.at(axis)};
    open_row_cache(w, t, T, shape.at(axis), "nl");
    const std::string loop = "for (int64_t t = threadIdx.x; t < nl; t += blockDim.x)";
    w.open("for (int64_t row = blockIdx.x; row < no; row += gridDim.x)");
    w.line(fmt::format("const {} *__restrict__ xr = {} + row * nl;", T, x));
    w.line(fmt::format("{} *__restrict__ yr = {} + row * nl;", T, y));
    w.line(fmt::format("{} m = {};", T, minus_inf));
    w.open(loop);
    w.line(fmt::format("const {} v = xr[t];", T));
    w.line("if (cached) cache[t] = v;");
    w.line(fmt::format("m = synk_max_{}(m, v);", sfx));
    w.close();
    w.line(fmt::format("m = synk_block_reduce(m, {0}, []({1} a, {1} b) {{ return synk_max_{2}(a, b); }});", minus_inf, T, sfx));
    emit_exp_sum_and_result({true, loop, "(cached ? cache[t] : xr[t])", "if (cached) cache[t] = e; else yr[t] = e;",
                             "(cached ? cache[t] : yr[t])", "yr[t]"});
    w.close();
  } else {
    // Softmax along a non-last axis: a thread per (outer, inner) pair walks the axis with
    // stride ni; neighbouring threads read neighbouring inner elements (coalesced).
    launch.kind = CudaLaunchKind::Flat;
    ir::Shape work = shape;
    work.erase(work.begin() + long(axis));
    launch.work = work;
    const std::string loop = "for (int64_t t = 0; t < nl; ++t)";
    w.open("for (int64_t e = synk_thread(); e < no * ni; e += synk_threads())");
    w.line("const int64_t o = e / ni, j = e - o * ni;");
    w.line(fmt::format("const {} *__restrict__ xr = {} + o * nl * ni + j;", T, x));
    w.line(fmt::format("{} *__restrict__ yr = {} + o * nl * ni + j;", T, y));
    w.line(fmt::format("{} m = {};", T, minus_inf));
    w.line(fmt::format("{} m = synk_max_{}(m, xr[t * ni]);", loop, sfx));
    emit_exp_sum_and_result({false, loop, "xr[t * ni]", "yr[t * ni] = e;", "yr[t * ni]", "yr[t * ni]"});
    w.close();
  }
  w.close();
}

// A thread per line along the axis (Flat over the other dims), scanning it sequentially: the
// result is deterministic and bit-equal to the CPU's order of additions. Neighbouring threads
// take neighbouring inner elements, so loads coalesce when the axis is not the last; along the
// last axis each thread walks its own row (no block-wide scan yet).
void emit_cuda_cumsum(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const ir::Node& cs = node_of(plan, k.roots[0]);
  ir::Shape work = cs.type.shape;
  work.erase(work.begin() + long(cs.attrs.axis));
  launch.kind = CudaLaunchKind::Flat;
  launch.work = work;
  const emitter::CumsumKernel c = emitter::open_cumsum(w, plan, k);
  w.open("for (int64_t line = synk_thread(); line < no * ni; line += synk_threads())");
  w.line("const int64_t o = line / ni, j = line - o * ni;");
  emitter::emit_cumsum_line(w, c);
  w.close();
  w.close();
}

void emit_cuda_cross_entropy(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const auto [ce, logits, labels, t, T, sfx, x, lab, y] = emitter::open_cross_entropy(w, plan, k);
  const std::string minus_inf = fmt::format("-__builtin_inf{}()", t == ir::DType::F32 ? "f" : "");
  launch.kind = CudaLaunchKind::RowTeams;
  launch.work = {logits.type.shape.at(0)};
  launch.reduced = {logits.type.shape.at(1)};
  open_row_cache(w, t, T, logits.type.shape.at(1), "nk");
  const std::string loop = "for (int64_t j = threadIdx.x; j < nk; j += blockDim.x)";
  const std::string at = "(cached ? cache[j] : xr[j])";
  w.open("for (int64_t row = blockIdx.x; row < n; row += gridDim.x)");
  w.line(fmt::format("const {} *__restrict__ xr = {} + row * nk;", T, x));
  w.line(fmt::format("{} m = {};", T, minus_inf));
  w.open(loop);
  w.line(fmt::format("const {} v = xr[j];", T));
  w.line("if (cached) cache[j] = v;");
  w.line(fmt::format("m = synk_max_{}(m, v);", sfx));
  w.close();
  w.line(fmt::format("m = synk_block_reduce(m, {0}, []({1} a, {1} b) {{ return synk_max_{2}(a, b); }});", minus_inf, T, sfx));
  w.line(fmt::format("{} s = 0;", T));
  w.line(fmt::format("{} s += synk_exp_{}({} - m);", loop, sfx, at));
  w.line(fmt::format("s = synk_block_reduce(s, ({0})0, []({0} a, {0} b) {{ return a + b; }});", T));
  w.line(fmt::format("const {} lse = m + synk_log_{}(s);", T, sfx));
  if (ir::is_float(labels.type.dtype)) {
    w.line(fmt::format("const {} *__restrict__ pr = {} + row * nk;", emitter::c_type(labels.type.dtype), lab));
    w.line(fmt::format("{} loss = 0;", T));
    w.line(fmt::format("{} loss += ({})pr[j] * (lse - {});", loop, T, at));
    w.line(fmt::format("loss = synk_block_reduce(loss, ({0})0, []({0} a, {0} b) {{ return a + b; }});", T));
    w.line(fmt::format("if (threadIdx.x == 0) {}[row] = loss;", y));
  } else {
    w.open("if (threadIdx.x == 0)");
    w.line(fmt::format("const int64_t label = (int64_t){}[row];", lab));
    w.line(fmt::format("if (label < 0 || label >= nk) synk_fail(err, {}, row, nk);", int64_t(KernelError::LabelOutOfRange)));
    w.line(fmt::format("else {}[row] = lse - xr[label];", y));
    w.close();
  }
  w.close();
  w.close();
}

}  // namespace synk::compiler::cuda_detail
