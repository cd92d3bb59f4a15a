// CPU primitives for synk's convolutional networks, the library steps of CPU kernel plans: the
// f32 implementations of conv2d / pooling / batch norm as oneDNN primitives (namespace onednn),
// im2col + OpenBLAS sgemm as the second conv candidate (namespace im2col), and synk's own max pool
// and batch norm where oneDNN's semantics or speed fall short (namespace native). The shape
// descriptors and their checks are ir/dnn_params.h (namespace synk::dnn, visible here), the
// float64 oracle ir/dnn_reference.h. Every tensor is dense row-major NCHW; conv weights are OIHW.
// Nothing here includes oneDNN headers, so the compiler can include this without them.
// Errors: bad parameters and null pointers throw std::invalid_argument before oneDNN or BLAS runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dnn_params.h"

namespace synk::compiler::dnn {

using namespace synk::dnn;   // Conv2dParams, Pool2dParams, ..., reference::

// --- oneDNN (f32, one CPU engine, one thread per call, primitives cached per parameter set) ---
namespace onednn {

// plain: oneDNN runs on NCHW/OIHW memory directly. blocked: oneDNN picks its layouts
// (format_tag::any) and every call reorders its operands there and the result back; see the
// README for which is faster where. Both take and return plain NCHW. channels_last: the
// activations (x, y, dy, dx) are NHWC memory, which oneDNN's direct kernels read and write as they
// are (no reorders; weights stay OIHW and are reordered, a few KiB); a Winograd layer still
// reorders to its blocked layout. Conv2dParams keep naming n, c, h, w in every format.
enum class ConvFormat { plain, blocked, channels_last };

// The faster format on this machine's benchmark (README): plain (oneDNN's gemm convolution) for
// fewer than 3 input channels (a first layer on 1-channel images: 0.4x PyTorch's time against
// 0.6x blocked), blocked otherwise (about 1.0x against 1.2-2.6x plain). Depthwise convs are
// unmeasured, but on plain NCHW oneDNN runs them as gemm, while its depthwise JIT kernels need a
// blocked layout. A default until synk's own benchmark has measured the layer.
ConvFormat suggested_format(const Conv2dParams& p);

// Whether the blocked format computes this layer (forward and both backward passes) with oneDNN's
// Winograd F(4x4, 3x3) kernels instead of its direct ones: 3x3, stride 1, dense, one group,
// symmetric padding (oneDNN's backward-data pass is wrong for some asymmetric ones), and
// a shape where they measured faster on this machine (README, "Winograd"): at least 64 input and
// output channels over at least 1,024 output pixels per call (n * oh * ow), or at least 32 over
// as many pixels on output planes of at least 8x8. The rule depends on the shape only, so the choice, and so the
// bits, are the same on every run. Where oneDNN has no Winograd kernel (a CPU without AVX-512)
// the direct one runs. SYNK_CONV_ALGORITHM=direct turns it off, =winograd forces it wherever the
// layer allows (both for comparisons).
bool winograd_suits(const Conv2dParams& p);
// What chooses the algorithm: the shape rules (winograd_suits, winograd_suits_pass), or one
// algorithm wherever the layer allows it. SYNK_CONV_ALGORITHM (auto, direct, winograd) sets it at
// start; set_conv_algorithm changes it for benchmarks and tests (layers built before keep theirs
// until clear_primitive_cache).
enum class ConvAlgorithm { rule, direct, winograd };
void set_conv_algorithm(ConvAlgorithm algorithm);
// A UserError naming SYNK_CONV_ALGORITHM when it holds anything but auto, direct or winograd.
void check_conv_algorithm_environment();
// The three passes of a convolution.
enum class ConvPass { forward, backward_data, backward_weights };
// Whether pass `pass` of a layer in the channels_last format runs Winograd: the layer must suit
// it (winograd_suits), and on NHWC the pass pays the reorders of the activations it reads into
// the blocked layout and of what it writes back, where the direct kernels read NHWC as it is.
bool winograd_suits_pass(const Conv2dParams& p, ConvPass pass);
// Whether this CPU has oneDNN's Winograd kernels (AVX-512).
bool has_winograd_kernels();
// oneDNN's names of the kernels of the forward, backward-data and backward-weights passes.
std::vector<std::string> conv_implementations(const Conv2dParams& p, ConvFormat format);

// bias may be null iff !p.has_bias.
void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y,
                    ConvFormat format = ConvFormat::plain);
void conv2d_backward_data(const Conv2dParams& p, const float* dy, const float* w, float* dx,
                          ConvFormat format = ConvFormat::plain);
// db may be null iff !p.has_bias.
void conv2d_backward_weights(const Conv2dParams& p, const float* x, const float* dy, float* dw, float* db,
                             ConvFormat format = ConvFormat::plain);

// oneDNN's own max pool: the forward (training) fills a workspace of
// max_pool2d_workspace_bytes(p) bytes (oneDNN's window offsets, u8 for windows of < 256
// cells) that the backward needs; without it the forward must be run again. oneDNN breaks ties
// toward the first cell like PyTorch, but does NOT propagate NaN and returns -FLT_MAX, not -inf,
// for a window of -inf (see the README): synk uses native::max_pool2d_* instead, and keeps these
// to measure and test against.
size_t max_pool2d_workspace_bytes(const Pool2dParams& p);
void max_pool2d_forward(const Pool2dParams& p, const float* x, float* y, void* workspace);
void max_pool2d_backward(const Pool2dParams& p, const float* dy, const void* workspace, float* dx);

void avg_pool2d_forward(const Pool2dParams& p, const float* x, float* y);
void avg_pool2d_backward(const Pool2dParams& p, const float* dy, float* dx);
void global_avg_pool_forward(int64_t n, int64_t c, int64_t h, int64_t w, const float* x, float* y);
void global_avg_pool_backward(int64_t n, int64_t c, int64_t h, int64_t w, const float* dy, float* dx);

// Training: y = (x - mean)/sqrt(var + eps)*gamma + beta with the batch mean and biased variance,
// both returned ([c] each) for the caller's running statistics.
void batch_norm_forward_training(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                 float* y, float* mean, float* var);
// The gradient through the batch statistics of the training forward (mean, var as it returned).
void batch_norm_backward(const BatchNormParams& p, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* var, float* dx, float* dgamma, float* dbeta);
void batch_norm_forward_inference(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* var, float* y);

// "<major>.<minor>.<patch> runtime=<omp|tbb|seq|threadpool>" of the oneDNN in use.
std::string version_text();
// The instruction set oneDNN's kernels use on this CPU ("avx512_core_bf16", "avx2", ...).
std::string isa_text();
size_t cached_primitives();
void clear_primitive_cache();

}  // namespace onednn

// --- synk's own loops, where oneDNN's semantics or speed fall short ---
namespace native {

// Max pool with PyTorch's semantics (the rule at the top of dnn_reference.h: first maximal cell
// on ties, NaN propagates, -inf windows give -inf). The forward writes, when `indices` is not
// null, one int32 per output: the flat position ih*w + iw of the chosen cell in its input plane
// (PyTorch's return_indices); the backward scatters dy through them, 4 bytes per output element
// to keep. Without indices the backward needs x and finds them again (the cost of a forward).
void max_pool2d_forward(const Pool2dParams& p, const float* x, float* y, int32_t* indices);
void max_pool2d_backward(const Pool2dParams& p, const float* dy, const int32_t* indices, const float* x, float* dx);

// Batch norm with the same contract as onednn:: (biased batch variance returned, gradients through
// the batch statistics), in plain loops that beat oneDNN 2.6's nchw batch norm on one thread.
void batch_norm_forward_training(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                 float* y, float* mean, float* var);
void batch_norm_backward(const BatchNormParams& p, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* var, float* dx, float* dgamma, float* dbeta);
void batch_norm_forward_inference(const BatchNormParams& p, const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* var, float* y);

}  // namespace native

// --- im2col + OpenBLAS sgemm conv (f32), the candidate the benchmark weighs against oneDNN ---
namespace im2col {

void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y);
void conv2d_backward_data(const Conv2dParams& p, const float* dy, const float* w, float* dx);
void conv2d_backward_weights(const Conv2dParams& p, const float* x, const float* dy, float* dw, float* db);

}  // namespace im2col

}  // namespace synk::compiler::dnn
