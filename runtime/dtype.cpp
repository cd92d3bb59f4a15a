// Element-type helpers (see dtype.h).
#include "runtime/dtype.h"

#include <fmt/format.h>

#include "runtime/errors.h"

namespace synk::rt {

bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::F64; }

bool parse_dtype(std::string_view name, DType* out) {
  struct Entry { std::string_view a, b; DType t; };
  static const Entry table[] = {{"f32", "float32", DType::F32}, {"f64", "float64", DType::F64},
                                {"i32", "int32", DType::I32},   {"i64", "int64", DType::I64},
                                {"u8", "uint8", DType::U8},     {"bool", "bool", DType::Bool}};
  for (const Entry& e : table)
    if (name == e.a || name == e.b) return *out = e.t, true;
  return false;
}

bool can_cast_safely(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  switch (from) {
    case DType::U8: return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
    case DType::I32: return to == DType::I64 || to == DType::F64;
    case DType::I64: return to == DType::F64;
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

void convert_elements(const void* src, DType from, void* dst, DType to, int64_t n) {
  visit_dtype(from, [&]<class S>() {
    visit_dtype(to, [&]<class D>() {
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, bool>) d[i] = s[i] != S(0);
        else d[i] = static_cast<D>(s[i]);
      }
    });
  });
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t shape_size(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string spec_string(const TensorSpec& spec, const std::vector<std::string>& symbols) {
  std::vector<std::string> dims;
  for (const DimSpec& d : spec.dims) {
    if (d.symbol >= 0 && size_t(d.symbol) < symbols.size()) dims.push_back(symbols[d.symbol]);
    else if (d.symbol >= 0) dims.push_back(fmt::format("?{}", d.symbol));
    else dims.push_back(std::to_string(d.size));
  }
  return fmt::format("{}[{}]", dtype_name(spec.dtype), fmt::join(dims, ", "));
}

}  // namespace synk::rt
