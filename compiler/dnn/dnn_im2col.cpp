// The im2col + OpenBLAS sgemm conv2d of dnn.h (namespace im2col): the second candidate that
// synk's benchmark weighs against oneDNN. Per image and group, the input's windows are unrolled
// into a [cg*kh*kw, oh*ow] matrix ("col") so that the forward is W[og, K] x col, the data gradient
// is W^T x dy scattered back (col2im) and the weight gradient is dy x col^T summed over images.
// A 1x1 kernel with stride 1 and no padding needs no unrolling: the input is its own col.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/dnn/dnn.h"
#include "compiler/dnn/dnn_args.h"

namespace synk::compiler::dnn::im2col {

namespace {

struct Geometry {
  int64_t cg, og, k;  // input / output channels per group; k = cg*kh*kw, the gemm's inner size
  Size2d o;
  int64_t ohw, hw;
  bool direct;  // the input is its own col
};

Geometry geometry(const Conv2dParams& p) {
  Geometry g;
  g.o = conv2d_output_size(p);  // checks p
  g.cg = p.c / p.groups;
  g.og = p.out_channels / p.groups;
  g.k = g.cg * p.kh * p.kw;
  g.ohw = g.o.h * g.o.w;
  g.hw = p.h * p.w;
  g.direct = p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_bottom == 0 &&
             p.pad_left == 0 && p.pad_right == 0;
  // cblas takes int sizes and leading dimensions.
  for (int64_t v : {g.k, g.ohw, g.og})
    if (v > INT_MAX)
      throw std::invalid_argument("conv2d (im2col): a gemm dimension of " + std::to_string(v) +
                                  " does not fit OpenBLAS's int");
  return g;
}

// For kernel column j: the output columns [lo, hi) whose input column ow*stride_w + off lies inside
// the input; the rest read padding.
struct ColumnRange {
  int64_t off, lo, hi;
};

ColumnRange column_range(const Conv2dParams& p, int64_t ow_count, int64_t j) {
  const int64_t off = j * p.dilation_w - p.pad_left;
  int64_t lo = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
  int64_t hi = p.w - 1 - off < 0 ? 0 : (p.w - 1 - off) / p.stride_w + 1;
  hi = std::min(hi, ow_count);
  lo = std::min(lo, hi);
  return {off, lo, hi};
}

// col[(c*kh + i)*kw + j][oh*ow_count + ow] = x[c][ih][iw], 0 in padding; x is one group's cg planes.
void unroll(const Conv2dParams& p, const Geometry& g, const float* x, float* col) {
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        float* row = col + ((c * p.kh + i) * p.kw + j) * g.ohw;
        const ColumnRange r = column_range(p, g.o.w, j);
        for (int64_t oh = 0; oh < g.o.h; ++oh) {
          float* out = row + oh * g.o.w;
          const int64_t ih = oh * p.stride_h - p.pad_top + i * p.dilation_h;
          if (ih < 0 || ih >= p.h) {
            std::fill(out, out + g.o.w, 0.0f);
            continue;
          }
          const float* in = x + (c * p.h + ih) * p.w;
          std::fill(out, out + r.lo, 0.0f);
          if (p.stride_w == 1) {
            if (r.hi > r.lo) std::memcpy(out + r.lo, in + r.lo + r.off, size_t(r.hi - r.lo) * sizeof(float));
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) out[ow] = in[ow * p.stride_w + r.off];
          }
          std::fill(out + r.hi, out + g.o.w, 0.0f);
        }
      }
}

// The adjoint of unroll: dx[c][ih][iw] += col[...] (padding cells dropped); dx must start zeroed.
void fold(const Conv2dParams& p, const Geometry& g, const float* col, float* dx) {
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        const float* row = col + ((c * p.kh + i) * p.kw + j) * g.ohw;
        const ColumnRange r = column_range(p, g.o.w, j);
        for (int64_t oh = 0; oh < g.o.h; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_top + i * p.dilation_h;
          if (ih < 0 || ih >= p.h) continue;
          const float* in = row + oh * g.o.w;
          float* out = dx + (c * p.h + ih) * p.w;
          for (int64_t ow = r.lo; ow < r.hi; ++ow) out[ow * p.stride_w + r.off] += in[ow];
        }
      }
}

// A per-thread scratch col, grown as needed: a call allocates nothing once shapes repeat.
float* scratch(size_t elems) {
  thread_local std::vector<float> buf;
  if (buf.size() < elems) buf.resize(elems);
  return buf.data();
}


}  // namespace

void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y) {
  args::conv2d_forward(p, x, w, bias, y);
  const Geometry g = geometry(p);
  float* col = g.direct ? nullptr : scratch(size_t(g.k * g.ohw));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      const float* xg = x + (n * p.c + grp * g.cg) * g.hw;
      float* yg = y + (n * p.out_channels + grp * g.og) * g.ohw;
      if (!g.direct) unroll(p, g, xg, col);
      // The bias goes in first so that the gemm adds onto it (beta = 1) in the same pass.
      for (int64_t oc = 0; oc < g.og; ++oc)
        std::fill(yg + oc * g.ohw, yg + (oc + 1) * g.ohw, p.has_bias ? bias[grp * g.og + oc] : 0.0f);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(g.og), int(g.ohw), int(g.k), 1.0f,
                  w + grp * g.og * g.k, int(g.k), g.direct ? xg : col, int(g.ohw), 1.0f, yg, int(g.ohw));
    }
}

void conv2d_backward_data(const Conv2dParams& p, const float* dy, const float* w, float* dx) {
  args::conv2d_backward_data(dy, w, dx);
  const Geometry g = geometry(p);
  float* col = g.direct ? nullptr : scratch(size_t(g.k * g.ohw));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      const float* dyg = dy + (n * p.out_channels + grp * g.og) * g.ohw;
      float* dxg = dx + (n * p.c + grp * g.cg) * g.hw;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(g.k), int(g.ohw), int(g.og), 1.0f, w + grp * g.og * g.k,
                  int(g.k), dyg, int(g.ohw), 0.0f, g.direct ? dxg : col, int(g.ohw));
      if (g.direct) continue;
      std::fill(dxg, dxg + g.cg * g.hw, 0.0f);
      fold(p, g, col, dxg);
    }
}

void conv2d_backward_weights(const Conv2dParams& p, const float* x, const float* dy, float* dw, float* db) {
  args::conv2d_backward_weights(p, x, dy, dw, db);
  const Geometry g = geometry(p);
  float* col = g.direct ? nullptr : scratch(size_t(g.k * g.ohw));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      const float* xg = x + (n * p.c + grp * g.cg) * g.hw;
      const float* dyg = dy + (n * p.out_channels + grp * g.og) * g.ohw;
      if (!g.direct) unroll(p, g, xg, col);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(g.og), int(g.k), int(g.ohw), 1.0f, dyg, int(g.ohw),
                  g.direct ? xg : col, int(g.ohw), n == 0 ? 0.0f : 1.0f, dw + grp * g.og * g.k, int(g.k));
    }
  if (!p.has_bias) return;
  for (int64_t oc = 0; oc < p.out_channels; ++oc) {
    // Per image partial sums first: one long f32 chain over n*oh*ow values would lose digits.
    double s = 0;
    for (int64_t n = 0; n < p.n; ++n) {
      const float* d = dy + (n * p.out_channels + oc) * g.ohw;
      float part = 0;
      for (int64_t k = 0; k < g.ohw; ++k) part += d[k];
      s += part;
    }
    db[oc] = float(s);
  }
}

}  // namespace synk::compiler::dnn::im2col
