// The IR side of conv2d and pooling: type inference of the window ops (ir::is_window_op) and the
// translation of their attributes (ir::Window2d) and operand shapes into the shape descriptors of
// dnn_params.h, which type inference, the reference evaluator and the CPU library steps share, so
// that all three agree on every output size and every rejected parameter.
// Errors: infer_window_type returns a user-facing message (no location) for a bad operand or
// parameter, like every other rule of type_infer.h.
#pragma once

#include <span>
#include <vector>

#include "ir/dnn_params.h"
#include "ir/ir.h"
#include "ir/type_infer.h"

namespace synk::ir {

// The conv descriptor of a Conv2d-family node: input [n, c, h, w], `out_channels` filters.
dnn::Conv2dParams conv2d_params(const Window2d& win, int64_t n, int64_t c, int64_t h, int64_t w,
                                int64_t out_channels);
// The pool descriptor of a pooling node (MaxPool2d*, AvgPool2d*) over input [n, c, h, w].
dnn::Pool2dParams pool2d_params(Op op, const Window2d& win, int64_t n, int64_t c, int64_t h, int64_t w);

// A channels_last convolution's activations as Transpose perms (result axis i is operand axis
// perm[i]): NHWC -> NCHW and NCHW -> NHWC.
inline const std::vector<int64_t> kNhwcToNchw{0, 3, 1, 2}, kNchwToNhwc{0, 2, 3, 1};
// t's type transposed by perm (the type a Transpose node of t has).
TensorType transposed_type(const TensorType& t, const std::vector<int64_t>& perm);

// infer_type's rule for the window ops (called by it).
dsl::InferResult infer_window_type(Op op, std::span<const TensorType> operands, const Attrs& attrs);

}  // namespace synk::ir
