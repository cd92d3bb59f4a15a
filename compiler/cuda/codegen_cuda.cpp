// The CUDA code generator (see codegen_cuda.h): the translation unit, the kernel signature, and
// the grid-stride kernels (pointwise, concat, take, one_hot, integer matmul). Reductions and the
// row kernels (softmax, log_softmax, cross_entropy) are in codegen_cuda_reduce.cpp, conv2d and
// pooling in codegen_cuda_dnn.cpp.
#include "compiler/cuda/codegen_cuda.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/errors.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/emitter.h"

namespace synk::compiler {

using emitter::Writer;

const char* cuda_launch_kind_name(CudaLaunchKind k) {
  switch (k) {
    case CudaLaunchKind::Flat: return "flat";
    case CudaLaunchKind::RowTeams: return "row-teams";
    case CudaLaunchKind::Columns: return "columns";
    case CudaLaunchKind::Blas: return "cublas";
  }
  return "?";
}

namespace cuda_detail {

std::string buf(int b) { return fmt::format("b{}", b); }

std::string store(int b, const std::string& index, ir::DType t, const std::string& value) {
  return fmt::format("{}[{}] = {};", buf(b), index, t == ir::DType::Bool ? "(uint8_t)(" + value + ")" : value);
}

std::string stride_term(const emitter::Nest& nest, size_t k, size_t d, const std::string& var) {
  const Poly& s = nest.stride.at(k).at(d);
  if (s.is_zero()) return "";
  if (s.is_constant(1)) return " + " + var;
  return fmt::format(" + {} * st{}_{}", var, k, d);
}

void emit_decompose(Writer& w, const std::string& index, const std::vector<int>& dims, const std::string& tag) {
  if (dims.empty()) return;
  if (dims.size() == 1) {
    w.line(fmt::format("const int64_t i{} = {};", dims[0], index));
    return;
  }
  const std::string rem = "rem_" + tag;
  w.line(fmt::format("int64_t {} = {};", rem, index));
  for (size_t j = dims.size(); j-- > 1;) {
    w.line(fmt::format("const int64_t i{0} = {1} % n{0};", dims[j], rem));
    w.line(fmt::format("{} /= n{};", rem, dims[j]));
  }
  w.line(fmt::format("const int64_t i{} = {};", dims[0], rem));
}

void emit_addresses(Writer& w, const emitter::Nest& nest, const std::string& name, const std::string& base,
                    const std::vector<int>& dims) {
  for (size_t k = 0; k < nest.stride.size(); ++k) {
    std::string a = fmt::format("{}{}", base, k);
    for (int d : dims) a += stride_term(nest, k, size_t(d), fmt::format("i{}", d));
    w.line(fmt::format("const int64_t {}{} = {};", name, k, a));
  }
}

std::string product_of(const emitter::Nest& nest, const std::vector<int>& dims) {
  if (dims.empty()) return "1";
  std::string s;
  for (int d : dims) s += (s.empty() ? "" : " * ") + fmt::format("n{}", d);
  return s;
}

int vector_width(const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d) {
  if (d < 0 || size_t(d) >= nest.size.size()) return 1;
  size_t widest = 0;
  for (size_t k = 0; k < eb.accesses.size(); ++k) {
    const Poly& s = nest.stride[k][size_t(d)];
    if (s.is_zero()) continue;
    if (!s.is_constant(1)) return 1;
    widest = std::max(widest, ir::dtype_size(eb.accesses[k].dtype == ir::DType::Bool ? ir::DType::U8 : eb.accesses[k].dtype));
  }
  return widest == 0 ? 1 : int(16 / widest);
}

std::string vector_aligned_condition(const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d, int width,
                                     const std::string& base) {
  std::vector<std::string> terms;
  for (size_t k = 0; k < eb.accesses.size(); ++k) {
    if (!nest.stride[k][size_t(d)].is_constant(1)) continue;
    terms.push_back(fmt::format("synk_aligned16({})", buf(eb.accesses[k].buffer)));
    terms.push_back(fmt::format("{}{} % {} == 0", base, k, width));
  }
  std::string c;
  for (const std::string& t : terms) c += (c.empty() ? "" : " && ") + t;
  return c.empty() ? "true" : c;
}

void emit_vector_values(Writer& w, const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d, int width,
                        const std::string& base, const std::string& index) {
  for (size_t k = 0; k < eb.accesses.size(); ++k) {
    const emitter::Access& a = eb.accesses[k];
    if (a.store) continue;
    const char* ct = emitter::c_type(a.dtype);
    if (nest.stride[k][size_t(d)].is_constant(1))
      w.line(fmt::format("const SynkVec<{0}, {1}> x{2} = *(const SynkVec<{0}, {1}>*)({3} + {4}{2} + {5});", ct, width, k,
                         buf(a.buffer), base, index));
    else
      w.line(fmt::format("const {} x{} = {}[{}{}];", ct, k, buf(a.buffer), base, k));
  }
  for (int l = 0; l < width; ++l) {
    const std::string prefix = fmt::format("v{}_", l);
    for (size_t i = 0; i < eb.values.size(); ++i) {
      std::string e = emitter::value_expr(eb, eb.plan(), int(i), prefix, [&](int k) {
        return nest.stride[size_t(k)][size_t(d)].is_constant(1) ? fmt::format("x{}.v[{}]", k, l) : fmt::format("x{}", k);
      });
      w.line(fmt::format("const {} {}{} = {};", emitter::c_value_type(eb.values[i].dtype), prefix, i, e));
    }
  }
}

std::vector<int> all_dims(const emitter::Nest& nest) {
  std::vector<int> dims;
  for (size_t d = 0; d < nest.size.size(); ++d) dims.push_back(int(d));
  return dims;
}

}  // namespace cuda_detail

namespace {

using namespace cuda_detail;

using emitter::buffer_of;
using emitter::node_of;

// One grid-stride loop nest computing `stores` (value index, store access) over `domain`; the
// vector path when the collapsed nest is one contiguous dimension. Returns its vector width.
int emit_flat_nest(Writer& w, const emitter::ExprBuilder& eb, const std::vector<Poly>& domain,
                   const std::vector<std::pair<int, int>>& stores) {
  emitter::Nest nest = emitter::collapse(domain, {}, eb.accesses);
  const int r = int(nest.size.size());
  w.open("");
  emitter::emit_nest_constants(w, nest);
  w.line(fmt::format("const int64_t total = {};", product_of(nest, all_dims(nest))));
  const int width = r == 1 ? vector_width(eb, nest, 0) : 1;
  std::string start = "synk_thread()";
  if (width > 1) {
    w.line("int64_t vector_end = 0;");
    w.open(fmt::format("if ({})", vector_aligned_condition(eb, nest, 0, width, "off")));
    w.line(fmt::format("vector_end = total / {0} * {0};", width));
    w.open(fmt::format("for (int64_t e = synk_thread() * {0}; e < vector_end; e += synk_threads() * {0})", width));
    emit_vector_values(w, eb, nest, 0, width, "off", "e");
    for (auto [value, access] : stores) {
      const emitter::Access& a = eb.accesses.at(size_t(access));
      const char* ct = emitter::c_type(a.dtype);
      w.line(fmt::format("SynkVec<{}, {}> y{};", ct, width, access));
      for (int l = 0; l < width; ++l)
        w.line(fmt::format("y{}.v[{}] = {}v{}_{};", access, l, a.dtype == ir::DType::Bool ? "(uint8_t)" : "", l, value));
      w.line(fmt::format("*(SynkVec<{0}, {1}>*)({2} + off{3} + e) = y{3};", ct, width, buf(a.buffer), access));
    }
    w.close();
    w.close();
    start = "vector_end + synk_thread()";
  }
  w.open(fmt::format("for (int64_t e = {}; e < total; e += synk_threads())", start));
  emit_decompose(w, "e", all_dims(nest), "e");
  emit_addresses(w, nest, "a", "off", all_dims(nest));
  emitter::emit_values(w, eb, nest, -1, "");
  for (auto [value, access] : stores) {
    const emitter::Access& a = eb.accesses.at(size_t(access));
    w.line(store(a.buffer, fmt::format("a{}", access), a.dtype, fmt::format("v{}", value)));
  }
  w.close();
  w.close();
  return width;
}

void emit_pointwise(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const ir::TensorType& type = node_of(plan, k.roots[0]).type;
  emitter::ExprBuilder eb(plan, k, type.rank());
  std::vector<std::pair<int, int>> stores;
  for (ir::NodeId root : k.roots) {
    int v = eb.value(root, emitter::identity_map(type.rank()));
    emitter::Access a = emitter::make_access(buffer_of(plan, root), node_of(plan, root).type, emitter::identity_map(type.rank()),
                                     type.rank());
    a.store = true;
    stores.push_back({v, eb.add_access(std::move(a))});
  }
  launch.kind = CudaLaunchKind::Flat;
  launch.work = type.shape;
  launch.vector_width = emit_flat_nest(w, eb, emitter::domain_of(type.shape), stores);
}

void emit_concat(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const ir::Node& cat = node_of(plan, k.roots[0]);
  int width = 16;
  emitter::emit_concat_parts(plan, k, [&](emitter::ExprBuilder& eb, const std::vector<Poly>& domain, int v, int s) {
    width = std::min(width, emit_flat_nest(w, eb, domain, {{v, s}}));
  });
  launch.kind = CudaLaunchKind::Flat;
  launch.work = cat.type.shape;
  launch.vector_width = width;
}

void emit_take(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const emitter::TakeBuffers b = emitter::open_take(w, plan, k);
  // Rows of length 0 still have their index checked (one step per row).
  w.line("const int64_t per_row = row > 0 ? row : 1;");
  w.open("for (int64_t e = synk_thread(); e < n * per_row; e += synk_threads())");
  w.line("const int64_t i = e / per_row, t = e - i * per_row;");
  w.line(fmt::format("const int64_t r = (int64_t){}[i];", b.idx));
  w.line(fmt::format("if (r < 0 || r >= rows) synk_fail(err, {}, i, rows);", int64_t(KernelError::IndexOutOfRange)));
  w.line(fmt::format("else if (row > 0) {}[i * row + t] = {}[r * row + t];", b.y, b.x));
  w.close();
  w.close();
  launch.kind = CudaLaunchKind::Flat;
  launch.work = node_of(plan, k.roots[0]).type.shape;
}

void emit_one_hot(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const auto [lab, y, T] = emitter::open_one_hot(w, plan, k);
  w.line("const int64_t per_row = nk > 0 ? nk : 1;");
  w.open("for (int64_t e = synk_thread(); e < n * per_row; e += synk_threads())");
  w.line("const int64_t i = e / per_row, j = e - i * per_row;");
  w.line(fmt::format("const int64_t label = (int64_t){}[i];", lab));
  w.line(fmt::format("if (label < 0 || label >= nk) synk_fail(err, {}, i, nk);", int64_t(KernelError::LabelOutOfRange)));
  w.line(fmt::format("else {}[e] = ({})(j == label);", y, T));
  w.close();
  w.close();
  launch.kind = CudaLaunchKind::Flat;
  launch.work = node_of(plan, k.roots[0]).type.shape;
}

// A random op's draws (base/philox.h): one thread per element, e of row r at (row, e).
void emit_random(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const ir::Node& rn = node_of(plan, k.roots[0]);
  w.open("");
  w.line(random_prologue(rn));
  w.open("for (int64_t i = synk_thread(); i < rows * per_row; i += synk_threads())");
  w.line("const int64_t r = i / per_row, e = i - r * per_row;");
  w.line(fmt::format("{}[i] = {};", buf(buffer_of(plan, k.roots[0])), random_draw(rn, "r", "e")));
  w.close();
  w.close();
  launch.kind = CudaLaunchKind::Flat;
  launch.work = rn.type.shape;
}

// Integer matrix products (float ones go to cuBLAS): one thread per element of C.
void emit_matmul_loops(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const ir::Node& mm = node_of(plan, k.roots[0]);
  const ir::DType t = mm.type.dtype;
  const std::string T = emitter::c_value_type(t);
  const char* sfx = emitter::arith_suffix(t);
  w.open("");
  emitter::emit_matmul_dims(w, plan, k);
  const std::string a = buf(k.matmul_a), b = buf(k.matmul_b);
  w.open("for (int64_t e = synk_thread(); e < M * N; e += synk_threads())");
  w.line("const int64_t i = e / N, j = e - i * N;");
  w.line(fmt::format("{} acc = 0;", T));
  w.line(fmt::format("for (int64_t p = 0; p < K; ++p) acc = synk_add_{0}(acc, synk_mul_{0}({1}[i * sam + p * sak], {2}[p * sbk + j * sbn]));",
                     sfx, a, b));
  w.line(store(buffer_of(plan, k.roots[0]), "e", t, "acc"));
  w.close();
  w.close();
  launch.kind = CudaLaunchKind::Flat;
  launch.work = mm.type.shape;
}

void emit_kernel_body(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  switch (k.kind) {
    case KernelKind::Pointwise: emit_pointwise(w, plan, k, launch); break;
    case KernelKind::Concat: emit_concat(w, plan, k, launch); break;
    case KernelKind::Take: emit_take(w, plan, k, launch); break;
    case KernelKind::OneHot: emit_one_hot(w, plan, k, launch); break;
    case KernelKind::Random: emit_random(w, plan, k, launch); break;
    case KernelKind::MatMul: emit_matmul_loops(w, plan, k, launch); break;
    case KernelKind::Reduce: emit_cuda_reduce(w, plan, k, launch); break;
    case KernelKind::ArgMax: emit_cuda_argmax(w, plan, k, launch); break;
    case KernelKind::Softmax: emit_cuda_softmax(w, plan, k, false, launch); break;
    case KernelKind::LogSoftmax: emit_cuda_softmax(w, plan, k, true, launch); break;
    case KernelKind::Cumsum: emit_cuda_cumsum(w, plan, k, launch); break;
    case KernelKind::CrossEntropy: emit_cuda_cross_entropy(w, plan, k, launch); break;
    case KernelKind::Dnn: emit_cuda_dnn(w, plan, k, launch); break;
  }
}

}  // namespace

CudaProgram generate_cuda_program(const ir::Module& module, const KernelPlan& plan) {
  for (const Buffer& b : plan.buffers)
    if (ir::is_reserved(b.type.dtype))
      throw synk::UserError(fmt::format("function '{}': dtype {} is not supported by the CUDA backend yet",
                                       plan.function.name, ir::dtype_name(b.type.dtype)));
  CudaProgram program;
  Writer head;
  head.line(fmt::format("// synk: CUDA kernels of function '{}' ({} kernels; float matrix products run in cuBLAS).",
                        plan.function.name, plan.kernels.size()));
  program.source = head.str() + cuda_prelude();
  Writer syms;
  syms.line("");
  syms.line("// The values of the plan's symbolic dimensions, then the random state (seed, step, first row),");
  syms.line("// passed by value to every kernel.");
  syms.line(fmt::format("struct SynkSyms {{ int64_t v[{}]; }};", plan.symbols.size() + kHiddenSymbols));
  program.source += syms.str();
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
    const Kernel& k = plan.kernels[ki];
    CudaKernelLaunch launch;
    launch.kernel = int(ki);
    launch.params = kernel_buffer_params(k);
    Writer kw;
    kw.line("");
    if (kernel_uses_blas(plan, k)) {
      launch.kind = CudaLaunchKind::Blas;
      launch.params.clear();
      kw.line(fmt::format("// {}: {} via cuBLAS on the host (b{}{} x b{}{} -> b{})", k.name, kernel_kind_name(k.kind),
                          k.matmul_a, k.trans_a ? "^T" : "", k.matmul_b, k.trans_b ? "^T" : "", k.outputs.at(0)));
      program.source += kw.str();
      program.launches.push_back(std::move(launch));
      continue;
    }
    launch.symbol = kernel_symbol(plan, k);
    kw.line(fmt::format("// {}: {}", k.name, kernel_kind_name(k.kind)));
    for (ir::NodeId id : k.nodes) kw.line("//   " + node_str(&module, plan.function, id));
    std::vector<std::string> params;
    for (int b : launch.params) {
      bool out = std::count(k.outputs.begin(), k.outputs.end(), b) > 0;
      params.push_back(fmt::format("{}{}* __restrict__ b{}", out ? "" : "const ", emitter::c_type(plan.buffers.at(size_t(b)).type.dtype), b));
    }
    params.push_back("const SynkSyms syms");
    params.push_back("unsigned long long* __restrict__ err");
    params.push_back("void* __restrict__ scratch");
    params.push_back("long long splits");
    kw.open(fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kCudaMaxThreads, launch.symbol,
                        fmt::join(params, ", ")));
    for (size_t s = 0; s < plan.symbols.size(); ++s)
      kw.line(fmt::format("const int64_t s_{0} = syms.v[{1}]; (void)s_{0};", plan.symbols[s], s));
    kw.line(hidden_symbol_lines(plan.symbols.size(), "syms.v"));
    kw.line("bool cast_bad = false;");
    kw.line("bool div_bad = false;");
    emit_kernel_body(kw, plan, k, launch);
    kw.line(fmt::format("if (cast_bad) synk_fail(err, {}, 0, 0);", int64_t(KernelError::CastOutOfRange)));
    kw.line(fmt::format("if (div_bad) synk_fail(err, {}, 0, 0);", int64_t(KernelError::DivisionByZero)));
    kw.line("(void)scratch; (void)splits;");
    kw.close();
    program.source += kw.str();
    program.launches.push_back(std::move(launch));
  }
  return program;
}

std::string generate_cuda(const ir::Module& module, const KernelPlan& plan) {
  return generate_cuda_program(module, plan).source;
}

}  // namespace synk::compiler
