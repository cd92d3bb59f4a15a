// Pieces shared by the reference evaluator's driver (evaluator.cpp) and its op implementations
// (evaluator_ops.cpp): array-shape helpers, dtype conversions with the evaluator's wrapping rules,
// the broadcast walker, and the per-op function table. Not part of the public API.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/evaluator.h"

namespace synk::dsl::eval_detail {

using Sizes = std::vector<int64_t>;

int64_t element_count(const Sizes& sizes);
Sizes row_major_strides(const Sizes& sizes);
std::string sizes_str(const Sizes& sizes);   // "[4, 10]"

// Wraps an exact integer into the range of an integer (or bool) dtype: i32 two's complement,
// u8 mod 256, bool != 0. Floats pass through unchanged.
double wrap_integer(int64_t value, ir::DType dtype);

// A value already in some dtype's domain, re-expressed in `to` with the evaluator's cast rules
// (float -> int truncates toward zero, UserError when not representable; to bool: != 0; to f32:
// rounded to float). `op` names the op for messages.
double convert_value(double value, ir::DType to, const char* op);

// Symbol bindings of one evaluation, with the argument that bound each symbol (for messages).
struct Bindings {
  std::map<std::string, int64_t> size;
  std::map<std::string, std::string> bound_by;
};

// What an op implementation sees. `bindings` is mutable so that reshape can bind a symbol the
// front end introduced for a `-1` dimension.
struct OpContext {
  const ir::Node& node;
  ir::NodeId id;
  std::span<const HostTensor* const> args;
  Bindings& bindings;
};

using OpImpl = HostTensor (*)(OpContext& ctx);

// The implementation of every op except Input, SharedRead (handled by the driver) and Grad (a
// UserError). Throws InternalError for an op with no entry.
OpImpl op_impl(ir::Op op);

// Conv2d and the pooling ops, forward and backward (evaluator_window.cpp).
HostTensor window_op(OpContext& ctx);

// Visits every element of an array of shape `out` in row-major order, keeping for each of N
// operands the flat offset that numpy broadcasting maps the element to. `strides[k]` holds
// operand k's strides aligned to `out` (0 on broadcast axes). f(out_flat, offsets, index).
template <size_t N, class F>
void for_each_element(const Sizes& out, const std::array<Sizes, N>& strides, F&& f) {
  const int64_t total = element_count(out);
  if (total == 0) return;
  const size_t rank = out.size();
  Sizes index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t flat = 0; flat < total; ++flat) {
    f(flat, offsets, index);
    for (size_t d = rank; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (index[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * out[d];
      index[d] = 0;
    }
  }
}

// The strides of an operand of shape `in` broadcast to `out` (aligned on the right; 0 where the
// operand has size 1 or lacks the axis).
Sizes broadcast_strides(const Sizes& in, const Sizes& out);

}  // namespace synk::dsl::eval_detail
