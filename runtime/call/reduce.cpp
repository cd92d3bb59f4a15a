// The accumulators of reduce.h.
#include "runtime/call/reduce.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/data/dtype.h"
#include "base/errors.h"

namespace synk::rt {

Accumulator::Accumulator(ReduceMode mode, DType dtype, std::string label)
    : mode_(mode), dtype_(dtype), label_(std::move(label)) {
  bool elementwise_arith = mode == ReduceMode::Avg || mode == ReduceMode::Sum || mode == ReduceMode::Prod;
  if (elementwise_arith && is_float(dtype)) store_ = Store::F64;
  else if (elementwise_arith && dtype != DType::Bool) store_ = Store::I64;
  else store_ = Store::Native;
}

void Accumulator::reset() {
  shape_.clear();
  acc_.resize(acc_.dtype, {0});
  weight_ = 0;
  parts_ = 0;
}

namespace {

// Reads element i of `a` as double / int64.
double read_f64(const ArrayRef& a, int64_t i) {
  return visit_dtype(a.dtype, [&]<class T>() { return double(static_cast<const T*>(a.data)[i]); });
}
int64_t read_i64(const ArrayRef& a, int64_t i) {
  return visit_dtype(a.dtype, [&]<class T>() { return int64_t(static_cast<const T*>(a.data)[i]); });
}

int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

}  // namespace

void Accumulator::add(const ArrayRef& part, int64_t weight) {
  const int64_t n = part.size();
  if (mode_ == ReduceMode::Gather) {
    if (part.dtype != dtype_)
      throw Error(fmt::format("{}: a part has dtype {}, expected {}", label_, dtype_name(part.dtype),
                              dtype_name(dtype_)));
    std::vector<int64_t> rows_shape = part.shape;
    if (rows_shape.empty()) rows_shape = {1};   // scalars stack into a vector
    if (parts_ == 0) {
      shape_ = rows_shape;
      shape_[0] = 0;
      acc_.resize(dtype_, shape_);
    } else if (!std::equal(rows_shape.begin() + 1, rows_shape.end(), shape_.begin() + 1,
                           shape_.end()) || rows_shape.size() != shape_.size()) {
      throw Error(fmt::format("{}: gather needs equal shapes after axis 0, but parts have shapes "
                              "{} and {}", label_, shape_string(shape_), shape_string(part.shape)));
    }
    size_t old = acc_.bytes.size();
    acc_.bytes.resize(old + size_t(n) * dtype_size(dtype_));
    if (n) std::memcpy(acc_.bytes.data() + old, part.data, size_t(n) * dtype_size(dtype_));
    shape_[0] += rows_shape[0];
    acc_.shape = shape_;
    weight_ += weight;
    ++parts_;
    return;
  }
  if (mode_ == ReduceMode::None) {
    if (part.dtype != dtype_)
      throw Error(fmt::format("{}: a part has dtype {}, expected {}", label_, dtype_name(part.dtype),
                              dtype_name(dtype_)));
    shape_ = part.shape;
    acc_.resize(dtype_, shape_);
    if (n) std::memcpy(acc_.bytes.data(), part.data, acc_.bytes.size());
    weight_ += weight;
    ++parts_;
    return;
  }
  if (parts_ > 0 && part.shape != shape_)
    throw Error(fmt::format("{}: mode {} combines parts elementwise, but they have shapes {} and {}",
                            label_, mode_name(mode_), shape_string(shape_), shape_string(part.shape)));
  const bool first = parts_ == 0;
  if (first) {
    shape_ = part.shape;
    acc_.resize(store_ == Store::F64 ? DType::F64 : store_ == Store::I64 ? DType::I64 : dtype_, shape_);
  }
  if (store_ == Store::F64) {
    double* acc = acc_.data<double>();
    for (int64_t i = 0; i < n; ++i) {
      double v = read_f64(part, i);
      switch (mode_) {
        case ReduceMode::Avg: acc[i] = first ? v * double(weight) : acc[i] + v * double(weight); break;
        case ReduceMode::Sum: acc[i] = first ? v : acc[i] + v; break;
        default: acc[i] = first ? v : acc[i] * v; break;   // Prod
      }
    }
  } else if (store_ == Store::I64) {
    int64_t* acc = acc_.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = read_i64(part, i);
      acc[i] = first ? v : mode_ == ReduceMode::Sum ? wrap_add(acc[i], v) : wrap_mul(acc[i], v);
    }
  } else {
    // max / min (and bool sum/prod, which are logical or / and), in the declared dtype.
    visit_dtype(dtype_, [&]<class T>() {
      T* acc = acc_.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        T v;
        if constexpr (std::is_same_v<T, bool>) v = read_i64(part, i) != 0;
        else if constexpr (std::is_floating_point_v<T>) v = T(read_f64(part, i));
        else v = T(read_i64(part, i));
        if (first) { acc[i] = v; continue; }
        bool take_max = mode_ == ReduceMode::Max || (std::is_same_v<T, bool> && mode_ == ReduceMode::Sum);
        if (take_max) acc[i] = (v > acc[i] || v != v) ? v : acc[i];     // NaN propagates
        else acc[i] = (v < acc[i] || v != v) ? v : acc[i];
      }
    });
  }
  weight_ += weight;
  ++parts_;
}

void Accumulator::write_partial(void* dst) const {
  if (acc_.bytes.empty()) return;
  if (mode_ != ReduceMode::Avg) {
    std::memcpy(dst, acc_.bytes.data(), acc_.bytes.size());
    return;
  }
  // The weighted mean so far, in float64: the master re-weights it by weight().
  const double* acc = acc_.data<double>();
  double* out = static_cast<double*>(dst);
  for (int64_t i = 0; i < acc_.size(); ++i) out[i] = acc[i] / double(weight_);
}

Array Accumulator::partial() const {
  Array out;
  out.resize(acc_.dtype, acc_.shape);
  write_partial(out.bytes.data());
  return out;
}

Array Accumulator::finish() const {
  Array out;
  if (parts_ == 0) {
    out.resize(dtype_, {0});
    return out;
  }
  out.resize(dtype_, shape_);
  int64_t n = out.size();
  if (store_ == Store::Native) {
    if (n) std::memcpy(out.bytes.data(), acc_.bytes.data(), out.bytes.size());
  } else if (store_ == Store::F64) {
    const double* acc = acc_.data<double>();
    double divisor = mode_ == ReduceMode::Avg ? double(weight_) : 1.0;
    visit_dtype(dtype_, [&]<class T>() {
      for (int64_t i = 0; i < n; ++i) out.data<T>()[i] = T(acc[i] / divisor);
    });
  } else {
    convert_elements(acc_.bytes.data(), DType::I64, out.bytes.data(), dtype_, n);
  }
  return out;
}

}  // namespace synk::rt
