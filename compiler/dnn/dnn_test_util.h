// Helpers shared by dnn_test.cpp and dnn_test_ops.cpp: seeded random tensors, f32 <-> f64
// conversion, and the comparison of an f32 result with the float64 oracle under an error bound
// that follows from how the result is summed (so the tests neither flake nor hide real errors).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compiler/dnn/dnn.h"

namespace synk::dnn {

// gtest prints parameters with these (found by argument-dependent lookup) instead of raw bytes.
inline void PrintTo(const Conv2dParams& p, std::ostream* os) {
  *os << "conv n" << p.n << " c" << p.c << " " << p.h << "x" << p.w << " -> " << p.out_channels << " k" << p.kh << "x"
      << p.kw << " s" << p.stride_h << "," << p.stride_w << " pad" << p.pad_top << "," << p.pad_bottom << ","
      << p.pad_left << "," << p.pad_right << " d" << p.dilation_h << "," << p.dilation_w << " g" << p.groups
      << (p.has_bias ? " bias" : "");
}
inline void PrintTo(const Pool2dParams& p, std::ostream* os) {
  *os << (p.kind == PoolKind::max ? "max" : "avg") << "pool n" << p.n << " c" << p.c << " " << p.h << "x" << p.w << " k"
      << p.kh << "x" << p.kw << " s" << p.stride << " pad" << p.padding;
}
inline void PrintTo(const BatchNormParams& p, std::ostream* os) {
  *os << "bn " << p.n << "x" << p.c << "x" << p.h << "x" << p.w << " eps " << p.epsilon;
}

}  // namespace synk::dnn

namespace synk::compiler::dnn::testing {

struct ConvCase {
  const char* name;
  Conv2dParams p;
};

inline Conv2dParams conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t stride, int64_t pad,
                         bool bias, int64_t groups = 1, int64_t dilation = 1) {
  return {n, c, h, w, o, k, k, stride, stride, pad, pad, pad, pad, dilation, dilation, groups, bias};
}

// The conv shapes every path is tested on: odd sizes, strides, paddings (asymmetric too),
// dilation, groups (depthwise too), kernels 1/3/5/7, batch 1 and 3, with and without bias.
inline void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name << " (";
  PrintTo(c.p, os);
  *os << ")";
}

inline std::vector<ConvCase> conv_cases() {
  Conv2dParams asym{3, 4, 9, 10, 6, 3, 2, 2, 1, 0, 2, 1, 0, 1, 2, 2, true};  // every axis differs
  Conv2dParams same_even = with_same_padding(conv(1, 3, 6, 7, 4, 4, 1, 0, true));
  same_even.kw = 2;
  same_even = with_same_padding(same_even);  // kh 4 -> pads 1/2, kw 2 -> pads 0/1
  return {
      {"odd_3x3_pad1_bias", conv(1, 3, 7, 9, 4, 3, 1, 1, true)},
      {"stride2_pad1_batch3", conv(3, 4, 10, 11, 6, 3, 2, 1, false)},
      {"k5_pad2_dilation2", conv(1, 2, 9, 8, 4, 5, 1, 2, true, 1, 2)},
      {"groups2_pad0", conv(3, 4, 8, 8, 4, 3, 1, 0, true, 2)},
      {"depthwise_3x3", conv(2, 6, 9, 9, 6, 3, 1, 1, false, 6)},
      {"depthwise_x2_stride2", conv(1, 4, 9, 7, 8, 3, 2, 1, true, 4)},
      {"k1_direct", conv(3, 8, 5, 7, 5, 1, 1, 0, true)},
      {"k1_stride2_shortcut", conv(2, 8, 9, 9, 16, 1, 2, 0, false)},
      {"k7_stride2_pad3_stem", conv(1, 3, 15, 17, 8, 7, 2, 3, true)},
      {"asymmetric_everything", asym},
      {"same_padding_even_kernel", same_even},
      {"kernel_fills_padded_input", conv(2, 3, 3, 3, 4, 5, 1, 1, true)},
      {"k1_pad2_outputs_in_padding", conv(1, 2, 4, 4, 3, 1, 1, 2, true)},
      {"odd_channels_batch3", conv(3, 5, 6, 6, 7, 3, 1, 1, true)},
      {"wide_16_to_32", conv(2, 16, 12, 12, 32, 3, 1, 1, true)},
      {"wide_stride2_16_to_32", conv(2, 16, 12, 12, 32, 3, 2, 1, false)},
      // Shapes the blocked format runs with Winograd (onednn::winograd_suits) where the CPU has it.
      {"winograd_64_to_64_8x8_batch16", conv(16, 64, 8, 8, 64, 3, 1, 1, false)},
      {"winograd_32_to_48_16x17_bias", conv(2, 32, 16, 17, 48, 3, 1, 1, true)},
  };
}

// Uniform in [-1, 1), from a fixed seed so a failure reproduces.
inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline std::vector<double> abs_of(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// Checks |got - ref| <= (terms + 1) * u * mag elementwise, where u = 2^-24 is f32's unit roundoff,
// terms is the most products any output sums and mag is the same sum taken over absolute values:
// the textbook bound on a float sum in any order (with or without FMA), so it holds for every
// blocking oneDNN or OpenBLAS may choose. A wrong or missing tap is of order mag/terms, far above.
inline ::testing::AssertionResult close_to_sum(const std::vector<float>& got, const std::vector<double>& ref,
                                               const std::vector<double>& mag, int64_t terms) {
  if (got.size() != ref.size() || got.size() != mag.size())
    return ::testing::AssertionFailure() << "size mismatch: " << got.size() << " vs " << ref.size();
  const double u = std::ldexp(1.0, -24);
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = double(terms + 1) * u * mag[i] + 1e-30;
    const double err = std::fabs(double(got[i]) - ref[i]);
    if (!(err <= tol)) {
      if (bad++ == 0) first = i;
      worst = std::max(worst, err / tol);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off; first at " << first << ": got "
                                       << got[first] << ", want " << ref[first] << " (bound "
                                       << double(terms + 1) * u * mag[first] << "); worst error/bound " << worst;
}

// |got - ref| <= rel * max|ref| elementwise: for results whose rounding is not a plain sum
// (batch norm's normalisation, averages).
inline ::testing::AssertionResult close_rel_max(const std::vector<float>& got, const std::vector<double>& ref,
                                                double rel) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "size mismatch: " << got.size() << " vs " << ref.size();
  double scale = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  const double tol = rel * scale + 1e-30;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - ref[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << ref[i] << " (tolerance " << tol << ")";
  return ::testing::AssertionSuccess();
}

// Bitwise equality, NaN equal to NaN: for max pooling, which selects rather than computes.
inline ::testing::AssertionResult same_values(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size mismatch: " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

}  // namespace synk::compiler::dnn::testing
