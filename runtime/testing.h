// Helpers for the runtime's tests: CompiledFunctions written as plain C++ lambdas, spec
// builders, and a check that this process left nothing in /dev/shm. Header-only, test use only.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/descriptor.h"
#include "runtime/dtype.h"
#include "runtime/shm.h"

namespace synk::testing {

using Body = std::function<void(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
                                std::span<rt::Array> outputs, std::span<rt::Array> updates)>;

class LambdaFunction : public rt::CompiledFunction {
 public:
  LambdaFunction(rt::FunctionSignature sig, Body body) : sig_(std::move(sig)), body_(std::move(body)) {}
  const rt::FunctionSignature& signature() const override { return sig_; }
  void run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
           std::span<rt::Array> outputs, std::span<rt::Array> updates) override {
    body_(inputs, shareds, outputs, updates);
  }

 private:
  rt::FunctionSignature sig_;
  Body body_;
};

inline rt::DimSpec fixed(int64_t n) { return rt::DimSpec{n, -1}; }
inline rt::DimSpec sym(int32_t s) { return rt::DimSpec{0, s}; }

inline rt::InputSpec input(std::string name, rt::Role role, rt::DType dtype, std::vector<rt::DimSpec> dims) {
  rt::InputSpec in;
  in.name = std::move(name);
  in.role = role;
  in.dtype = dtype;
  in.dims = std::move(dims);
  return in;
}

inline rt::OutputSpec output(std::string name, rt::ReduceMode mode, rt::DType dtype, std::vector<rt::DimSpec> dims) {
  rt::OutputSpec out;
  out.name = std::move(name);
  out.mode = mode;
  out.dtype = dtype;
  out.dims = std::move(dims);
  return out;
}

inline rt::SharedSpec shared(std::string name, rt::DType dtype, std::vector<rt::DimSpec> dims,
                             rt::InitSpec init = {}, bool sliceable = false) {
  rt::SharedSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.dims = std::move(dims);
  s.init = std::move(init);
  s.sliceable = sliceable;
  return s;
}

template <class T>
const T* ptr(const rt::ArrayRef& a) { return static_cast<const T*>(a.data); }

inline int64_t rows(const rt::ArrayRef& a) { return a.shape.empty() ? 1 : a.shape[0]; }

// Names in /dev/shm that this test process (or its workers) still holds.
inline std::vector<std::string> leftover_segments() { return rt::shm::list(rt::shm::session_prefix()); }

template <class T>
rt::Array make_array(std::vector<int64_t> shape, const std::vector<T>& values) {
  rt::Array a;
  a.resize(rt::dtype_v<T>, std::move(shape));
  std::copy(values.begin(), values.end(), a.data<T>());
  return a;
}

inline std::mt19937_64& rng() {
  static std::mt19937_64 gen([] {
    uint64_t seed = std::random_device{}();
    std::printf("[random seed %llu]\n", static_cast<unsigned long long>(seed));
    return seed;
  }());
  return gen;
}

template <class T>
std::vector<T> random_values(size_t n, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = T(dist(rng()));
  return v;
}

}  // namespace synk::testing
