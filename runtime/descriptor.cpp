// Small helpers for the descriptor types (runtime/descriptor.h).
#include "runtime/descriptor.h"

#include <stdexcept>

namespace synk::rt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::U8: case DType::Bool: return 1;
  }
  throw std::logic_error("dtype_size: bad dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
  }
  return "?";
}

const char* mode_name(ReduceMode m) {
  switch (m) {
    case ReduceMode::Avg: return "avg";
    case ReduceMode::Sum: return "sum";
    case ReduceMode::Prod: return "prod";
    case ReduceMode::Max: return "max";
    case ReduceMode::Min: return "min";
    case ReduceMode::Gather: return "gather";
    case ReduceMode::None: return "none";
  }
  return "?";
}

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
