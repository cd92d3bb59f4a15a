// Element types at run time: dispatch from a DType to its C++ type, the safe-cast rule of
// SEMANTICS section 8 (numpy's "safe" casting), element conversion, and shape formatting for
// messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runtime/call/descriptor.h"

namespace synk::rt {

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <class T> inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

// Calls f.template operator()<T>() with T the C++ type of `t` (Bool is `bool`, one byte).
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<float>();
    case DType::F64: return f.template operator()<double>();
    case DType::I32: return f.template operator()<int32_t>();
    case DType::I64: return f.template operator()<int64_t>();
    case DType::U8: return f.template operator()<uint8_t>();
    case DType::Bool: return f.template operator()<bool>();
    case DType::F16:
    case DType::BF16: break;   // reserved: typed by the front end, never stored by the runtime
  }
  throw InternalError(std::string("visit_dtype: ") + dtype_name(t) + " values have no runtime representation");
}

// The safe-cast rule is the one of base/dtype.h.
using synk::can_cast_safely;

// Converts `n` elements (C conversions; to bool means "nonzero").
void convert_elements(const void* src, DType from, void* dst, DType to, int64_t n);

std::string shape_string(const std::vector<int64_t>& shape);           // "[2, 3]"; scalar "[]"
std::string dimensions_text(size_t n);                                // "1 dimension", "2 dimensions"
int64_t shape_size(const std::vector<int64_t>& shape);
// "f32[n, 10]" with symbol names from `symbols`.
std::string spec_string(const TensorSpec& spec, const std::vector<std::string>& symbols);

}  // namespace synk::rt
