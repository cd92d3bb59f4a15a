// Small helpers for the descriptor types (runtime/call/descriptor.h). Element and byte counts go
// through base/checked_math.h: a shape whose size does not fit, or an allocation the machine
// cannot make, is a user error naming the shape and the bytes, never a wrapped count.
#include "runtime/call/descriptor.h"

#include <new>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/errors.h"

namespace synk::rt {

static int64_t product(const std::vector<int64_t>& shape) {
  std::optional<int64_t> n = checked_elements(shape);
  if (!n)
    throw UserError(fmt::format("an array of shape [{}] cannot exist: it would hold {}", fmt::join(shape, ", "),
                                describe_oversize(shape, 1, "elements")));
  return *n;
}

int64_t ArrayRef::size() const { return product(shape); }
int64_t Array::size() const { return product(shape); }

void Array::resize(DType t, std::vector<int64_t> new_shape) {
  std::optional<int64_t> bytes = checked_shape_bytes(new_shape, dtype_size(t));
  if (!bytes)
    throw UserError(fmt::format("an array of shape [{}] of {} cannot exist: it would take {}", fmt::join(new_shape, ", "),
                                dtype_name(t), describe_oversize(new_shape, dtype_size(t))));
  try {
    this->bytes.resize(size_t(*bytes));
  } catch (const std::bad_alloc&) {
    throw UserError(fmt::format("cannot allocate {} bytes for an array of shape [{}] of {}: out of memory", *bytes,
                                fmt::join(new_shape, ", "), dtype_name(t)));
  } catch (const std::length_error&) {
    throw UserError(fmt::format("cannot allocate {} bytes for an array of shape [{}] of {}: out of memory", *bytes,
                                fmt::join(new_shape, ", "), dtype_name(t)));
  }
  dtype = t;
  shape = std::move(new_shape);
}

}  // namespace synk::rt
