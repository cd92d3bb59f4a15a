// The host side of a CPU-compiled function (see cpu_function.h): argument checks that name the
// argument, symbol binding, buffer management, kernel and BLAS dispatch, output/update copies.
#include "compiler/cpu/cpu_function.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/cancel.h"
#include "compiler/backend/signature.h"
#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/openblas_core.h"
#include "compiler/codegen/kernel_errors.h"
#include "runtime/data/dtype.h"
#include "runtime/trace/trace.h"

namespace synk::compiler {

namespace {

// Temporaries that need no storage of their own because they are a contiguous piece of another
// buffer, and the kernels that then have nothing left to do:
//  - a concatenation along axis 0 into an output or update: the kernels that produce its operands
//    write straight into their piece of it (the flat gradient of a training step: ~1 MB less to
//    copy per call); an operand that repeats an earlier one (two parameters with the same
//    gradient, merged by CSE: the shifts of the two batch norms a residual sum adds) is copied
//    into its piece right after the step that writes it;
//  - a copy of a leading-axis slice of an argument (an input or shared variable, which no kernel
//    writes): its readers read the argument in place (an update rule's per-parameter piece of a
//    flat gradient).
// Found from the plan alone; the offsets depend on the call's shapes.
constexpr int kPlacedTemp = -2;   // temp_slot_ of a temporary that lives inside another buffer

int base_buffer(const KernelPlan& plan, int b) {
  while (plan.buffers[size_t(b)].kind == Buffer::Kind::Alias) b = int(plan.buffers[size_t(b)].index);
  return b;
}

std::vector<CopyElision> find_elisions(const KernelPlan& plan) {
  std::vector<CopyElision> found;
  std::vector<int> writer(plan.buffers.size(), -1);   // per base buffer: the only kernel writing it, or -2
  for (size_t s = 0; s < plan.kernels.size(); ++s)
    for (int b : plan.kernels[s].outputs) {
      int& w = writer[size_t(base_buffer(plan, b))];
      w = w == -1 ? int(s) : -2;
    }
  std::vector<bool> placed(plan.buffers.size(), false);
  auto is_temp = [&](int b) { return plan.buffers[size_t(b)].kind == Buffer::Kind::Temp; };
  for (size_t s = 0; s < plan.kernels.size(); ++s) {
    const Kernel& k = plan.kernels[s];
    if (k.nodes.size() != 1 || k.roots.size() != 1 || k.outputs.size() != 1) continue;
    const ir::Node& n = plan.function.node(k.roots[0]);
    if (k.kind == KernelKind::Concat && n.op == ir::Op::Concat && n.attrs.axis == 0) {
      const Buffer& out = plan.buffers.at(size_t(k.outputs[0]));
      if (out.kind != Buffer::Kind::Output && out.kind != Buffer::Kind::Update) continue;
      CopyElision e{s, true, k.outputs[0], {}};
      std::vector<bool> mine(plan.buffers.size(), false);
      for (ir::NodeId o : n.operands) {
        int b = plan.node_buffer.at(size_t(o));
        int t = b < 0 ? -1 : base_buffer(plan, b);
        const bool repeat = t >= 0 && mine[size_t(t)];   // the same value again (CSE): copied after its writer
        if (!repeat && (t < 0 || !is_temp(t) || placed[size_t(t)] || writer[size_t(t)] < 0 ||
                        size_t(writer[size_t(t)]) >= s || plan.buffers[size_t(t)].type.dtype != n.type.dtype)) {
          e.temps.clear();
          break;
        }
        if (t >= 0) mine[size_t(t)] = true;
        e.temps.push_back(t);
        e.repeat.push_back(repeat);
      }
      if (e.temps.size() != n.operands.size()) continue;
      for (int t : e.temps) placed[size_t(t)] = true;
      found.push_back(std::move(e));
    } else if (k.kind == KernelKind::Pointwise && n.op == ir::Op::Slice && n.attrs.axis == 0) {
      int t = k.outputs[0];
      int src = plan.node_buffer.at(size_t(n.operands[0]));
      if (!is_temp(t) || placed[size_t(t)] || src < 0) continue;
      Buffer::Kind src_kind = plan.buffers[size_t(base_buffer(plan, src))].kind;
      if (src_kind != Buffer::Kind::Input && src_kind != Buffer::Kind::Shared) continue;
      placed[size_t(t)] = true;
      found.push_back(CopyElision{s, false, src, {t}});
    }
  }
  return found;
}

// A profile row's label: the kernel, and for BLAS calls the routine and its M, N, K.
std::string step_label(const Kernel& k, bool blas, const std::vector<std::vector<int64_t>>& shapes) {
  std::string label = fmt::format("{} {}", k.name, kernel_kind_name(k.kind));
  if (!blas || k.kind != KernelKind::MatMul) {
    label += fmt::format(" -> {}", shape_text(shapes.at(size_t(k.outputs.at(0)))));
    return label;
  }
  const std::vector<int64_t>& as = shapes.at(size_t(k.matmul_a));
  const std::vector<int64_t>& bs = shapes.at(size_t(k.matmul_b));
  if (as.size() == 2 && bs.size() == 2) {
    int64_t M = k.trans_a ? as[1] : as[0], K = k.trans_a ? as[0] : as[1], N = k.trans_b ? bs[0] : bs[1];
    label += fmt::format(" gemm {}{} M={} N={} K={} ({:.1f} MFLOP)", k.trans_a ? 'T' : 'N', k.trans_b ? 'T' : 'N', M,
                         N, K, 2e-6 * double(M) * double(N) * double(K));
  } else {
    label += fmt::format(" {} {} @ {}", as.size() == 2 || bs.size() == 2 ? "gemv" : "dot", shape_text(as),
                         shape_text(bs));
  }
  return label;
}

// A step of run() as a span of the timeline: named by its kernel, with step_label's detail.
void trace_step(const Kernel& k, bool blas, const std::vector<std::vector<int64_t>>& shapes, int64_t start_ns,
                int64_t end_ns) {
  const rt::trace::Category category = k.kind == KernelKind::Dnn ? rt::trace::Category::Dnn
                                       : blas                    ? rt::trace::Category::Blas
                                                                 : rt::trace::Category::Kernel;
  rt::trace::record(category, fmt::format("{} {}", k.name, kernel_kind_name(k.kind)), start_ns, end_ns,
                    step_label(k, blas, shapes));
}

}  // namespace

bool CpuFunction::needs_kernel_code(const KernelPlan& plan) {
  for (const Kernel& k : plan.kernels)
    if (!kernel_is_library_call(plan, k)) return true;
  return false;
}

CpuFunction::CpuFunction(const ir::Module& module, KernelPlan plan, std::string source, KernelCode code)
    : plan_(std::move(plan)), source_(std::move(source)), outcome_(code.outcome),
      code_owner_(std::move(code.keep_alive)) {
  // Before this process's first BLAS call (a no-op after the load-time check, which this call also
  // links into every program that runs compiled functions).
  ensure_openblas_core();
  const ir::Function* fn = module.find_function(plan_.function.name);
  signature_ = make_signature(module, fn ? *fn : plan_.function, plan_);
  binding_.emplace(module, plan_);
  if (needs_kernel_code(plan_) && !code.lookup)
    synk::internal_error(fmt::format("function '{}': no kernel code to run it", plan_.function.name));
  for (const Kernel& k : plan_.kernels) {
    Step step;
    step.kernel = &k;
    if (!kernel_is_library_call(plan_, k)) {
      step.entry = reinterpret_cast<KernelEntry>(code.lookup(kernel_symbol(plan_, k)));
      step.params = kernel_buffer_params(k);
    }
    steps_.push_back(std::move(step));
  }
  auto symbols_of = [&](const ir::TensorType& t) {
    std::vector<int> out;
    for (const ir::Dim& d : t.shape) out.push_back(d.is_symbolic() ? plan_.symbol_index(d.symbol) : -1);
    return out;
  };
  for (const Buffer& b : plan_.buffers) buffer_symbols_.push_back(symbols_of(b.type));
  pointers_.assign(plan_.buffers.size(), nullptr);
  shapes_.assign(plan_.buffers.size(), {});
  assign_temp_slots();
}

// Lifetimes of temporaries in steps: from the step that writes one to the last step that reads
// it or an alias of it (values copied out after the last step live to the end). A temporary
// takes a slot whose previous occupant was last read by an earlier step, never one read by the
// step that writes it (a kernel's inputs and outputs must not overlap).
void CpuFunction::assign_temp_slots() {
  const size_t nb = plan_.buffers.size();
  const int end = int(steps_.size());
  auto base_of = [&](int b) {
    while (plan_.buffers[size_t(b)].kind == Buffer::Kind::Alias) b = int(plan_.buffers[size_t(b)].index);
    return size_t(b);
  };
  std::vector<int> first_write(nb, end), last_read(nb, -1);
  for (int s = 0; s < end; ++s) {
    const Kernel& k = *steps_[size_t(s)].kernel;
    for (int b : k.outputs) first_write[base_of(b)] = std::min(first_write[base_of(b)], s);
    for (int b : k.inputs) last_read[base_of(b)] = std::max(last_read[base_of(b)], s);
  }
  const ir::Function& fn = plan_.function;
  auto copied_out = [&](ir::NodeId node) { last_read[base_of(plan_.node_buffer.at(size_t(node)))] = end; };
  for (const ir::Output& o : fn.outputs) copied_out(o.node);
  for (const ir::Update& u : fn.updates) copied_out(u.node);
  temp_slot_.assign(nb, -1);
  elisions_ = find_elisions(plan_);
  step_elided_.assign(steps_.size(), 0);
  repeats_after_.assign(steps_.size(), {});
  for (size_t i = 0; i < elisions_.size(); ++i) {
    const CopyElision& e = elisions_[i];
    step_elided_.at(e.step) = 1;
    for (size_t k = 0; k < e.temps.size(); ++k) {
      temp_slot_[size_t(e.temps[k])] = kPlacedTemp;
      // A repeat is copied as soon as its value is written (not at the concatenation's step, so
      // that a streamed gradient's piece is final as early as its first copy).
      if (e.concat && e.repeat[k]) repeats_after_.at(size_t(first_write[base_of(e.temps[k])])).emplace_back(i, k);
    }
  }
  std::vector<int> free_after;   // per slot: the last step that reads its current occupant
  for (int s = 0; s < end; ++s)
    for (int b : steps_[size_t(s)].kernel->outputs) {
      if (plan_.buffers[size_t(b)].kind != Buffer::Kind::Temp || temp_slot_[size_t(b)] != -1) continue;
      int slot = -1;
      for (size_t i = 0; i < free_after.size() && slot < 0; ++i)
        if (free_after[i] < s) slot = int(i);
      if (slot < 0) {
        slot = int(free_after.size());
        free_after.push_back(0);
      }
      temp_slot_[size_t(b)] = slot;
      free_after[size_t(slot)] = std::max(last_read[size_t(b)], s);
    }
  for (size_t b = 0; b < nb; ++b)
    if (plan_.buffers[b].kind == Buffer::Kind::Temp && temp_slot_[b] == -1)
      synk::internal_error(fmt::format("function '{}': temporary b{} is written by no kernel", fn.name, b));
  slots_.assign(free_after.size(), {});
  slot_bytes_.assign(free_after.size(), 0);
}

bool CpuFunction::stream_update(int update, rt::UpdateSink* sink) {
  if (!sink || update < 0) {
    sink_ = nullptr;
    return false;
  }
  if (update != streamed_update_) plan_stream(update);
  sink_ = stream_elision_ >= 0 ? sink : nullptr;
  return sink_ != nullptr;
}

// Which step finishes each operand of the update's in-place concatenation: the last step other
// than the (elided) concatenation that writes or reads the operand, or reads the update buffer.
void CpuFunction::plan_stream(int update) {
  streamed_update_ = update;
  stream_elision_ = -1;
  stream_ready_after_.assign(steps_.size(), {});
  const ir::Function& fn = plan_.function;
  if (update >= int(fn.updates.size())) return;
  const int buffer = plan_.node_buffer.at(size_t(fn.updates[size_t(update)].node));
  if (buffer < 0 || plan_.buffers[size_t(buffer)].kind != Buffer::Kind::Update ||
      plan_.buffers[size_t(buffer)].index != int64_t(update))
    return;
  int elision = -1;
  for (size_t i = 0; i < elisions_.size(); ++i)
    if (elisions_[i].concat && elisions_[i].within == buffer) elision = int(i);
  if (elision < 0) return;
  const CopyElision* concat = &elisions_[size_t(elision)];
  const int end = int(steps_.size());
  auto touches = [&](int s, int base) {
    const Kernel& k = *steps_[size_t(s)].kernel;
    auto hit = [&](const std::vector<int>& list) {
      return std::any_of(list.begin(), list.end(), [&](int b) { return base_buffer(plan_, b) == base; });
    };
    return hit(k.outputs) || hit(k.inputs);
  };
  int buffer_read = -1;   // a later step reading the whole update (a gradient norm, say)
  for (int s = 0; s < end; ++s)
    if (s != int(concat->step) && touches(s, buffer)) buffer_read = s;
  for (size_t k = 0; k < concat->temps.size(); ++k) {
    int done = buffer_read;
    for (int s = 0; s < end; ++s)
      if (s != int(concat->step) && touches(s, concat->temps[k])) done = std::max(done, s);
    if (done >= 0) stream_ready_after_[size_t(done)].push_back(k);
  }
  stream_elision_ = elision;
}

// Operand `k` of elided concatenation `elision`, which repeats an earlier operand: copied from
// that one's piece into its own.
void CpuFunction::copy_repeat(size_t elision, size_t k) {
  const CopyElision& e = elisions_.at(elision);
  const std::vector<size_t>& at = piece_offsets_[elision];
  auto* base = static_cast<std::byte*>(pointers_.at(size_t(e.within)));
  if (at[k + 1] > at[k]) std::memcpy(base + at[k], pointers_[size_t(e.temps[k])], at[k + 1] - at[k]);
}

// Pointers of the temporaries that live inside another buffer (find_elisions), and where this
// call's shapes put each operand of a concatenation (piece_offsets_).
void CpuFunction::place_elided_temps() {
  piece_offsets_.resize(elisions_.size());
  for (size_t i = 0; i < elisions_.size(); ++i) {
    const CopyElision& e = elisions_[i];
    auto* base = static_cast<std::byte*>(pointers_.at(size_t(e.within)));
    const size_t elem = rt::dtype_size(runtime_dtype(plan_.buffers[size_t(e.within)].type.dtype));
    if (e.concat) {
      std::vector<size_t>& at = piece_offsets_[i];
      at.assign(1, 0);
      for (size_t k = 0; k < e.temps.size(); ++k) {
        const int t = e.temps[k];
        if (!e.repeat[k]) pointers_[size_t(t)] = base + at.back();
        at.push_back(at.back() + size_t(rt::shape_size(shapes_[size_t(t)])) * elem);
      }
    } else {
      const ir::Node& slice = plan_.function.node(plan_.kernels.at(e.step).roots[0]);
      const std::vector<int64_t>& src = shapes_[size_t(e.within)];
      const int64_t row = rt::shape_size(src) / std::max<int64_t>(src.at(0), 1);
      pointers_[size_t(e.temps[0])] = base + size_t(slice.attrs.start * row) * elem;
    }
  }
}

void CpuFunction::run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
                      std::span<rt::Array> outputs, std::span<rt::Array> updates) {
  const ir::Function& fn = plan_.function;
  check_result_counts(fn, outputs.size(), updates.size());
  // One timing site per step serves both opt-in views: the SYNK_PROFILE table and the timeline.
  const bool profiling = rt::profile::enabled();
  const bool tracing = rt::trace::on();
  const int64_t t_start = profiling ? rt::trace::now_ns() : 0;
  binding_->bind(inputs, shareds);
  const std::vector<int64_t>& syms = binding_->values();
  std::fill(slot_bytes_.begin(), slot_bytes_.end(), 0);
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const Buffer& buffer = plan_.buffers[b];
    std::vector<int64_t>& shape = shapes_[b];
    shape.resize(buffer.type.rank());
    for (size_t d = 0; d < shape.size(); ++d) {
      const ir::Dim& dim = buffer.type.shape[d];
      shape[d] = dim.is_symbolic() ? syms[size_t(buffer_symbols_[b][d])] : dim.size;
    }
    rt::DType dt = runtime_dtype(buffer.type.dtype);
    auto fit = [&](rt::Array& a) {   // Array::resize takes the shape by value: skip it when unchanged
      if (a.dtype != dt || a.shape != shape || a.bytes.size() != size_t(rt::shape_size(shape)) * rt::dtype_size(dt))
        a.resize(dt, shape);
    };
    switch (buffer.kind) {
      case Buffer::Kind::Input: pointers_[b] = const_cast<void*>(inputs[size_t(buffer.index)].data); break;
      case Buffer::Kind::Shared: pointers_[b] = const_cast<void*>(shareds[size_t(buffer.index)].data); break;
      case Buffer::Kind::Output:
        fit(outputs[size_t(buffer.index)]);
        pointers_[b] = outputs[size_t(buffer.index)].bytes.data();
        break;
      case Buffer::Kind::Update:
        fit(updates[size_t(buffer.index)]);
        pointers_[b] = updates[size_t(buffer.index)].bytes.data();
        break;
      case Buffer::Kind::Temp: {
        if (temp_slot_[b] == kPlacedTemp) break;   // set below, inside the buffer it lives in
        size_t slot = size_t(temp_slot_[b]);
        slot_bytes_[slot] = std::max(slot_bytes_[slot], size_t(rt::shape_size(shapes_[b])) * rt::dtype_size(dt));
        break;   // the pointer is set once every slot has its size
      }
      case Buffer::Kind::Alias: pointers_[b] = pointers_.at(size_t(buffer.index)); break;
    }
  }
  for (size_t slot = 0; slot < slots_.size(); ++slot)
    if (slots_[slot].size() < slot_bytes_[slot]) slots_[slot].resize(slot_bytes_[slot]);
  place_elided_temps();
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    if (plan_.buffers[b].kind == Buffer::Kind::Temp && temp_slot_[b] != kPlacedTemp)
      pointers_[b] = slots_[size_t(temp_slot_[b])].data();
    // Aliases come after their base; re-resolve those whose base is a temporary.
    if (plan_.buffers[b].kind == Buffer::Kind::Alias) pointers_[b] = pointers_.at(size_t(plan_.buffers[b].index));
  }
  if (sink_)
    sink_->begin(static_cast<std::byte*>(pointers_.at(size_t(elisions_[size_t(stream_elision_)].within))),
                 updates[size_t(streamed_update_)].bytes.size());
  if (profiling && !profile_) profile_.emplace("CpuFunction::run '" + fn.name + "'");
  rt::profile::Table* table = profiling ? &*profile_ : nullptr;
  int64_t t_last = profiling || tracing ? rt::trace::now_ns() : 0;
  if (profiling) table->add(0, t_last - t_start, "argument checks, symbols, buffers");
  syms_ = syms, syms_.insert(syms_.end(), {int64_t(rng_.seed), int64_t(rng_.step), rng_.first_row});   // + hidden
  std::vector<void*> args;
  for (size_t s = 0; s < steps_.size(); ++s) {
    cancellation_point();   // a lost process group stops a long share between steps
    const Step& step = steps_[s];
    if (step_elided_[s]) {
      // nothing to do: its operands were written in place, or its readers read the argument
    } else if (step.kernel->kind == KernelKind::Dnn) {
      run_dnn_step(plan_, *step.kernel, shapes_, pointers_);
    } else if (!step.entry) {
      run_blas(step);
    } else {
      args.clear();
      for (int b : step.params) args.push_back(pointers_[size_t(b)]);
      int64_t err[4] = {0, 0, 0, 0};
      int64_t rc = step.entry(args.data(), syms_.data(), err);
      if (rc != 0) kernel_failed(step, rc, err);
    }
    for (const auto& [elision, k] : repeats_after_[s]) copy_repeat(elision, k);
    if (sink_) {
      const std::vector<size_t>& at = piece_offsets_[size_t(stream_elision_)];
      for (size_t k : stream_ready_after_[s]) sink_->ready(at[k], at[k + 1] - at[k]);
    }
    if (profiling || tracing) {
      int64_t t = rt::trace::now_ns();
      if (profiling)
        table->add(s + 1, t - t_last,
                   table->has_label(s + 1) ? std::string()
                                           : step_label(*step.kernel, !step.entry, shapes_) + (step_elided_[s] ? " (elided)" : ""));
      if (tracing && !step_elided_[s]) trace_step(*step.kernel, !step.entry, shapes_, t_last, t);
      t_last = t;
    }
  }
  auto copy_out = [&](rt::Array& dst, ir::NodeId node) {
    int b = plan_.node_buffer.at(size_t(node));
    const ir::TensorType& t = fn.node(node).type;
    dst.resize(runtime_dtype(t.dtype), binding_->shape_of(t.shape));
    if (!dst.bytes.empty()) std::memcpy(dst.bytes.data(), pointers_.at(size_t(b)), dst.bytes.size());
  };
  for (size_t o = 0; o < fn.outputs.size(); ++o) {
    const Buffer& b = plan_.buffers.at(size_t(plan_.node_buffer.at(size_t(fn.outputs[o].node))));
    if (!(b.kind == Buffer::Kind::Output && b.index == int64_t(o))) copy_out(outputs[o], fn.outputs[o].node);
  }
  for (size_t u = 0; u < fn.updates.size(); ++u) {
    const Buffer& b = plan_.buffers.at(size_t(plan_.node_buffer.at(size_t(fn.updates[u].node))));
    if (!(b.kind == Buffer::Kind::Update && b.index == int64_t(u))) copy_out(updates[u], fn.updates[u].node);
  }
  if (profiling) {
    table->add(steps_.size() + 1, rt::trace::now_ns() - t_last, "copies of outputs and updates");
    table->end_call();
  }
}

void CpuFunction::run_blas(const Step& step) {
  const Kernel& k = *step.kernel;
  const ir::Node& mm = plan_.function.node(k.roots[0]);
  const bool f32 = mm.type.dtype == ir::DType::F32;
  const std::vector<int64_t>& as = shapes_.at(size_t(k.matmul_a));
  const std::vector<int64_t>& bs = shapes_.at(size_t(k.matmul_b));
  void* a = pointers_.at(size_t(k.matmul_a));
  void* b = pointers_.at(size_t(k.matmul_b));
  int c_buffer = k.outputs.at(0);
  void* c = pointers_.at(size_t(c_buffer));
  const int64_t c_size = rt::shape_size(shapes_.at(size_t(c_buffer)));
  if (c_size == 0) return;
  const size_t elem = f32 ? 4 : 8;
  int64_t K = as.size() == 1 ? as[0] : (k.trans_a ? as[0] : as[1]);
  if (K == 0) {   // an empty sum: BLAS may leave C untouched
    std::memset(c, 0, size_t(c_size) * elem);
    return;
  }
  auto blas_int = [](int64_t v) { return blasint(v); };
  if (as.size() == 2 && bs.size() == 2) {
    int64_t M = k.trans_a ? as[1] : as[0];
    int64_t N = k.trans_b ? bs[0] : bs[1];
    CBLAS_TRANSPOSE ta = k.trans_a ? CblasTrans : CblasNoTrans, tb = k.trans_b ? CblasTrans : CblasNoTrans;
    if (f32)
      cblas_sgemm(CblasRowMajor, ta, tb, blas_int(M), blas_int(N), blas_int(K), 1.0f, static_cast<const float*>(a),
                  blas_int(as[1]), static_cast<const float*>(b), blas_int(bs[1]), 0.0f, static_cast<float*>(c), blas_int(N));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, blas_int(M), blas_int(N), blas_int(K), 1.0, static_cast<const double*>(a),
                  blas_int(as[1]), static_cast<const double*>(b), blas_int(bs[1]), 0.0, static_cast<double*>(c), blas_int(N));
  } else if (as.size() == 2 || bs.size() == 2) {
    // y = op(M) x with M the stored matrix: A @ v reads A as stored (transposed if folded);
    // v @ B is B^T v, so the flag flips.
    bool matrix_is_a = as.size() == 2;
    const std::vector<int64_t>& ms = matrix_is_a ? as : bs;
    bool trans = matrix_is_a ? k.trans_a : !k.trans_b;
    const void* m = matrix_is_a ? a : b;
    const void* x = matrix_is_a ? b : a;
    CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
    if (f32)
      cblas_sgemv(CblasRowMajor, t, blas_int(ms[0]), blas_int(ms[1]), 1.0f, static_cast<const float*>(m),
                  blas_int(ms[1]), static_cast<const float*>(x), 1, 0.0f, static_cast<float*>(c), 1);
    else
      cblas_dgemv(CblasRowMajor, t, blas_int(ms[0]), blas_int(ms[1]), 1.0, static_cast<const double*>(m),
                  blas_int(ms[1]), static_cast<const double*>(x), 1, 0.0, static_cast<double*>(c), 1);
  } else {
    if (f32)
      *static_cast<float*>(c) = cblas_sdot(blas_int(K), static_cast<const float*>(a), 1, static_cast<const float*>(b), 1);
    else
      *static_cast<double*>(c) = cblas_ddot(blas_int(K), static_cast<const double*>(a), 1, static_cast<const double*>(b), 1);
  }
}

void CpuFunction::kernel_failed(const Step& step, int64_t code, const int64_t* err) const {
  // The failure record holds the offending value itself (err[2]), whichever operand it came from.
  throw_kernel_failure(plan_, *step.kernel, code, err[1], err[3], [err](ir::NodeId) { return err[2]; },
                       kernel_symbol(plan_, *step.kernel));
}

}  // namespace synk::compiler
