// Test support for the gradient pass and the update rules: a seeded random source (Rng, from
// base/testing.h) whose seed is
// printed (set SYNK_TEST_SEED to replay a run), random HostTensors, and the gradient checker that
// compares a function's expanded grad(...) output with float64 central finite differences of
// its loss output, both run through the reference evaluator.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/testing.h"
#include "ir/evaluator.h"
#include "ir/ir.h"
#include "ir/type_infer.h"

namespace synk::compiler::testing {

using dsl::HostTensor;

// A dimension written as 10 or "n".
struct D {
  ir::Dim dim;
  D(int n) : dim(ir::Dim::fixed(n)) {}
  D(const char* s) : dim(ir::Dim::sym(s)) {}
};
inline ir::TensorType T(ir::DType dtype, std::initializer_list<D> dims) {
  ir::TensorType t{dtype, {}};
  for (const D& d : dims) t.shape.push_back(d.dim);
  return t;
}

using ::synk::testing::Rng;

inline int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

template <class F>
HostTensor tensor_from(ir::DType dtype, std::vector<int64_t> shape, F&& value_at) {
  std::vector<double> data(size_t(count_of(shape)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = value_at(i);
  if (dtype == ir::DType::F32)
    for (double& v : data) v = double(float(v));
  return HostTensor::make(dtype, std::move(shape), std::move(data));
}

inline HostTensor uniform_tensor(Rng& rng, ir::DType dtype, std::vector<int64_t> shape, double low = -2,
                                 double high = 2) {
  return tensor_from(dtype, std::move(shape), [&](size_t) { return rng.uniform(low, high); });
}

// Distinct values at least 0.05 apart, shuffled: no ties for max/min, no kinks within a step.
inline HostTensor distinct_tensor(Rng& rng, ir::DType dtype, std::vector<int64_t> shape) {
  const int64_t n = count_of(shape);
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = -1.0 + 0.1 * double(i) + rng.uniform(0, 0.05);
  std::shuffle(values.begin(), values.end(), rng.engine());
  return tensor_from(dtype, std::move(shape), [&](size_t i) { return values[i]; });
}

// The static sizes of a type (for tensors of variables, which have static shapes).
inline std::vector<int64_t> static_sizes(const ir::TensorType& t) {
  std::vector<int64_t> s;
  for (const ir::Dim& d : t.shape) s.push_back(d.size);
  return s;
}

struct FiniteDifferenceOptions {
  double step = 1e-6;        // relative to max(1, |x|)
  double tolerance = 1e-6;   // |analytic - numeric| <= tolerance * (1 + |numeric|)
};

// Evaluates `function` of `expanded`, whose output `loss_output` is a float scalar and output
// `grad_output` is grad(loss, vars...), and checks every element of the gradient against central
// differences of the loss in each variable `vars` (shared-variable indices, in the grad's order).
// Returns the gradient so callers can check more.
inline HostTensor check_gradient(const ir::Module& expanded, const std::string& function,
                                 const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& shareds,
                                 size_t loss_output, size_t grad_output, const std::vector<int64_t>& vars,
                                 FiniteDifferenceOptions options = {}) {
  const dsl::EvalResult base = dsl::evaluate(expanded, function, inputs, shareds);
  const HostTensor gradient = base.outputs.at(grad_output);
  EXPECT_TRUE(base.outputs.at(loss_output).shape.empty()) << "the loss must be a scalar";
  int64_t expected_size = 0;
  for (int64_t v : vars) expected_size += shareds.at(size_t(v)).size();
  if (vars.size() == 1) {
    EXPECT_EQ(gradient.shape, shareds.at(size_t(vars[0])).shape) << "a single variable's gradient has its shape";
  } else {
    EXPECT_EQ(gradient.shape, std::vector<int64_t>{expected_size}) << "several variables give one flat vector";
  }
  if (gradient.size() != expected_size) return gradient;

  auto loss_at = [&](const std::vector<HostTensor>& values) {
    return dsl::evaluate(expanded, function, inputs, values).outputs.at(loss_output).data.at(0);
  };
  int64_t flat = 0;
  for (int64_t v : vars) {
    const HostTensor& var = shareds.at(size_t(v));
    for (int64_t j = 0; j < var.size(); ++j, ++flat) {
      std::vector<HostTensor> plus = shareds, minus = shareds;
      const double x = var.data[size_t(j)];
      const double h = options.step * std::max(1.0, std::fabs(x));
      double xp = x + h, xm = x - h;
      if (var.dtype == ir::DType::F32) xp = double(float(xp)), xm = double(float(xm));
      plus[size_t(v)].data[size_t(j)] = xp;
      minus[size_t(v)].data[size_t(j)] = xm;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (xp - xm);
      const double analytic = gradient.data[size_t(flat)];
      EXPECT_NEAR(analytic, numeric, options.tolerance * (1 + std::fabs(numeric)))
          << "d loss / d " << (v < int64_t(expanded.shareds.size()) ? expanded.shareds[size_t(v)].name : "?")
          << "[flat " << j << "] (gradient element " << flat << ")";
    }
  }
  return gradient;
}

}  // namespace synk::compiler::testing
