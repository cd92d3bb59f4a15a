// Checked arithmetic for sizes: the one place where element counts and byte counts are computed
// from shapes that come from outside (.npy headers, .synk declarations and reshapes, synk::data,
// compiled functions' outputs). A plain product of int64 dimensions wraps silently: a header
// claiming (4611686018427387905, 4) f32 elements "needs" 16 bytes. Every caller that turns a
// shape into a count or an allocation goes through here and reports nullopt as a user error
// naming the shape, so an impossible size is never allocated, truncated or indexed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace synk {

// The largest byte count synk allocates or indexes: what an int64 offset can address.
inline constexpr int64_t kMaxBytes = INT64_MAX;

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The number of elements of `shape`; nullopt when a dimension is negative or the product does
// not fit in int64. A zero dimension makes the product 0 whatever the others are (numpy's rule:
// shape (0, 2^62, 2^62) holds no element).
inline std::optional<int64_t> checked_elements(std::span<const int64_t> shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) return int64_t(0);
    if (!overflow && __builtin_mul_overflow(n, d, &n)) overflow = true;
  }
  if (overflow) return std::nullopt;
  return n;
}
inline std::optional<int64_t> checked_elements(const std::vector<int64_t>& shape) {
  return checked_elements(std::span<const int64_t>(shape.data(), shape.size()));
}

// The bytes of `elements` elements of `element_size` bytes each; nullopt on overflow or a
// negative count.
inline std::optional<int64_t> checked_bytes(int64_t elements, size_t element_size) {
  if (elements < 0 || element_size > size_t(INT64_MAX)) return std::nullopt;
  return checked_mul(elements, int64_t(element_size));
}

// Both at once: the bytes a row-major array of `shape` takes.
inline std::optional<int64_t> checked_shape_bytes(std::span<const int64_t> shape, size_t element_size) {
  std::optional<int64_t> n = checked_elements(shape);
  if (!n) return std::nullopt;
  return checked_bytes(*n, element_size);
}
inline std::optional<int64_t> checked_shape_bytes(const std::vector<int64_t>& shape, size_t element_size) {
  return checked_shape_bytes(std::span<const int64_t>(shape.data(), shape.size()), element_size);
}

// A non-empty run of decimal digits as an int64; nullopt for anything else or when it does not
// fit (std::stoll would throw std::out_of_range, strtoll would saturate).
inline std::optional<int64_t> parse_decimal(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    std::optional<int64_t> t = checked_mul(v, 10);
    if (!t) return std::nullopt;
    std::optional<int64_t> u = checked_add(*t, c - '0');
    if (!u) return std::nullopt;
    v = *u;
  }
  return v;
}

// What an error says about a shape whose size does not fit: the exact product when it fits in
// 128 bits, e.g. "18446744073709551616 bytes (more than the 9223372036854775807 bytes an array
// can have)"; `unit` is "bytes" or, with element_size 1, "elements". A negative dimension is
// named as such.
std::string describe_oversize(std::span<const int64_t> shape, size_t element_size, std::string_view unit = "bytes");
inline std::string describe_oversize(const std::vector<int64_t>& shape, size_t element_size,
                                     std::string_view unit = "bytes") {
  return describe_oversize(std::span<const int64_t>(shape.data(), shape.size()), element_size, unit);
}

}  // namespace synk
