// Accumulating results over parts (slices within a rank, then ranks on the master) for every
// reduce mode of SEMANTICS section 5: exact weighted avg, elementwise sum/prod/max/min, gather
// (concatenation on axis 0, unequal lengths exact) and none (the last part). The same class
// serves both levels: a rank sends its partial() with its total weight, and the master adds the
// partials of every rank in rank order.
//
// Float avg/sum/prod accumulate in float64 and partials travel in float64, so the master rounds
// to the declared dtype once; integer sum/prod accumulate in int64 (wrapping like the hardware).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt {

class Accumulator {
 public:
  Accumulator() = default;
  // `label` names the output or update in error messages.
  Accumulator(ReduceMode mode, DType dtype, std::string label);

  // Adds one part (any dtype for elementwise modes and avg; exactly `dtype` for gather/none).
  // Throws synk::Error when shapes disagree.
  void add(const ArrayRef& part, int64_t weight);

  bool empty() const { return parts_ == 0; }
  int64_t weight() const { return weight_; }
  ReduceMode mode() const { return mode_; }
  const std::vector<int64_t>& shape() const { return shape_; }

  // The state to send to the master (see the file comment); shape() is its shape.
  DType partial_dtype() const { return acc_.dtype; }
  size_t partial_bytes() const { return acc_.bytes.size(); }
  void write_partial(void* dst) const;
  Array partial() const;
  // The result in the declared dtype. With no parts: an empty array of shape [0].
  Array finish() const;
  void reset();

 private:
  enum class Store : uint8_t { F64, I64, Native };
  Store store_ = Store::Native;
  ReduceMode mode_ = ReduceMode::None;
  DType dtype_ = DType::F32;
  std::string label_;
  std::vector<int64_t> shape_;
  Array acc_;            // dtype F64 / I64 / dtype_, by store_
  int64_t weight_ = 0;
  int64_t parts_ = 0;
};

}  // namespace synk::rt
