// The reference evaluator's random ops (ir::Op::Random): the draws of base/philox.h, computed on
// the host with the very header the generated kernels paste, rounded to the op's dtype. Row r of
// an op with global rows is the call's row first_row + r; element e is the flat index in the row.
#include <fmt/format.h>

#include "base/errors.h"
#include "base/philox.h"
#include "ir/evaluator.h"

namespace synk::dsl {

HostTensor random_values(const ir::Node& node, const std::vector<int64_t>& shape, const RngState& rng) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t row_size = rows == 0 ? 0 : count / rows;
  const synk_rng_stream s = synk_rng_make_stream(rng.seed, uint32_t(node.attrs.salt), rng.step);
  const bool f32 = node.type.dtype == ir::DType::F32;
  const bool normal = node.attrs.index == 1;
  SYNK_CHECK(node.attrs.index == 0 || normal, fmt::format("random op with distribution {}", node.attrs.index));
  std::vector<double> data(static_cast<size_t>(count));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t row = uint64_t(r + (node.attrs.global_rows ? rng.first_row : 0));
    for (int64_t e = 0; e < row_size; ++e) {
      double v;
      if (normal) v = f32 ? double(synk_rng_normal_at_f32(s, row, uint64_t(e), 0.0f, 1.0f))
                          : synk_rng_normal_at_f64(s, row, uint64_t(e), 0.0, 1.0);
      else v = f32 ? double(synk_rng_uniform_at_f32(s, row, uint64_t(e), 0.0f, 1.0f))
                   : synk_rng_uniform_at_f64(s, row, uint64_t(e), 0.0, 1.0);
      data[size_t(r * row_size + e)] = v;
    }
  }
  return HostTensor::make(node.type.dtype, shape, std::move(data));
}

}  // namespace synk::dsl
