// Shape descriptors of synk's convolution, pooling and batch-norm ops with their checks (PyTorch
// semantics, padding 'same' included): what type inference, the reference evaluator and the CPU
// library steps (compiler/dnn/dnn.h) agree on. Every tensor is dense row-major NCHW; conv weights
// are OIHW ([out_channels, in_channels/groups, kh, kw]). Pure shape arithmetic: no oneDNN, no BLAS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace synk::dnn {

struct Size2d {
  int64_t h = 0, w = 0;
  bool operator==(const Size2d&) const = default;
};

// Dilation is PyTorch's (1 = dense), not oneDNN's (0 = dense); the oneDNN path converts.
struct Conv2dParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t out_channels = 1, kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  bool has_bias = false;
  bool operator==(const Conv2dParams&) const = default;
};

// "" when p is valid, else one message naming the first bad parameter and its value.
std::string conv2d_error(const Conv2dParams& p);
// Throws std::invalid_argument with conv2d_error's message.
void check_conv2d(const Conv2dParams& p);
// PyTorch's out = floor((in + pad_a + pad_b - dilation*(k-1) - 1)/stride) + 1. Checks p first.
Size2d conv2d_output_size(const Conv2dParams& p);
// PyTorch's padding='same' (stride 1 only, as in PyTorch): total = dilation*(k-1), the smaller
// half before, the larger after. Throws std::invalid_argument for stride != 1.
Conv2dParams with_same_padding(Conv2dParams p);
int64_t conv2d_input_elems(const Conv2dParams& p);   // n*c*h*w
int64_t conv2d_weight_elems(const Conv2dParams& p);  // out_channels*(c/groups)*kh*kw
int64_t conv2d_output_elems(const Conv2dParams& p);  // n*out_channels*oh*ow

enum class PoolKind { max, avg };

// PyTorch's max_pool2d / avg_pool2d with ceil_mode=False: one stride and one (symmetric) padding
// for both axes, padding at most half the kernel (PyTorch's rule; it also keeps every max-pool
// window from lying wholly in padding). count_include_pad is avg_pool2d's (default True).
struct Pool2dParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t kh = 1, kw = 1;
  int64_t stride = 1, padding = 0;
  PoolKind kind = PoolKind::max;
  bool count_include_pad = true;
  bool operator==(const Pool2dParams&) const = default;
};

std::string pool2d_error(const Pool2dParams& p);
void check_pool2d(const Pool2dParams& p);
Size2d pool2d_output_size(const Pool2dParams& p);  // floor((in + 2*pad - k)/stride) + 1
// Global average pooling as a Pool2dParams (kernel = the whole plane), for shape checks.
Pool2dParams global_avg_pool_params(int64_t n, int64_t c, int64_t h, int64_t w);

// Per-channel statistics over N, H, W. Training needs more than one value per channel (as in
// PyTorch: the batch variance of one value is 0 and the output would be beta alone).
struct BatchNormParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  double epsilon = 1e-5;
  bool operator==(const BatchNormParams&) const = default;
};

std::string batch_norm_error(const BatchNormParams& p, bool training);
void check_batch_norm(const BatchNormParams& p, bool training);


}  // namespace synk::dnn
