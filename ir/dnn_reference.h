// Straightforward-loop reference implementations of the ops in dnn.h, templated on the element
// type: with double they are the float64 oracle of synk's differential tests (and of dnn_test.cpp);
// with float they are a slow but obviously-correct fallback. They favour clarity over speed: no
// blocking, no vectorisation, each output a plain accumulation. Parameters are checked as in dnn.h
// (std::invalid_argument) before any loop runs.
//
// Max-pool rule (PyTorch's CPU kernel, and synk's): each window is scanned over its real cells in
// row-major (kh, kw) order; padding cells count as -infinity and are never chosen (every window has
// a real cell because padding <= kernel/2). The running choice starts at the first real cell with
// value -inf and moves to a cell when `v > best || isnan(v)`. Hence: ties go to the FIRST maximal
// cell; a NaN wins (the output is NaN) and with several NaNs the LAST one gets the gradient (as in
// PyTorch); a window of -inf values gives -inf with the gradient on its first real cell.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ir/dnn_params.h"

namespace synk::dnn::reference {

// Visits every (output, input, weight) triple of the convolution once: the two backward passes
// are the same sum as the forward, scattered instead of gathered.
template <class F>
void conv2d_for_each_tap(const Conv2dParams& p, F&& f) {
  const Size2d o = conv2d_output_size(p);
  const int64_t cg = p.c / p.groups, og = p.out_channels / p.groups;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oc = 0; oc < p.out_channels; ++oc)
      for (int64_t oh = 0; oh < o.h; ++oh)
        for (int64_t ow = 0; ow < o.w; ++ow) {
          const int64_t yi = ((n * p.out_channels + oc) * o.h + oh) * o.w + ow;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < p.kh; ++i) {
              const int64_t ih = oh * p.stride_h - p.pad_top + i * p.dilation_h;
              if (ih < 0 || ih >= p.h) continue;
              for (int64_t j = 0; j < p.kw; ++j) {
                const int64_t iw = ow * p.stride_w - p.pad_left + j * p.dilation_w;
                if (iw < 0 || iw >= p.w) continue;
                f(yi, ((n * p.c + oc / og * cg + ic) * p.h + ih) * p.w + iw, ((oc * cg + ic) * p.kh + i) * p.kw + j);
              }
            }
        }
}

// y[n, oc, oh, ow] = bias[oc] + sum over the group's input channels and the window, in the order
// conv2d_for_each_tap visits them.
template <class T>
void conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y) {
  const Size2d o = conv2d_output_size(p);
  const int64_t plane = o.h * o.w;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oc = 0; oc < p.out_channels; ++oc)
      std::fill_n(y + (n * p.out_channels + oc) * plane, plane, p.has_bias ? bias[oc] : T(0));
  conv2d_for_each_tap(p, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += x[xi] * w[wi]; });
}

template <class T>
void conv2d_backward_data(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  check_conv2d(p);
  std::vector<T> acc(size_t(conv2d_input_elems(p)), T(0));
  conv2d_for_each_tap(p, [&](int64_t yi, int64_t xi, int64_t wi) { acc[size_t(xi)] += dy[yi] * w[wi]; });
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = acc[i];
}

// db may be null iff !p.has_bias.
template <class T>
void conv2d_backward_weights(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db) {
  check_conv2d(p);
  std::vector<T> acc(size_t(conv2d_weight_elems(p)), T(0));
  conv2d_for_each_tap(p, [&](int64_t yi, int64_t xi, int64_t wi) { acc[size_t(wi)] += dy[yi] * x[xi]; });
  for (size_t i = 0; i < acc.size(); ++i) dw[i] = acc[i];
  if (!p.has_bias) return;
  const Size2d o = conv2d_output_size(p);
  for (int64_t oc = 0; oc < p.out_channels; ++oc) {
    T s = T(0);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t k = 0; k < o.h * o.w; ++k) s += dy[(n * p.out_channels + oc) * o.h * o.w + k];
    db[oc] = s;
  }
}

// Calls f(plane, out_index, first_h, end_h, first_w, end_w) for every output of a pool: the
// window's real (non-padding) rows and columns [first, end) within plane (n*c + channel).
template <class F>
void pool2d_for_each_window(const Pool2dParams& p, F&& f) {
  const Size2d o = pool2d_output_size(p);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t oh = 0; oh < o.h; ++oh)
      for (int64_t ow = 0; ow < o.w; ++ow) {
        const int64_t h0 = oh * p.stride - p.padding, w0 = ow * p.stride - p.padding;
        f(plane, (plane * o.h + oh) * o.w + ow, std::max<int64_t>(h0, 0), std::min(h0 + p.kh, p.h),
          std::max<int64_t>(w0, 0), std::min(w0 + p.kw, p.w));
      }
}

// The flat input index of each output's maximum under the rule at the top of this file.
template <class T>
std::vector<int64_t> max_pool2d_argmax(const Pool2dParams& p, const T* x) {
  const Size2d o = pool2d_output_size(p);
  std::vector<int64_t> arg(size_t(p.n * p.c * o.h * o.w));
  pool2d_for_each_window(p, [&](int64_t plane, int64_t yi, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    const T* xp = x + plane * p.h * p.w;
    T best = -std::numeric_limits<T>::infinity();
    int64_t at = h0 * p.w + w0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) {
        const T v = xp[ih * p.w + iw];
        if (v > best || std::isnan(v)) {
          best = v;
          at = ih * p.w + iw;
        }
      }
    arg[size_t(yi)] = plane * p.h * p.w + at;
  });
  return arg;
}

template <class T>
void max_pool2d_forward(const Pool2dParams& p, const T* x, T* y) {
  const std::vector<int64_t> arg = max_pool2d_argmax(p, x);
  for (size_t i = 0; i < arg.size(); ++i) y[i] = x[arg[i]];
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* x, const T* dy, T* dx) {
  const std::vector<int64_t> arg = max_pool2d_argmax(p, x);
  for (int64_t i = 0; i < p.n * p.c * p.h * p.w; ++i) dx[i] = T(0);
  for (size_t i = 0; i < arg.size(); ++i) dx[arg[i]] += dy[i];
}

// The divisor of one window: kh*kw when padding counts (with ceil_mode=False a window never
// reaches past the padding, so this is PyTorch's clipped-to-padded-input count), else its real cells.
inline int64_t avg_pool2d_divisor(const Pool2dParams& p, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
  return p.count_include_pad ? p.kh * p.kw : (h1 - h0) * (w1 - w0);
}

template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* x, T* y) {
  pool2d_for_each_window(p, [&](int64_t plane, int64_t yi, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    T s = T(0);
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) s += x[(plane * p.h + ih) * p.w + iw];
    y[yi] = s / T(avg_pool2d_divisor(p, h0, h1, w0, w1));
  });
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* dy, T* dx) {
  check_pool2d(p);
  for (int64_t i = 0; i < p.n * p.c * p.h * p.w; ++i) dx[i] = T(0);
  pool2d_for_each_window(p, [&](int64_t plane, int64_t yi, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    const T g = dy[yi] / T(avg_pool2d_divisor(p, h0, h1, w0, w1));
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) dx[(plane * p.h + ih) * p.w + iw] += g;
  });
}

// y[n, c] = the mean of x[n, c, :, :].
template <class T>
void global_avg_pool_forward(int64_t n, int64_t c, int64_t h, int64_t w, const T* x, T* y) {
  global_avg_pool_params(n, c, h, w);
  for (int64_t plane = 0; plane < n * c; ++plane) {
    T s = T(0);
    for (int64_t k = 0; k < h * w; ++k) s += x[plane * h * w + k];
    y[plane] = s / T(h * w);
  }
}

template <class T>
void global_avg_pool_backward(int64_t n, int64_t c, int64_t h, int64_t w, const T* dy, T* dx) {
  global_avg_pool_params(n, c, h, w);
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t k = 0; k < h * w; ++k) dx[plane * h * w + k] = dy[plane] / T(h * w);
}

// Calls f(channel, index) for every element of that channel, in N, H, W order.
template <class F>
void batch_norm_for_each(const BatchNormParams& p, int64_t ch, F&& f) {
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.h * p.w; ++k) f(((n * p.c + ch) * p.h * p.w) + k);
}

// Two passes (mean, then the mean of squared deviations) so the variance cannot go negative.
template <class T>
void batch_norm_forward_training(const BatchNormParams& p, const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                 T* var) {
  check_batch_norm(p, true);
  const T count = T(p.n * p.h * p.w);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    T s = T(0), ss = T(0);
    batch_norm_for_each(p, ch, [&](int64_t i) { s += x[i]; });
    const T m = s / count;
    batch_norm_for_each(p, ch, [&](int64_t i) { ss += (x[i] - m) * (x[i] - m); });
    const T v = ss / count, inv = T(1) / std::sqrt(v + T(p.epsilon));
    batch_norm_for_each(p, ch, [&](int64_t i) { y[i] = (x[i] - m) * inv * gamma[ch] + beta[ch]; });
    mean[ch] = m;
    var[ch] = v;
  }
}

// With xhat = (x - mean)/sqrt(var + eps) and M = n*h*w per channel: dbeta = sum dy,
// dgamma = sum dy*xhat, dx = gamma/sqrt(var + eps) * (dy - dbeta/M - xhat*dgamma/M).
template <class T>
void batch_norm_backward(const BatchNormParams& p, const T* x, const T* dy, const T* gamma, const T* mean, const T* var,
                         T* dx, T* dgamma, T* dbeta) {
  check_batch_norm(p, true);
  const T count = T(p.n * p.h * p.w);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    const T inv = T(1) / std::sqrt(var[ch] + T(p.epsilon));
    T db = T(0), dg = T(0);
    batch_norm_for_each(p, ch, [&](int64_t i) {
      db += dy[i];
      dg += dy[i] * (x[i] - mean[ch]) * inv;
    });
    batch_norm_for_each(p, ch, [&](int64_t i) {
      const T xhat = (x[i] - mean[ch]) * inv;
      dx[i] = gamma[ch] * inv * (dy[i] - db / count - xhat * dg / count);
    });
    dgamma[ch] = dg;
    dbeta[ch] = db;
  }
}

template <class T>
void batch_norm_forward_inference(const BatchNormParams& p, const T* x, const T* gamma, const T* beta, const T* mean,
                                  const T* var, T* y) {
  check_batch_norm(p, false);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    const T inv = T(1) / std::sqrt(var[ch] + T(p.epsilon));
    batch_norm_for_each(p, ch, [&](int64_t i) { y[i] = (x[i] - mean[ch]) * inv * gamma[ch] + beta[ch]; });
  }
}

}  // namespace synk::dnn::reference
