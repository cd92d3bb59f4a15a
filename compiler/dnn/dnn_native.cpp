// synk's own loops (namespace native of dnn.h), where oneDNN's semantics or speed fall short:
//  - max pool: oneDNN's skips NaN (a comparison with NaN is false) and starts from -FLT_MAX, so a
//    NaN input or a window of -inf gives other values than PyTorch; these loops follow PyTorch's
//    CPU kernel (the rule at the top of dnn_reference.h), and are faster than oneDNN's nchw max
//    pool too;
//  - batch norm: oneDNN's nchw implementation is slower than PyTorch's (see the README).
// Compiled with -O3 (see the Makefile): the loops are written to vectorise, which GCC's -O2 cost
// model does not do for loops with run-time trip counts.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compiler/dnn/dnn.h"
#include "compiler/dnn/dnn_args.h"

namespace synk::compiler::dnn::native {

namespace {

using args::need;

void need_max(const Pool2dParams& p, const char* op) {
  check_pool2d(p);
  if (p.kind != PoolKind::max) throw std::invalid_argument(std::string(op) + ": kind = avg, expected max");
}

// Moves the running choice (bv, ba) to the cell (v, a) under the rule (v > bv or v is NaN), with
// bit masks: GCC turns both ?: and || here into branches, which mispredict on about every other
// cell of real data (3x slower).
inline void pick(float& bv, int32_t& ba, float v, int32_t a) {
  const uint32_t m = 0u - uint32_t((v > bv) | (v != v));
  bv = std::bit_cast<float>((std::bit_cast<uint32_t>(v) & m) | (std::bit_cast<uint32_t>(bv) & ~m));
  ba = int32_t((uint32_t(a) & m) | (uint32_t(ba) & ~m));
}

// The common 2x2 / stride 2 / no padding pool. The rule is associative (a later group's choice
// replaces an earlier one exactly when a single cell would), so each window reduces its two rows
// independently and then combines them: two short dependency chains instead of one long one.
// `which` gets the chosen cell as 0..3 (top-left, top-right, bottom-left, bottom-right).
inline float pick_2x2(const float* __restrict r0, const float* __restrict r1, int64_t ow, int32_t& which) {
  float v0 = r0[2 * ow], v1 = r1[2 * ow];
  int32_t a0 = 0, a1 = 2;
  pick(v0, a0, r0[2 * ow + 1], 1);
  pick(v1, a1, r1[2 * ow + 1], 3);
  pick(v0, a0, v1, a1);
  which = a0;
  return v0;
}

// Values only (and positions when idx is given), row by row: with the positions relative to the
// window, no store behind a branch and restrict rows, GCC vectorises the loop (the CNN's first
// pool, [128, 32, 28, 28] on one core: 6.3 -> 0.57 ms; docs/performance/models.md).
void max_pool_plane_2x2(const Pool2dParams& p, Size2d o, const float* x, float* y, int32_t* idx) {
  const int64_t ow_n = o.w;
  for (int64_t oh = 0; oh < o.h; ++oh) {
    const float* __restrict r0 = x + 2 * oh * p.w;
    const float* __restrict r1 = r0 + p.w;
    float* __restrict yr = y + oh * o.w;
    if (!idx) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        int32_t which;
        yr[ow] = pick_2x2(r0, r1, ow, which);
      }
      continue;
    }
    int32_t* __restrict ir = idx + oh * o.w;
    const int32_t a_row = int32_t(2 * oh * p.w), w = int32_t(p.w);
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      int32_t which;
      yr[ow] = pick_2x2(r0, r1, ow, which);
      ir[ow] = a_row + int32_t(2 * ow) + (which & 1) + (which >> 1) * w;
    }
  }
}

// The backward of that pool without indices: each window's gradient goes to the cell the forward
// rule picks, found again from x; the other three get 0. Windows do not overlap, so every cell is
// written once (a last odd row or column, outside every window, is zeroed).
void max_pool_plane_2x2_backward(const Pool2dParams& p, Size2d o, const float* x, const float* dy, float* dx) {
  const int64_t ow_n = o.w;
  for (int64_t oh = 0; oh < o.h; ++oh) {
    const float* __restrict r0 = x + 2 * oh * p.w;
    const float* __restrict r1 = r0 + p.w;
    const float* __restrict g = dy + oh * o.w;
    float* __restrict d0 = dx + 2 * oh * p.w;
    float* __restrict d1 = d0 + p.w;
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      int32_t which;
      (void)pick_2x2(r0, r1, ow, which);
      const float v = 0.0f + g[ow];   // as 0 += g: a -0 gradient lands as +0, like the general path
      d0[2 * ow] = which == 0 ? v : 0.0f;
      d0[2 * ow + 1] = which == 1 ? v : 0.0f;
      d1[2 * ow] = which == 2 ? v : 0.0f;
      d1[2 * ow + 1] = which == 3 ? v : 0.0f;
    }
    if (p.w % 2) d0[p.w - 1] = d1[p.w - 1] = 0.0f;
  }
  if (p.h % 2) std::memset(dx + (p.h - 1) * p.w, 0, size_t(p.w) * sizeof(float));
}

// For each kernel column j, the outputs [lo, hi) whose window column j is a real column
// (0 <= ow*stride - padding + j < w), as lo, hi pairs: computed once per call, because the two
// divisions per window row and column cost more than the comparisons.
std::vector<int64_t> column_ranges(const Pool2dParams& p, Size2d o) {
  std::vector<int64_t> cols;
  for (int64_t j = 0; j < p.kw; ++j) {
    const int64_t off = j - p.padding;
    const int64_t hi = std::min(o.w, p.w - 1 - off < 0 ? 0 : (p.w - 1 - off) / p.stride + 1);
    cols.push_back(std::min(hi, off >= 0 ? 0 : (-off + p.stride - 1) / p.stride));
    cols.push_back(hi);
  }
  return cols;
}

// One plane's outputs and their argmax positions (ih*w + iw). Each output row keeps its running
// choices in best/at and is swept cell row by cell row, kernel column by kernel column, so the
// innermost loop runs across outputs: independent updates (no chain through one window's
// comparisons). Per window the cells are still seen in row-major order, so the rule is unchanged. best and at hold o.w
// entries; cols is column_ranges(p, o).
void max_pool_plane(const Pool2dParams& p, Size2d o, const int64_t* cols, const float* x, float* y, int32_t* idx,
                    float* __restrict best, int32_t* __restrict at) {
  if (p.kh == 2 && p.kw == 2 && p.stride == 2 && p.padding == 0) return max_pool_plane_2x2(p, o, x, y, idx);
  for (int64_t oh = 0; oh < o.h; ++oh) {
    const int64_t h0 = oh * p.stride - p.padding;
    const int64_t hs = h0 < 0 ? 0 : h0, he = h0 + p.kh < p.h ? h0 + p.kh : p.h;
    for (int64_t ow = 0; ow < o.w; ++ow) {
      const int64_t w0 = ow * p.stride - p.padding;
      best[ow] = -__builtin_inff();
      at[ow] = int32_t(hs * p.w + (w0 < 0 ? 0 : w0));  // the first real cell
    }
    for (int64_t ih = hs; ih < he; ++ih)
      for (int64_t j = 0; j < p.kw; ++j) {
        const int64_t off = j - p.padding, lo = cols[2 * j], hi = cols[2 * j + 1];
        const int32_t base = int32_t(ih * p.w + off);  // + ow*stride: a real cell for ow in [lo, hi)
        for (int64_t ow = lo; ow < hi; ++ow) {
          const int32_t a = base + int32_t(ow * p.stride);
          pick(best[ow], at[ow], x[a], a);
        }
      }
    for (int64_t ow = 0; ow < o.w; ++ow) y[oh * o.w + ow] = x[at[ow]];
    if (idx) std::memcpy(idx + oh * o.w, at, size_t(o.w) * sizeof(int32_t));
  }
}

}  // namespace

void max_pool2d_forward(const Pool2dParams& p, const float* x, float* y, int32_t* indices) {
  need_max(p, "max_pool2d_forward");
  need(x, "max_pool2d_forward", "x");
  need(y, "max_pool2d_forward", "y");
  const Size2d o = pool2d_output_size(p);
  const int64_t in_plane = p.h * p.w, out_plane = o.h * o.w;
  const std::vector<int64_t> cols = column_ranges(p, o);
  std::vector<float> best(size_t(o.w));
  std::vector<int32_t> at(size_t(o.w));
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    max_pool_plane(p, o, cols.data(), x + plane * in_plane, y + plane * out_plane,
                   indices ? indices + plane * out_plane : nullptr, best.data(), at.data());
}

void max_pool2d_backward(const Pool2dParams& p, const float* dy, const int32_t* indices, const float* x, float* dx) {
  need_max(p, "max_pool2d_backward");
  need(dy, "max_pool2d_backward", "dy");
  need(dx, "max_pool2d_backward", "dx");
  if (indices == nullptr && x == nullptr)
    throw std::invalid_argument("max_pool2d_backward: needs indices or x (both are null)");
  const Size2d o = pool2d_output_size(p);
  const int64_t in_plane = p.h * p.w, out_plane = o.h * o.w;
  if (indices == nullptr && p.kh == 2 && p.kw == 2 && p.stride == 2 && p.padding == 0) {
    for (int64_t plane = 0; plane < p.n * p.c; ++plane)
      max_pool_plane_2x2_backward(p, o, x + plane * in_plane, dy + plane * out_plane, dx + plane * in_plane);
    return;
  }
  std::memset(dx, 0, size_t(p.n * p.c * in_plane) * sizeof(float));
  const std::vector<int64_t> cols = column_ranges(p, o);
  std::vector<int32_t> found, at;
  std::vector<float> scratch, best;
  if (indices == nullptr) {
    found.resize(size_t(out_plane));
    scratch.resize(size_t(out_plane));
    best.resize(size_t(o.w));
    at.resize(size_t(o.w));
  }
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const int32_t* idx = indices ? indices + plane * out_plane : found.data();
    if (indices == nullptr)
      max_pool_plane(p, o, cols.data(), x + plane * in_plane, scratch.data(), found.data(), best.data(), at.data());
    const float* g = dy + plane * out_plane;
    float* d = dx + plane * in_plane;
    for (int64_t k = 0; k < out_plane; ++k) {
      // Indices come from the caller's buffer: one out of range is a caller bug, not a crash.
      if (idx[k] < 0 || idx[k] >= in_plane)
        throw std::invalid_argument("max_pool2d_backward: indices[" + std::to_string(plane * out_plane + k) +
                                    "] = " + std::to_string(idx[k]) + " is outside the input plane of " +
                                    std::to_string(in_plane));
      d[idx[k]] += g[k];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Batch norm, one channel at a time: a channel of a CNN batch (n planes of h*w) fits in L2 (400 KB
// for [128, 32, 28, 28]), so the second and third pass over it cost little next to the first.
// Sums run per plane in 8 independent f32 lanes (no loop-carried chain, vectorised at -O3) and
// across planes in double, so the error stays that of a sum of a few hundred terms.

namespace {

double sum(const float* x, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k];
  double s = 0;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return s;
}

double sum_sq_dev(const float* x, int64_t n, float m) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += (x[i + k] - m) * (x[i + k] - m);
  double s = 0;
  for (; i < n; ++i) s += double(x[i] - m) * double(x[i] - m);
  for (float a : acc) s += a;
  return s;
}

double sum_prod_dev(const float* dy, const float* x, int64_t n, float m) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += dy[i + k] * (x[i + k] - m);
  double s = 0;
  for (; i < n; ++i) s += double(dy[i]) * double(x[i] - m);
  for (float a : acc) s += a;
  return s;
}

// y = (x - mean) * scale + shift over channel ch of every image.
void normalize(const BatchNormParams& p, int64_t ch, const float* x, float* y, float mean, float scale, float shift) {
  const int64_t hw = p.h * p.w;
  for (int64_t n = 0; n < p.n; ++n) {
    const float* xp = x + (n * p.c + ch) * hw;
    float* yp = y + (n * p.c + ch) * hw;
    for (int64_t i = 0; i < hw; ++i) yp[i] = (xp[i] - mean) * scale + shift;
  }
}

}  // namespace

void batch_norm_forward_training(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                 float* y, float* mean, float* var) {
  check_batch_norm(p, true);
  args::batch_norm_forward_training(x, gamma, beta, y, mean, var);
  const int64_t hw = p.h * p.w;
  const double count = double(p.n * hw);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double s = 0, ss = 0;
    for (int64_t n = 0; n < p.n; ++n) s += sum(x + (n * p.c + ch) * hw, hw);
    const float m = float(s / count);
    for (int64_t n = 0; n < p.n; ++n) ss += sum_sq_dev(x + (n * p.c + ch) * hw, hw, m);
    const double v = ss / count;
    const float scale = float(double(gamma[ch]) / std::sqrt(v + p.epsilon));
    normalize(p, ch, x, y, m, scale, beta[ch]);
    mean[ch] = m;
    var[ch] = float(v);
  }
}

void batch_norm_backward(const BatchNormParams& p, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* var, float* dx, float* dgamma, float* dbeta) {
  check_batch_norm(p, true);
  args::batch_norm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta);
  const int64_t hw = p.h * p.w;
  const double count = double(p.n * hw);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    const float m = mean[ch];
    const double inv = 1.0 / std::sqrt(double(var[ch]) + p.epsilon);
    double sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < p.n; ++n) {
      sdy += sum(dy + (n * p.c + ch) * hw, hw);
      sdyx += sum_prod_dev(dy + (n * p.c + ch) * hw, x + (n * p.c + ch) * hw, hw, m);
    }
    // dx = gamma*inv*(dy - dbeta/M - xhat*dgamma/M) = a*dy + b*(x - mean) + c
    const double dg = sdyx * inv;
    const float a = float(gamma[ch] * inv), b = float(-gamma[ch] * inv * inv * dg / count),
                c = float(-gamma[ch] * inv * sdy / count);
    for (int64_t n = 0; n < p.n; ++n) {
      const float* xp = x + (n * p.c + ch) * hw;
      const float* gp = dy + (n * p.c + ch) * hw;
      float* dp = dx + (n * p.c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) dp[i] = a * gp[i] + b * (xp[i] - m) + c;
    }
    dgamma[ch] = float(dg);
    dbeta[ch] = float(sdy);
  }
}

void batch_norm_forward_inference(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* var, float* y) {
  check_batch_norm(p, false);
  args::batch_norm_forward_inference(x, gamma, beta, mean, var, y);
  for (int64_t ch = 0; ch < p.c; ++ch)
    normalize(p, ch, x, y, mean[ch], float(double(gamma[ch]) / std::sqrt(double(var[ch]) + p.epsilon)), beta[ch]);
}

}  // namespace synk::compiler::dnn::native
