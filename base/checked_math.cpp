// The message part of checked_math.h: how large an oversized shape really is.
#include "base/checked_math.h"

#include <algorithm>

namespace synk {

namespace {
std::string u128_string(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v) {
    s.push_back(char('0' + int(v % 10)));
    v /= 10;
  }
  std::reverse(s.begin(), s.end());
  return s;
}
}  // namespace

std::string describe_oversize(std::span<const int64_t> shape, size_t element_size, std::string_view unit) {
  for (int64_t d : shape)
    if (d < 0) return "a negative dimension (" + std::to_string(d) + ")";
  unsigned __int128 bytes = element_size;
  bool exact = true;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, (unsigned __int128)(uint64_t)d, &bytes)) exact = false;
  const std::string u(unit);
  const std::string limit = "the " + std::to_string(kMaxBytes) + " " + u + " an array can have";
  if (!exact) return "more than 2^128 " + u + " (far more than " + limit + ")";
  return u128_string(bytes) + " " + u + " (more than " + limit + ")";
}

}  // namespace synk
