// The pointer checks every implementation of a dnn.h entry point (oneDNN, im2col, native) makes
// alike, in one place so that the three keep one contract: each named array must be non-null.
// Internal to compiler/dnn. Errors: std::invalid_argument "<op>: <name> is null", for the first
// null pointer in the order the entry point lists its parameters.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "compiler/dnn/dnn.h"

namespace synk::compiler::dnn::args {

inline void need(const void* ptr, const char* op, const char* name) {
  if (ptr == nullptr) throw std::invalid_argument(std::string(op) + ": " + name + " is null");
}

inline void need_all(const char* op, std::initializer_list<std::pair<const void*, const char*>> pointers) {
  for (auto [ptr, name] : pointers) need(ptr, op, name);
}

inline void conv2d_forward(const Conv2dParams& p, const void* x, const void* w, const void* bias, const void* y) {
  need_all("conv2d_forward", {{x, "x"}, {w, "w"}, {y, "y"}});
  if (p.has_bias) need(bias, "conv2d_forward", "bias (has_bias is set)");
}

inline void conv2d_backward_data(const void* dy, const void* w, const void* dx) {
  need_all("conv2d_backward_data", {{dy, "dy"}, {w, "w"}, {dx, "dx"}});
}

inline void conv2d_backward_weights(const Conv2dParams& p, const void* x, const void* dy, const void* dw,
                                    const void* db) {
  need_all("conv2d_backward_weights", {{x, "x"}, {dy, "dy"}, {dw, "dw"}});
  if (p.has_bias) need(db, "conv2d_backward_weights", "db (has_bias is set)");
}

inline void batch_norm_forward_training(const void* x, const void* gamma, const void* beta, const void* y,
                                        const void* mean, const void* var) {
  need_all("batch_norm_forward_training",
           {{x, "x"}, {gamma, "gamma"}, {beta, "beta"}, {y, "y"}, {mean, "mean"}, {var, "var"}});
}

inline void batch_norm_backward(const void* x, const void* dy, const void* gamma, const void* mean, const void* var,
                                const void* dx, const void* dgamma, const void* dbeta) {
  need_all("batch_norm_backward", {{x, "x"}, {dy, "dy"}, {gamma, "gamma"}, {mean, "mean"}, {var, "var"},
                                   {dx, "dx"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}});
}

inline void batch_norm_forward_inference(const void* x, const void* gamma, const void* beta, const void* mean,
                                         const void* var, const void* y) {
  need_all("batch_norm_forward_inference",
           {{x, "x"}, {gamma, "gamma"}, {beta, "beta"}, {mean, "mean"}, {var, "var"}, {y, "y"}});
}

}  // namespace synk::compiler::dnn::args
