// Small helpers for the descriptor types (runtime/call/descriptor.h).
#include "runtime/call/descriptor.h"

namespace synk::rt {

static int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ArrayRef::size() const { return product(shape); }
int64_t Array::size() const { return product(shape); }

void Array::resize(DType t, std::vector<int64_t> new_shape) {
  dtype = t;
  shape = std::move(new_shape);
  bytes.resize(size_t(product(shape)) * dtype_size(t));
}

}  // namespace synk::rt
