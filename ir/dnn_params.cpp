// Shape arithmetic and parameter checks of dnn.h. Kept apart from the oneDNN and BLAS code so the
// float64 reference (dnn_reference.h) links with neither. Every check runs before any primitive is
// built: oneDNN must never see a shape it could crash on or reject with an opaque status.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ir/dnn_params.h"

namespace synk::dnn {

namespace {

std::string bad(const std::string& what, int64_t value, const std::string& why) {
  return what + " = " + std::to_string(value) + ": " + why;
}

// The largest element count any tensor may have, so that products of dims cannot overflow int64
// and oneDNN's dims (int64) and BLAS's ints (lda, ...) stay meaningful.
constexpr int64_t kMaxElems = int64_t(1) << 31;

// Message for the first dim below 1 or too large, or a product over kMaxElems.
std::string dims_error(std::initializer_list<std::pair<const char*, int64_t>> dims, const char* tensor) {
  int64_t product = 1;
  for (const auto& [name, v] : dims) {
    if (v < 1) return bad(name, v, "must be at least 1");
    if (v > kMaxElems) return bad(name, v, "is too large");
    product *= v;
    if (product > kMaxElems) return std::string(tensor) + " has more than 2^31 elements";
  }
  return "";
}

std::string conv_axis_error(const char* axis, int64_t in, int64_t k, int64_t stride, int64_t pad_a, int64_t pad_b,
                            int64_t dilation) {
  const std::string a(axis);
  const char* kname = a == "height" ? "kh" : "kw";
  if (stride < 1) return bad(a == "height" ? "stride_h" : "stride_w", stride, "must be at least 1");
  if (dilation < 1) return bad(a == "height" ? "dilation_h" : "dilation_w", dilation, "must be at least 1");
  if (pad_a < 0) return bad(a == "height" ? "pad_top" : "pad_left", pad_a, "must not be negative");
  if (pad_b < 0) return bad(a == "height" ? "pad_bottom" : "pad_right", pad_b, "must not be negative");
  if (k > kMaxElems || dilation > kMaxElems || pad_a > kMaxElems || pad_b > kMaxElems)
    return std::string("the ") + axis + " parameters are too large";
  int64_t extent = dilation * (k - 1) + 1;
  if (extent > in + pad_a + pad_b)
    return bad(kname, k,
               "the dilated kernel (" + std::to_string(extent) + ") is larger than the padded input " + axis + " (" +
                   std::to_string(in + pad_a + pad_b) + ")");
  // Padding as wide as the dilated kernel would make whole output rows read only padding; PyTorch
  // allows it for conv, so do we (the output there is the bias).
  return "";
}

}  // namespace

std::string conv2d_error(const Conv2dParams& p) {
  std::string e = dims_error({{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}}, "the input");
  if (!e.empty()) return e;
  e = dims_error({{"out_channels", p.out_channels}, {"kh", p.kh}, {"kw", p.kw}}, "the weights");
  if (!e.empty()) return e;
  if (p.groups < 1) return bad("groups", p.groups, "must be at least 1");
  if (p.c % p.groups != 0)
    return bad("groups", p.groups, "does not divide the input channels c = " + std::to_string(p.c));
  if (p.out_channels % p.groups != 0)
    return bad("groups", p.groups, "does not divide out_channels = " + std::to_string(p.out_channels));
  e = conv_axis_error("height", p.h, p.kh, p.stride_h, p.pad_top, p.pad_bottom, p.dilation_h);
  if (!e.empty()) return e;
  e = conv_axis_error("width", p.w, p.kw, p.stride_w, p.pad_left, p.pad_right, p.dilation_w);
  if (!e.empty()) return e;
  e = dims_error({{"out_channels", p.out_channels}, {"c/groups", p.c / p.groups}, {"kh", p.kh}, {"kw", p.kw}},
                 "the weights");
  if (!e.empty()) return e;
  int64_t oh = (p.h + p.pad_top + p.pad_bottom - p.dilation_h * (p.kh - 1) - 1) / p.stride_h + 1;
  int64_t ow = (p.w + p.pad_left + p.pad_right - p.dilation_w * (p.kw - 1) - 1) / p.stride_w + 1;
  return dims_error({{"n", p.n}, {"out_channels", p.out_channels}, {"output height", oh}, {"output width", ow}},
                    "the output");
}

void check_conv2d(const Conv2dParams& p) {
  std::string e = conv2d_error(p);
  if (!e.empty()) throw std::invalid_argument("conv2d: " + e);
}

Size2d conv2d_output_size(const Conv2dParams& p) {
  check_conv2d(p);
  return {(p.h + p.pad_top + p.pad_bottom - p.dilation_h * (p.kh - 1) - 1) / p.stride_h + 1,
          (p.w + p.pad_left + p.pad_right - p.dilation_w * (p.kw - 1) - 1) / p.stride_w + 1};
}

Conv2dParams with_same_padding(Conv2dParams p) {
  if (p.stride_h != 1)
    throw std::invalid_argument("conv2d: padding='same' needs stride_h = 1, not " + std::to_string(p.stride_h));
  if (p.stride_w != 1)
    throw std::invalid_argument("conv2d: padding='same' needs stride_w = 1, not " + std::to_string(p.stride_w));
  if (p.dilation_h < 1) throw std::invalid_argument("conv2d: " + bad("dilation_h", p.dilation_h, "must be at least 1"));
  if (p.dilation_w < 1) throw std::invalid_argument("conv2d: " + bad("dilation_w", p.dilation_w, "must be at least 1"));
  if (p.kh < 1) throw std::invalid_argument("conv2d: " + bad("kh", p.kh, "must be at least 1"));
  if (p.kw < 1) throw std::invalid_argument("conv2d: " + bad("kw", p.kw, "must be at least 1"));
  int64_t th = p.dilation_h * (p.kh - 1), tw = p.dilation_w * (p.kw - 1);
  p.pad_top = th / 2;
  p.pad_bottom = th - th / 2;
  p.pad_left = tw / 2;
  p.pad_right = tw - tw / 2;
  return p;
}

int64_t conv2d_input_elems(const Conv2dParams& p) { return p.n * p.c * p.h * p.w; }
int64_t conv2d_weight_elems(const Conv2dParams& p) { return p.out_channels * (p.c / p.groups) * p.kh * p.kw; }
int64_t conv2d_output_elems(const Conv2dParams& p) {
  Size2d o = conv2d_output_size(p);
  return p.n * p.out_channels * o.h * o.w;
}

std::string pool2d_error(const Pool2dParams& p) {
  std::string e = dims_error({{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}}, "the input");
  if (!e.empty()) return e;
  e = dims_error({{"kh", p.kh}, {"kw", p.kw}}, "the window");
  if (!e.empty()) return e;
  if (p.kind != PoolKind::max && p.kind != PoolKind::avg) return bad("kind", int64_t(p.kind), "is not max or avg");
  if (p.stride < 1) return bad("stride", p.stride, "must be at least 1");
  if (p.stride > kMaxElems) return bad("stride", p.stride, "is too large");
  if (p.padding < 0) return bad("padding", p.padding, "must not be negative");
  if (2 * p.padding > p.kh || 2 * p.padding > p.kw)
    return bad(
        "padding", p.padding,
        "must be at most half the window (kh = " + std::to_string(p.kh) + ", kw = " + std::to_string(p.kw) + ")");
  if (p.kh > p.h + 2 * p.padding)
    return bad("kh", p.kh, "is larger than the padded input height (" + std::to_string(p.h + 2 * p.padding) + ")");
  if (p.kw > p.w + 2 * p.padding)
    return bad("kw", p.kw, "is larger than the padded input width (" + std::to_string(p.w + 2 * p.padding) + ")");
  return "";
}

void check_pool2d(const Pool2dParams& p) {
  std::string e = pool2d_error(p);
  if (!e.empty()) throw std::invalid_argument(std::string(p.kind == PoolKind::avg ? "avg" : "max") + "_pool2d: " + e);
}

Size2d pool2d_output_size(const Pool2dParams& p) {
  check_pool2d(p);
  return {(p.h + 2 * p.padding - p.kh) / p.stride + 1, (p.w + 2 * p.padding - p.kw) / p.stride + 1};
}

Pool2dParams global_avg_pool_params(int64_t n, int64_t c, int64_t h, int64_t w) {
  Pool2dParams p{n, c, h, w, h, w, 1, 0, PoolKind::avg, true};
  std::string e = dims_error({{"n", n}, {"c", c}, {"h", h}, {"w", w}}, "the input");
  if (!e.empty()) throw std::invalid_argument("global_avg_pool: " + e);
  return p;
}

std::string batch_norm_error(const BatchNormParams& p, bool training) {
  std::string e = dims_error({{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}}, "the input");
  if (!e.empty()) return e;
  // Through float: oneDNN takes epsilon as f32, so a positive double that rounds to 0 or inf is bad.
  float eps = float(p.epsilon);
  if (!(p.epsilon >= 0) || !std::isfinite(eps))
    return "epsilon = " + std::to_string(p.epsilon) + ": must be a finite number >= 0";
  if (training && p.n * p.h * p.w < 2)
    return "n*h*w = " + std::to_string(p.n * p.h * p.w) + ": training needs more than one value per channel";
  return "";
}

void check_batch_norm(const BatchNormParams& p, bool training) {
  std::string e = batch_norm_error(p, training);
  if (!e.empty()) throw std::invalid_argument("batch_norm: " + e);
}

}  // namespace synk::dnn
