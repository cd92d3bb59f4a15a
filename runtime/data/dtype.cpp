// Element-type helpers (see dtype.h).
#include "runtime/data/dtype.h"

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/errors.h"

namespace synk::rt {

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

std::string dimensions_text(size_t n) { return fmt::format("{} dimension{}", n, n == 1 ? "" : "s"); }

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t shape_size(const std::vector<int64_t>& shape) {
  std::optional<int64_t> n = checked_elements(shape);
  if (!n)
    throw UserError(fmt::format("an array of shape {} cannot exist: it would hold {}", shape_string(shape),
                                describe_oversize(shape, 1, "elements")));
  return *n;
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
