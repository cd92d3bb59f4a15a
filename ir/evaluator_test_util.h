// Helpers for the reference evaluator's tests (ir/evaluator*_test.cpp, dsl/evaluator_examples_test.cpp): types written as
// T(DType::F32, {"n", 10}), a Graph that builds one function node by node, attribute shorthands,
// random data whose seed is printed on failure, and an elementwise comparison that knows NaN and
// infinities. Test use only.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/evaluator.h"

namespace synk::dsl::eval_test {

using ir::DType;
using ir::Op;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A dimension written as 10 or "n".
struct D {
  ir::Dim dim;
  D(int64_t n) : dim(ir::Dim::fixed(n)) {}
  D(const char* s) : dim(ir::Dim::sym(s)) {}
};
inline ir::TensorType T(DType dtype, std::initializer_list<D> dims) {
  ir::TensorType t{dtype, {}};
  for (const D& d : dims) t.shape.push_back(d.dim);
  return t;
}

// Hand-built IR: one function in one module, nodes appended in order.
struct Graph {
  ir::Module module;
  ir::Function fn;
  Graph() { fn.name = "f"; }

  ir::NodeId input(const std::string& name, ir::TensorType type, ir::Role role = ir::Role::Scatter) {
    fn.params.push_back(ir::Param{name, role, type, {}});
    ir::Node n{Op::Input, type, {}, {}, name, {}};
    n.attrs.index = int64_t(fn.params.size() - 1);
    return fn.add(n);
  }
  ir::NodeId shared(const std::string& name, ir::TensorType type) {
    module.shareds.push_back(ir::SharedVar{name, type, ir::InitZeros{}, false, {}});
    ir::Node n{Op::SharedRead, type, {}, {}, name, {}};
    n.attrs.index = int64_t(module.shareds.size() - 1);
    return fn.add(n);
  }
  ir::NodeId node(Op op, ir::TensorType type, std::vector<ir::NodeId> operands, ir::Attrs attrs = {}) {
    return fn.add(ir::Node{op, type, std::move(operands), std::move(attrs), "", {}});
  }
  ir::NodeId constant(DType dtype, double value) {
    ir::Attrs a;
    if (ir::is_float(dtype)) a.value = value; else a.ivalue = int64_t(value);
    return node(Op::Constant, T(dtype, {}), {}, a);
  }
  void out(ir::NodeId id, ir::ReduceMode mode = ir::ReduceMode::Sum) {
    fn.outputs.push_back(ir::Output{"o" + std::to_string(fn.outputs.size()), id, mode, {}});
  }
  EvalResult run(std::vector<HostTensor> inputs, std::vector<HostTensor> shareds = {}) {
    module.functions = {fn};
    return evaluate(module, module.functions[0], inputs, shareds);
  }
  // Runs and returns the first output.
  HostTensor run1(std::vector<HostTensor> inputs, std::vector<HostTensor> shareds = {}) {
    return run(std::move(inputs), std::move(shareds)).outputs.at(0);
  }
};

inline ir::Attrs axes_attr(std::vector<int64_t> axes, bool keepdims = false) {
  ir::Attrs a;
  a.axes = std::move(axes);
  a.keepdims = keepdims;
  return a;
}
inline ir::Attrs axis_attr(int64_t axis) { ir::Attrs a; a.axis = axis; return a; }

// Fresh random data each run; the seed is reported by SCOPED_TRACE so that a failure reproduces.
class Random {
 public:
  Random() : seed_(std::random_device{}()), gen_(seed_) {}
  uint64_t seed() const { return seed_; }
  HostTensor normal(DType dtype, std::vector<int64_t> shape, double stddev = 1.0) {
    HostTensor t = HostTensor::filled(dtype, std::move(shape), 0);
    std::normal_distribution<double> dist(0, stddev);
    for (double& v : t.data) v = dtype == DType::F32 ? double(float(dist(gen_))) : dist(gen_);
    return t;
  }
  HostTensor ints(DType dtype, std::vector<int64_t> shape, int64_t low, int64_t high) {
    HostTensor t = HostTensor::filled(dtype, std::move(shape), 0);
    std::uniform_int_distribution<int64_t> dist(low, high);
    for (double& v : t.data) v = double(dist(gen_));
    return t;
  }

 private:
  uint64_t seed_;
  std::mt19937_64 gen_;
};
#define TRACE_SEED(rng) SCOPED_TRACE("random seed " + std::to_string((rng).seed()))

inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) { EXPECT_TRUE(std::isnan(got[i])) << "element " << i; continue; }
    if (std::isinf(want[i])) { EXPECT_EQ(got[i], want[i]) << "element " << i; continue; }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

}  // namespace synk::dsl::eval_test
