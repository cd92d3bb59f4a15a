// The oneDNN path of dnn.h: conv2d, pooling and batch norm on f32 through oneDNN 2.x primitives,
// on one CPU engine, each call on exactly one thread, with primitives cached per parameter set.
//
// Threading: Debian's libdnnl 2.6.3 uses the OpenMP runtime (libgomp). libgomp's thread pool does
// not survive fork(): a child that enters a parallel region with more than one thread after the
// parent ran one hangs (dnn_test_fork.cpp shows it). oneDNN enters no OpenMP region at all when it is
// asked for one thread (its parallel() calls the body directly), so every call here runs under
// OneThread, which sets the calling thread's OpenMP thread count to 1 and restores it after.
// Primitives are also created under it, so oneDNN picks single-thread blockings.
#include "compiler/dnn/dnn.h"
#include "compiler/dnn/dnn_args.h"
#include "base/errors.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <bit>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#if DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_OMP && DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_SEQ
#error "dnn.cpp pins oneDNN to one thread through OpenMP; a TBB or threadpool oneDNN needs its own pinning"
#endif

namespace synk::compiler::dnn::onednn {

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

// Buffers for the blocked copies of a call's operands, shared by every cached entry: one call
// uses at most kSlots at once and calls are serialised, so a layer's blocked tensors need no memory
// of their own between calls (per-entry copies would keep up to six activation-sized buffers per
// conv layer alive: ~280 MB for ResNet-20 at batch 64).
class Scratch {
 public:
  static constexpr int kSlots = 4;
  void* get(int slot, size_t bytes) {
    Slot& s = slots_.at(size_t(slot));
    if (s.size < bytes) {
      const size_t rounded = (bytes + 63) / 64 * 64;  // oneDNN's preferred alignment
      s.data.reset(static_cast<char*>(std::aligned_alloc(64, rounded)));
      if (!s.data) throw std::bad_alloc();
      s.size = rounded;
    }
    return s.data.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<char, Free> data;
    size_t size = 0;
  };
  std::array<Slot, kSlots> slots_;
};

// One argument of a primitive: the caller's plain buffer and, when the primitive wants another
// layout, the reorders to and from that layout, through scratch slot `slot`.
class Arg {
 public:
  Arg() = default;
  Arg(const dnnl::engine& eng, const memory::desc& plain, const memory::desc& inner, Scratch* scratch, int slot)
      : user_(plain, eng, DNNL_MEMORY_NONE), same_(plain == inner), scratch_(scratch), slot_(slot) {
    if (same_) return;
    inner_ = memory(inner, eng, DNNL_MEMORY_NONE);
    to_inner_ = dnnl::reorder(user_, inner_);
    to_user_ = dnnl::reorder(inner_, user_);
  }
  // An input: where the primitive reads it (reordered there first if needed).
  memory in(const void* p, dnnl::stream& s) {
    user_.set_data_handle(const_cast<void*>(p));
    if (same_) return user_;
    inner_.set_data_handle(scratch_->get(slot_, inner_.get_desc().get_size()));
    to_inner_.execute(s, user_, inner_);
    return inner_;
  }
  // An output: where the primitive writes it; back() then moves it to p if needed.
  memory out(void* p) {
    user_.set_data_handle(p);
    if (same_) return user_;
    inner_.set_data_handle(scratch_->get(slot_, inner_.get_desc().get_size()));
    return inner_;
  }
  void back(dnnl::stream& s) {
    if (!same_) to_user_.execute(s, inner_, user_);
  }

 private:
  memory user_, inner_;
  dnnl::reorder to_inner_, to_user_;
  bool same_ = true;
  Scratch* scratch_ = nullptr;
  int slot_ = 0;
};

struct ConvEntry {
  dnnl::algorithm algo = dnnl::algorithm::convolution_direct;   // of the forward pass
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Arg x, w, b, y;  // forward arguments
  std::optional<dnnl::convolution_backward_data> bwd_data;
  Arg bd_dy, bd_w, bd_dx;
  std::optional<dnnl::convolution_backward_weights> bwd_weights;
  Arg bw_x, bw_dy, bw_dw, bw_db;
};

struct PoolEntry {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  std::optional<dnnl::pooling_backward> bwd;
  memory src, dst, ws;  // plain; handles set per call
};

struct BatchNormEntry {
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_forward fwd;
  std::optional<dnnl::batch_normalization_backward> bwd;
  memory src, dst, diff_src, scale, shift, mean, var, diff_scale, diff_shift;  // handles set per call
  // oneDNN 2.6's backward requires a SHIFT argument with use_shift although dx, dgamma and dbeta
  // do not depend on beta; the API does not take beta there, so it gets zeros.
  std::vector<float> zero_shift;
};

// The cached entries of one kind, keyed by every number that shapes the primitive. Cleared whole
// when it reaches kCapacity: a network has a few dozen distinct layers, so that only happens when
// shapes are unbounded (then caching would not help anyway).
template <class Entry>
class Cache {
 public:
  static constexpr size_t kCapacity = 256;
  Entry& get(const std::vector<int64_t>& key, const std::function<std::unique_ptr<Entry>()>& make) {
    auto it = map_.find(key);
    if (it != map_.end()) return *it->second;
    if (map_.size() >= kCapacity) map_.clear();
    return *map_.emplace(key, make()).first->second;
  }
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(); }

 private:
  std::map<std::vector<int64_t>, std::unique_ptr<Entry>> map_;
};

struct Runtime {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  // Entries hold memory objects whose handles each call sets, so one call at a time per process;
  // synk's workers are single-threaded and this only guards a multi-threaded host. A fork while
  // another thread is inside a call would leave the child's copy locked.
  std::mutex mu;
  Cache<ConvEntry> conv;
  Cache<PoolEntry> pool;
  Cache<BatchNormEntry> bnorm;
  Scratch scratch;
};

Runtime& runtime() {
  static Runtime* r = [] {
    OneThread one;
    return new Runtime();  // never destroyed: a static engine's destructor can race exit paths
  }();
  return *r;
}

// Runs f with the lock and one thread, turning oneDNN's errors (which validated parameters should
// never cause) into std::runtime_error naming the op.
template <class F>
void guarded(const char* op, F&& f) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  OneThread one;
  try {
    f(rt);
    rt.strm.wait();
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("onednn ") + op + ": " + e.what() + " (status " +
                             std::to_string(int(e.status)) + ")");
  }
}

memory::desc plain_md(const memory::dims& dims, tag t) { return memory::desc(dims, dt::f32, t); }

std::vector<int64_t> conv_key(const Conv2dParams& p, ConvFormat f) {
  return {p.n,         p.c,          p.h,          p.w,       p.out_channels, p.kh,
          p.kw,        p.stride_h,   p.stride_w,   p.pad_top, p.pad_bottom,   p.pad_left,
          p.pad_right, p.dilation_h, p.dilation_w, p.groups,  p.has_bias,     int64_t(f)};
}

struct ConvDescs {
  memory::desc x, w, b, y;      // plain, as the caller holds them
  memory::desc ax, aw, ab, ay;  // what the primitives are asked for (plain or any)
  memory::dims strides, dilates, pad_l, pad_r;
};

// The descriptors of a convolution in format f; `winograd`: for the Winograd algorithm (which
// needs oneDNN's blocked activations, so channels_last ones are reordered there too).
ConvDescs conv_descs(const Conv2dParams& p, ConvFormat f, bool winograd) {
  const Size2d o = conv2d_output_size(p);
  ConvDescs d;
  const memory::dims wdims = p.groups == 1
                                 ? memory::dims{p.out_channels, p.c, p.kh, p.kw}
                                 : memory::dims{p.groups, p.out_channels / p.groups, p.c / p.groups, p.kh, p.kw};
  const tag wtag = p.groups == 1 ? tag::oihw : tag::goihw;  // both are OIHW in memory
  const tag activations = f == ConvFormat::channels_last ? tag::nhwc : tag::nchw;
  d.x = plain_md({p.n, p.c, p.h, p.w}, activations);
  d.w = plain_md(wdims, wtag);
  d.b = plain_md({p.out_channels}, tag::x);
  d.y = plain_md({p.n, p.out_channels, o.h, o.w}, activations);
  const bool any = f == ConvFormat::blocked || (f == ConvFormat::channels_last && winograd);
  d.ax = any ? plain_md({p.n, p.c, p.h, p.w}, tag::any) : d.x;
  d.aw = f == ConvFormat::plain ? d.w : plain_md(wdims, tag::any);
  d.ab = d.b;
  d.ay = any ? plain_md({p.n, p.out_channels, o.h, o.w}, tag::any) : d.y;
  d.strides = {p.stride_h, p.stride_w};
  d.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts the gaps: 0 is dense
  d.pad_l = {p.pad_top, p.pad_left};
  d.pad_r = {p.pad_bottom, p.pad_right};
  return d;
}

// The algorithm choice: SYNK_CONV_ALGORITHM, read once (unset or "auto": the shape rules), until
// set_conv_algorithm changes it.
std::atomic<int>& conv_algorithm_mode() {
  static std::atomic<int> mode = [] {
    const char* v = std::getenv("SYNK_CONV_ALGORITHM");
    const std::string s = v ? v : "";
    if (s.empty() || s == "auto") return int(ConvAlgorithm::rule);
    if (s == "direct") return int(ConvAlgorithm::direct);
    if (s == "winograd") return int(ConvAlgorithm::winograd);
    throw synk::UserError("SYNK_CONV_ALGORITHM = '" + s + "': expected auto, direct or winograd");
  }();
  return mode;
}

ConvAlgorithm conv_algorithm_override() { return ConvAlgorithm(conv_algorithm_mode().load()); }

// Symmetric padding only: oneDNN 2.6's Winograd backward-data pass gives wrong values when the
// vertical padding is (0, 1) or (1, 0) (dx off by ~11 on 6x6 planes, forward and weights right);
// "same" and "valid" 3x3 layers, the ones Winograd is for, are symmetric.
bool winograd_allowed(const Conv2dParams& p) {
  return p.kh == 3 && p.kw == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.groups == 1 && p.pad_top == p.pad_bottom && p.pad_left == p.pad_right;
}

// Builds a primitive descriptor with Winograd when `try_winograd`, else (or where oneDNN has no
// Winograd kernel for it) with the direct algorithm; `make(algo)` returns the descriptor, and
// `used` (when given) says which it got.
template <class Make>
auto with_algorithm(bool try_winograd, Make&& make, dnnl::algorithm* used = nullptr) {
  if (try_winograd) {
    try {
      auto pd = make(dnnl::algorithm::convolution_winograd);
      if (used) *used = dnnl::algorithm::convolution_winograd;
      return pd;
    } catch (const dnnl::error&) {   // unimplemented on this CPU or shape: the direct kernel below
    }
  }
  if (used) *used = dnnl::algorithm::convolution_direct;
  return make(dnnl::algorithm::convolution_direct);
}

// oneDNN's name of the kernel a primitive descriptor picked.
std::string implementation_of(const_dnnl_primitive_desc_t pd) {
  const char* name = nullptr;
  dnnl::error::wrap_c_api(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name),
                          "could not query the implementation of a primitive");
  return name ? name : "";
}

// The forward kernel to take over oneDNN's first choice on NHWC, or "" for its first choice.
// Measured one thread per rank, in ResNet-20's step (docs/performance/models.md, "Forward kernels
// on NHWC"): up to 32 channels the plain JIT kernel beats the brgemm ones at stride 1 (16 -> 16 at
// 32x32: 3.28 against 3.51 ms) and at 1x1 (16 -> 32, stride 2: 0.35 against 0.47 ms), not on a
// strided 3x3 (2.00 against 1.61 ms); with one input channel the gemm kernel beats both (0.84
// against 1.75 ms). From 64 channels brgemm is as fast or faster.
std::string preferred_forward_kernel(const Conv2dParams& p, ConvFormat f, dnnl::algorithm algo) {
  if (f != ConvFormat::channels_last || algo != dnnl::algorithm::convolution_direct || p.groups != 1) return "";
  if (p.c < 4) return "x64:gemm:jit";
  const bool pointwise = p.kh == 1 && p.kw == 1, unit_stride = p.stride_h == 1 && p.stride_w == 1;
  if (std::min(p.c, p.out_channels) <= 32 && (pointwise || unit_stride)) return "jit:avx512_core";
  return "";
}

// `pd`, moved on to the implementation named `want` when oneDNN offers it for this problem.
template <class PrimitiveDesc>
PrimitiveDesc with_implementation(const PrimitiveDesc& pd, const std::string& want) {
  if (want.empty() || implementation_of(pd.get()) == want) return pd;
  PrimitiveDesc candidate = pd;   // next_impl replaces the candidate's handle, not pd's
  while (candidate.next_impl())
    if (implementation_of(candidate.get()) == want) return candidate;
  return pd;
}

// The forward pass's primitive descriptor with algorithm `algo` (and the kernel the shape rule
// prefers); the backward passes take it as their hint.
dnnl::convolution_forward::primitive_desc forward_pd(const Conv2dParams& p, ConvFormat f, dnnl::algorithm algo,
                                                     const dnnl::engine& eng) {
  const ConvDescs d = conv_descs(p, f, algo == dnnl::algorithm::convolution_winograd);
  dnnl::convolution_forward::desc fd =
      p.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, d.ax, d.aw, d.ab, d.ay,
                                                   d.strides, d.dilates, d.pad_l, d.pad_r)
                 : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, d.ax, d.aw, d.ay,
                                                   d.strides, d.dilates, d.pad_l, d.pad_r);
  return with_implementation(dnnl::convolution_forward::primitive_desc(fd, eng), preferred_forward_kernel(p, f, algo));
}

// Whether pass `pass` asks for Winograd: per layer on the blocked format, where the reorders are
// paid either way; per pass on NHWC, where only Winograd pays them.
bool winograd_for(const Conv2dParams& p, ConvFormat f, ConvPass pass) {
  if (f == ConvFormat::plain) return false;
  return f == ConvFormat::channels_last ? winograd_suits_pass(p, pass) : winograd_suits(p);
}

std::unique_ptr<ConvEntry> make_conv(const Conv2dParams& p, ConvFormat f, const dnnl::engine& eng, Scratch* scratch) {
  const ConvDescs plain = conv_descs(p, f, false);
  auto e = std::make_unique<ConvEntry>();
  e->fwd_pd = with_algorithm(winograd_for(p, f, ConvPass::forward),
                             [&](dnnl::algorithm algo) { return forward_pd(p, f, algo, eng); }, &e->algo);
  e->fwd = dnnl::convolution_forward(e->fwd_pd);
  e->x = Arg(eng, plain.x, e->fwd_pd.src_desc(), scratch, 0);
  e->w = Arg(eng, plain.w, e->fwd_pd.weights_desc(), scratch, 1);
  if (p.has_bias) e->b = Arg(eng, plain.b, e->fwd_pd.bias_desc(), scratch, 3);
  e->y = Arg(eng, plain.y, e->fwd_pd.dst_desc(), scratch, 2);
  return e;
}

ConvEntry& conv_entry(Runtime& rt, const Conv2dParams& p, ConvFormat f) {
  check_conv2d(p);
  check_conv_algorithm_environment();   // a bad value fails every layer, not only those it may change
  if (f != ConvFormat::plain && f != ConvFormat::blocked && f != ConvFormat::channels_last)
    throw std::invalid_argument("conv2d: format = " + std::to_string(int(f)) +
                                " is not plain, blocked or channels_last");
  return rt.conv.get(conv_key(p, f), [&] { return make_conv(p, f, rt.eng, &rt.scratch); });
}

using args::need;

}  // namespace

ConvFormat suggested_format(const Conv2dParams& p) {
  check_conv2d(p);
  return p.c < 3 ? ConvFormat::plain : ConvFormat::blocked;
}

bool winograd_suits(const Conv2dParams& p) {
  check_conv2d(p);
  if (!winograd_allowed(p)) return false;
  const ConvAlgorithm mode = conv_algorithm_override();
  if (mode != ConvAlgorithm::rule) return mode == ConvAlgorithm::winograd;
  const Size2d o = conv2d_output_size(p);
  const int64_t channels = std::min(p.c, p.out_channels);
  const bool pixels = p.n * o.h * o.w >= 1024;
  return (channels >= 64 && pixels) || (channels >= 32 && pixels && o.h >= 8 && o.w >= 8);
}

void set_conv_algorithm(ConvAlgorithm algorithm) { conv_algorithm_mode().store(int(algorithm)); }

void check_conv_algorithm_environment() { (void)conv_algorithm_mode(); }

bool winograd_suits_pass(const Conv2dParams& p, ConvPass pass) {
  if (!winograd_suits(p)) return false;
  if (pass != ConvPass::backward_weights || conv_algorithm_override() != ConvAlgorithm::rule) return true;
  const Size2d o = conv2d_output_size(p);
  return std::min(p.c, p.out_channels) >= 128 || p.n * o.h * o.w <= 16384;
}

void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                    ConvFormat format) {
  args::conv2d_forward(p, x, w, bias, y);
  guarded("conv2d_forward", [&](Runtime& rt) {
    ConvEntry& e = conv_entry(rt, p, format);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, e.x.in(x, rt.strm)}, {DNNL_ARG_WEIGHTS, e.w.in(w, rt.strm)}, {DNNL_ARG_DST, e.y.out(y)}};
    if (p.has_bias) args[DNNL_ARG_BIAS] = e.b.in(bias, rt.strm);
    e.fwd.execute(rt.strm, args);
    e.y.back(rt.strm);
  });
}

namespace {

// The backward passes' primitives, built on first use: on the blocked format with the forward
// pass's algorithm, on NHWC with their own (winograd_suits_pass); the direct one where oneDNN has
// no Winograd kernel for that pass. Their hint is a forward descriptor of their algorithm.
bool backward_winograd(const ConvEntry& e, const Conv2dParams& p, ConvFormat format, ConvPass pass) {
  if (format == ConvFormat::channels_last) return winograd_suits_pass(p, pass);
  return e.algo == dnnl::algorithm::convolution_winograd;
}

dnnl::convolution_forward::primitive_desc hint_for(const Runtime& rt, const ConvEntry& e, const Conv2dParams& p,
                                                   ConvFormat format, dnnl::algorithm algo) {
  return algo == e.algo ? e.fwd_pd : forward_pd(p, format, algo, rt.eng);
}

void ensure_backward_data(Runtime& rt, ConvEntry& e, const Conv2dParams& p, ConvFormat format) {
  if (e.bwd_data) return;
  ConvDescs d;   // those of the algorithm that was built (the last one tried)
  dnnl::convolution_backward_data::primitive_desc pd =
      with_algorithm(backward_winograd(e, p, format, ConvPass::backward_data), [&](dnnl::algorithm algo) {
        d = conv_descs(p, format, algo == dnnl::algorithm::convolution_winograd);
        dnnl::convolution_backward_data::desc bd(algo, d.ax, d.aw, d.ay, d.strides, d.dilates, d.pad_l, d.pad_r);
        return dnnl::convolution_backward_data::primitive_desc(bd, rt.eng, hint_for(rt, e, p, format, algo));
      });
  e.bd_dy = Arg(rt.eng, d.y, pd.diff_dst_desc(), &rt.scratch, 0);
  e.bd_w = Arg(rt.eng, d.w, pd.weights_desc(), &rt.scratch, 1);
  e.bd_dx = Arg(rt.eng, d.x, pd.diff_src_desc(), &rt.scratch, 2);
  e.bwd_data = dnnl::convolution_backward_data(pd);
}

void ensure_backward_weights(Runtime& rt, ConvEntry& e, const Conv2dParams& p, ConvFormat format) {
  if (e.bwd_weights) return;
  ConvDescs d;   // those of the algorithm that was built (the last one tried)
  dnnl::convolution_backward_weights::primitive_desc pd =
      with_algorithm(backward_winograd(e, p, format, ConvPass::backward_weights), [&](dnnl::algorithm algo) {
        d = conv_descs(p, format, algo == dnnl::algorithm::convolution_winograd);
        dnnl::convolution_backward_weights::desc wd =
            p.has_bias ? dnnl::convolution_backward_weights::desc(algo, d.ax, d.aw, d.ab, d.ay, d.strides, d.dilates,
                                                                  d.pad_l, d.pad_r)
                       : dnnl::convolution_backward_weights::desc(algo, d.ax, d.aw, d.ay, d.strides, d.dilates,
                                                                  d.pad_l, d.pad_r);
        return dnnl::convolution_backward_weights::primitive_desc(wd, rt.eng, hint_for(rt, e, p, format, algo));
      });
  e.bw_x = Arg(rt.eng, d.x, pd.src_desc(), &rt.scratch, 0);
  e.bw_dy = Arg(rt.eng, d.y, pd.diff_dst_desc(), &rt.scratch, 1);
  e.bw_dw = Arg(rt.eng, d.w, pd.diff_weights_desc(), &rt.scratch, 2);
  if (p.has_bias) e.bw_db = Arg(rt.eng, d.b, pd.diff_bias_desc(), &rt.scratch, 3);
  e.bwd_weights = dnnl::convolution_backward_weights(pd);
}

}  // namespace

void conv2d_backward_data(const Conv2dParams& p, const float* dy, const float* w, float* dx, ConvFormat format) {
  args::conv2d_backward_data(dy, w, dx);
  guarded("conv2d_backward_data", [&](Runtime& rt) {
    ConvEntry& e = conv_entry(rt, p, format);
    ensure_backward_data(rt, e, p, format);
    e.bwd_data->execute(rt.strm, {{DNNL_ARG_DIFF_DST, e.bd_dy.in(dy, rt.strm)},
                                  {DNNL_ARG_WEIGHTS, e.bd_w.in(w, rt.strm)},
                                  {DNNL_ARG_DIFF_SRC, e.bd_dx.out(dx)}});
    e.bd_dx.back(rt.strm);
  });
}

void conv2d_backward_weights(const Conv2dParams& p, const float* x, const float* dy, float* dw, float* db,
                             ConvFormat format) {
  args::conv2d_backward_weights(p, x, dy, dw, db);
  guarded("conv2d_backward_weights", [&](Runtime& rt) {
    ConvEntry& e = conv_entry(rt, p, format);
    ensure_backward_weights(rt, e, p, format);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.bw_x.in(x, rt.strm)},
                                         {DNNL_ARG_DIFF_DST, e.bw_dy.in(dy, rt.strm)},
                                         {DNNL_ARG_DIFF_WEIGHTS, e.bw_dw.out(dw)}};
    if (p.has_bias) args[DNNL_ARG_DIFF_BIAS] = e.bw_db.out(db);
    e.bwd_weights->execute(rt.strm, args);
    e.bw_dw.back(rt.strm);
    if (p.has_bias) e.bw_db.back(rt.strm);
  });
}


std::vector<std::string> conv_implementations(const Conv2dParams& p, ConvFormat format) {
  std::vector<std::string> names;
  guarded("conv_implementations", [&](Runtime& rt) {
    ConvEntry& e = conv_entry(rt, p, format);
    ensure_backward_data(rt, e, p, format);
    ensure_backward_weights(rt, e, p, format);
    names = {implementation_of(e.fwd.get_primitive_desc()), implementation_of(e.bwd_data->get_primitive_desc()),
             implementation_of(e.bwd_weights->get_primitive_desc())};
  });
  return names;
}

bool has_winograd_kernels() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}

// ---------------------------------------------------------------------------------------------
// Pooling: plain NCHW in and out (oneDNN's pooling on nchw is a simple loop either way, and a
// blocked layout would cost two reorders around a memory-bound op).

namespace {

enum class PoolOp : int64_t { max = 0, avg_include = 1, avg_exclude = 2 };

PoolEntry& pool_entry(Runtime& rt, const Pool2dParams& p, PoolOp op) {
  check_pool2d(p);
  std::vector<int64_t> key{p.n, p.c, p.h, p.w, p.kh, p.kw, p.stride, p.padding, int64_t(op)};
  return rt.pool.get(key, [&] {
    const Size2d o = pool2d_output_size(p);
    auto e = std::make_unique<PoolEntry>();
    const memory::desc src = plain_md({p.n, p.c, p.h, p.w}, tag::nchw);
    const memory::desc dst = plain_md({p.n, p.c, o.h, o.w}, tag::nchw);
    const auto algo = op == PoolOp::max           ? dnnl::algorithm::pooling_max
                      : op == PoolOp::avg_include ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    const memory::dims strides{p.stride, p.stride}, kernel{p.kh, p.kw}, pad{p.padding, p.padding};
    dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training, algo, src, dst, strides, kernel, pad, pad);
    e->fwd_pd = dnnl::pooling_forward::primitive_desc(fd, rt.eng);
    e->fwd = dnnl::pooling_forward(e->fwd_pd);
    dnnl::pooling_backward::desc bd(algo, src, dst, strides, kernel, pad, pad);
    e->bwd = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(bd, rt.eng, e->fwd_pd));
    e->src = memory(src, rt.eng, DNNL_MEMORY_NONE);
    e->dst = memory(dst, rt.eng, DNNL_MEMORY_NONE);
    if (op == PoolOp::max) e->ws = memory(e->fwd_pd.workspace_desc(), rt.eng, DNNL_MEMORY_NONE);
    return e;
  });
}

PoolOp avg_op(const Pool2dParams& p) { return p.count_include_pad ? PoolOp::avg_include : PoolOp::avg_exclude; }

void need_kind(const Pool2dParams& p, PoolKind kind, const char* op) {
  if (p.kind != kind)
    throw std::invalid_argument(std::string(op) + ": kind = " + (p.kind == PoolKind::max ? "max" : "avg") +
                                ", expected " + (kind == PoolKind::max ? "max" : "avg"));
}

}  // namespace

size_t max_pool2d_workspace_bytes(const Pool2dParams& p) {
  need_kind(p, PoolKind::max, "max_pool2d_workspace_bytes");
  size_t bytes = 0;
  guarded("max_pool2d_workspace_bytes",
          [&](Runtime& rt) { bytes = pool_entry(rt, p, PoolOp::max).fwd_pd.workspace_desc().get_size(); });
  return bytes;
}

void max_pool2d_forward(const Pool2dParams& p, const float* x, float* y, void* workspace) {
  need_kind(p, PoolKind::max, "max_pool2d_forward");
  need(x, "max_pool2d_forward", "x");
  need(y, "max_pool2d_forward", "y");
  need(workspace, "max_pool2d_forward", "workspace");
  guarded("max_pool2d_forward", [&](Runtime& rt) {
    PoolEntry& e = pool_entry(rt, p, PoolOp::max);
    e.src.set_data_handle(const_cast<float*>(x));
    e.dst.set_data_handle(y);
    e.ws.set_data_handle(workspace);
    e.fwd.execute(rt.strm, {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DST, e.dst}, {DNNL_ARG_WORKSPACE, e.ws}});
  });
}

void max_pool2d_backward(const Pool2dParams& p, const float* dy, const void* workspace, float* dx) {
  need_kind(p, PoolKind::max, "max_pool2d_backward");
  need(dy, "max_pool2d_backward", "dy");
  need(workspace, "max_pool2d_backward", "workspace");
  need(dx, "max_pool2d_backward", "dx");
  guarded("max_pool2d_backward", [&](Runtime& rt) {
    PoolEntry& e = pool_entry(rt, p, PoolOp::max);
    e.dst.set_data_handle(const_cast<float*>(dy));
    e.src.set_data_handle(dx);
    e.ws.set_data_handle(const_cast<void*>(workspace));
    e.bwd->execute(rt.strm, {{DNNL_ARG_DIFF_DST, e.dst}, {DNNL_ARG_DIFF_SRC, e.src}, {DNNL_ARG_WORKSPACE, e.ws}});
  });
}

void avg_pool2d_forward(const Pool2dParams& p, const float* x, float* y) {
  need_kind(p, PoolKind::avg, "avg_pool2d_forward");
  need(x, "avg_pool2d_forward", "x");
  need(y, "avg_pool2d_forward", "y");
  guarded("avg_pool2d_forward", [&](Runtime& rt) {
    PoolEntry& e = pool_entry(rt, p, avg_op(p));
    e.src.set_data_handle(const_cast<float*>(x));
    e.dst.set_data_handle(y);
    e.fwd.execute(rt.strm, {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DST, e.dst}});
  });
}

void avg_pool2d_backward(const Pool2dParams& p, const float* dy, float* dx) {
  need_kind(p, PoolKind::avg, "avg_pool2d_backward");
  need(dy, "avg_pool2d_backward", "dy");
  need(dx, "avg_pool2d_backward", "dx");
  guarded("avg_pool2d_backward", [&](Runtime& rt) {
    PoolEntry& e = pool_entry(rt, p, avg_op(p));
    e.dst.set_data_handle(const_cast<float*>(dy));
    e.src.set_data_handle(dx);
    e.bwd->execute(rt.strm, {{DNNL_ARG_DIFF_DST, e.dst}, {DNNL_ARG_DIFF_SRC, e.src}});
  });
}

void global_avg_pool_forward(int64_t n, int64_t c, int64_t h, int64_t w, const float* x, float* y) {
  avg_pool2d_forward(global_avg_pool_params(n, c, h, w), x, y);
}

void global_avg_pool_backward(int64_t n, int64_t c, int64_t h, int64_t w, const float* dy, float* dx) {
  avg_pool2d_backward(global_avg_pool_params(n, c, h, w), dy, dx);
}

// ---------------------------------------------------------------------------------------------
// Batch norm: scale and shift as separate [c] tensors (use_scale | use_shift), so gamma, beta and
// their gradients need no packing into oneDNN's older 2 x c scale_shift.

namespace {

BatchNormEntry& bnorm_entry(Runtime& rt, const BatchNormParams& p, bool training) {
  check_batch_norm(p, training);
  const float eps = float(p.epsilon);
  std::vector<int64_t> key{p.n, p.c, p.h, p.w, int64_t(std::bit_cast<uint32_t>(eps)), training};
  return rt.bnorm.get(key, [&] {
    auto e = std::make_unique<BatchNormEntry>();
    const memory::desc data = plain_md({p.n, p.c, p.h, p.w}, tag::nchw);
    const memory::desc vec = plain_md({p.c}, tag::x);
    using nf = dnnl::normalization_flags;
    const nf flags = training ? nf::use_scale | nf::use_shift : nf::use_scale | nf::use_shift | nf::use_global_stats;
    const auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    e->fwd_pd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(prop, data, eps, flags), rt.eng);
    e->fwd = dnnl::batch_normalization_forward(e->fwd_pd);
    if (training) {
      dnnl::batch_normalization_backward::desc bd(dnnl::prop_kind::backward, data, data, eps, flags);
      e->bwd =
          dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(bd, rt.eng, e->fwd_pd));
    }
    e->zero_shift.assign(size_t(p.c), 0.0f);
    for (memory* m : {&e->src, &e->dst, &e->diff_src}) *m = memory(data, rt.eng, DNNL_MEMORY_NONE);
    for (memory* m : {&e->scale, &e->shift, &e->mean, &e->var, &e->diff_scale, &e->diff_shift})
      *m = memory(vec, rt.eng, DNNL_MEMORY_NONE);
    return e;
  });
}

void set(memory& m, const float* p) { m.set_data_handle(const_cast<float*>(p)); }

// The forward of either kind (training writes mean and var, inference reads them).
void run_forward(Runtime& rt, BatchNormEntry& e, const float* x, const float* gamma, const float* beta,
                 const float* mean, const float* var, float* y) {
  set(e.src, x), set(e.dst, y), set(e.scale, gamma), set(e.shift, beta), set(e.mean, mean), set(e.var, var);
  e.fwd.execute(rt.strm, {{DNNL_ARG_SRC, e.src},
                          {DNNL_ARG_DST, e.dst},
                          {DNNL_ARG_SCALE, e.scale},
                          {DNNL_ARG_SHIFT, e.shift},
                          {DNNL_ARG_MEAN, e.mean},
                          {DNNL_ARG_VARIANCE, e.var}});
}

}  // namespace

void batch_norm_forward_training(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                 float* y, float* mean, float* var) {
  args::batch_norm_forward_training(x, gamma, beta, y, mean, var);
  guarded("batch_norm_forward_training", [&](Runtime& rt) {
    run_forward(rt, bnorm_entry(rt, p, true), x, gamma, beta, mean, var, y);
  });
}

void batch_norm_backward(const BatchNormParams& p, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* var, float* dx, float* dgamma, float* dbeta) {
  args::batch_norm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta);
  guarded("batch_norm_backward", [&](Runtime& rt) {
    BatchNormEntry& e = bnorm_entry(rt, p, true);
    set(e.src, x), set(e.dst, dy), set(e.diff_src, dx), set(e.scale, gamma), set(e.mean, mean), set(e.var, var);
    set(e.shift, e.zero_shift.data());
    set(e.diff_scale, dgamma), set(e.diff_shift, dbeta);
    e.bwd->execute(rt.strm, {{DNNL_ARG_SRC, e.src},
                             {DNNL_ARG_DIFF_DST, e.dst},
                             {DNNL_ARG_SCALE, e.scale},
                             {DNNL_ARG_SHIFT, e.shift},
                             {DNNL_ARG_MEAN, e.mean},
                             {DNNL_ARG_VARIANCE, e.var},
                             {DNNL_ARG_DIFF_SRC, e.diff_src},
                             {DNNL_ARG_DIFF_SCALE, e.diff_scale},
                             {DNNL_ARG_DIFF_SHIFT, e.diff_shift}});
  });
}

void batch_norm_forward_inference(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* var, float* y) {
  args::batch_norm_forward_inference(x, gamma, beta, mean, var, y);
  guarded("batch_norm_forward_inference", [&](Runtime& rt) {
    run_forward(rt, bnorm_entry(rt, p, false), x, gamma, beta, mean, var, y);
  });
}

std::string isa_text() {
  using dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case cpu_isa::sse41: return "sse41";
    case cpu_isa::avx: return "avx";
    case cpu_isa::avx2: return "avx2";
    case cpu_isa::avx2_vnni: return "avx2_vnni";
    case cpu_isa::avx512_core: return "avx512_core";
    case cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string version_text() {
  const dnnl_version_t* v = dnnl::version();
  const char* rt = v->cpu_runtime == DNNL_RUNTIME_OMP          ? "omp"
                   : v->cpu_runtime == DNNL_RUNTIME_TBB        ? "tbb"
                   : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "seq"
                   : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                               : "other";
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " runtime=" + rt;
}

size_t cached_primitives() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  return rt.conv.size() + rt.pool.size() + rt.bnorm.size();
}

void clear_primitive_cache() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  rt.conv.clear();
  rt.pool.clear();
  rt.bnorm.clear();
}

}  // namespace synk::compiler::dnn::onednn
