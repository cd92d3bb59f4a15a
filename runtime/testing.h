// Helpers for the runtime's tests: CompiledFunctions written as plain C++ lambdas, spec
// builders, a fault-injecting test function, checks that this process left nothing in /dev/shm
// and no process behind, and the repetition count and random timing of the stress tests.
// Header-only, test use only.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/testing.h"
#include "runtime/data/data.h"
#include "runtime/call/descriptor.h"
#include "runtime/data/dtype.h"
#include "runtime/group/shm.h"

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

// How many times a stress test repeats: the positive integer in the environment variable
// `variable`, else `fallback`.
inline int iterations_from_env(const char* variable, int fallback) {
  const char* env = std::getenv(variable);
  int n = env ? std::atoi(env) : fallback;
  return n > 0 ? n : fallback;
}

// When a stress test strikes (a signal, a kill, a delay): seeded afresh every run, so that the
// repetitions of a test, and its runs, land at different moments.
inline std::mt19937& timing_rng() {
  static std::mt19937 gen(std::random_device{}());
  return gen;
}

inline rt::DimSpec fixed(int64_t n) { return rt::DimSpec{n, -1}; }
inline rt::DimSpec sym(int32_t s) { return rt::DimSpec{0, s}; }

inline rt::InputSpec input(std::string name, rt::Role role, rt::DType dtype, std::vector<rt::DimSpec> dims) {
  return rt::InputSpec{{std::move(name), dtype, std::move(dims)}, role};
}

inline rt::OutputSpec output(std::string name, rt::ReduceMode mode, rt::DType dtype, std::vector<rt::DimSpec> dims) {
  return rt::OutputSpec{{std::move(name), dtype, std::move(dims)}, mode};
}

inline rt::SharedSpec shared(std::string name, rt::DType dtype, std::vector<rt::DimSpec> dims,
                             rt::InitSpec init = {}, bool sliceable = false) {
  return rt::SharedSpec{{std::move(name), dtype, std::move(dims)}, std::move(init), sliceable};
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

// f(x: f32[n, 1]) -> count: i64 sum = rows * scale, and the shared counter s: f64[] (module
// counter_module) becomes s + rows. Faults on request, by the value of a row: 666 throws, 777 kills
// the rank with SIGKILL, 888 sleeps for 3 s, 555 calls exit(3).
inline std::shared_ptr<rt::CompiledFunction> counting_function(int64_t scale, std::string name = "count_rows") {
  rt::FunctionSignature sig;
  sig.name = std::move(name);
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, rt::DType::F32, {sym(0), fixed(1)})};
  sig.outputs = {output("count", rt::ReduceMode::Sum, rt::DType::I64, {})};
  sig.shareds_read = {0};
  sig.updates = {rt::UpdateSpec{0, rt::ReduceMode::Sum}};
  return std::make_shared<LambdaFunction>(sig, [scale](auto in, auto sh, auto out, auto upd) {
    const float* x = ptr<float>(in[0]);
    for (int64_t i = 0; i < in[0].shape[0]; ++i) {
      if (x[i] == 666) throw std::runtime_error("row 666 is poison");
      if (x[i] == 777) raise(SIGKILL);
      if (x[i] == 888) usleep(3'000'000);
      if (x[i] == 555) std::exit(3);
    }
    out[0].resize(rt::DType::I64, {});
    *out[0].template data<int64_t>() = in[0].shape[0] * scale;
    upd[0].resize(rt::DType::F64, {});
    *upd[0].template data<double>() = *ptr<double>(sh[0]) + double(in[0].shape[0]);
  });
}

// The seeds' shared-variable example, s = sum(x * s, axis=0) over this rank's rows of x: f32[n, 2],
// as a hand-written function (the module's shared variable 0 is s: f32[2]).
inline std::shared_ptr<rt::CompiledFunction> shared_example_function() {
  rt::FunctionSignature sig;
  sig.name = "f";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, rt::DType::F32, {sym(0), fixed(2)})};
  sig.shareds_read = {0};
  sig.updates = {rt::UpdateSpec{0, rt::ReduceMode::Avg}};
  return std::make_shared<LambdaFunction>(sig, [](auto in, auto sh, auto, auto upd) {
    const float* x = ptr<float>(in[0]);
    const float* s = ptr<float>(sh[0]);
    upd[0].resize(rt::DType::F32, {2});
    float* u = upd[0].template data<float>();
    u[0] = u[1] = 0;
    for (int64_t i = 0; i < in[0].shape[0]; ++i)
      for (int k = 0; k < 2; ++k) u[k] += x[i * 2 + k] * s[k];
  });
}

inline rt::ModuleSpec counter_module() {
  rt::ModuleSpec spec;
  spec.shareds = {shared("s", rt::DType::F64, {})};
  return spec;
}

inline Data rows_data(const std::vector<float>& values) {
  return synk::data<float>(values, {int64_t(values.size()), 1}, {.name = "x"});
}

inline double scalar(const rt::Array& a) {
  return a.dtype == rt::DType::F64 ? *a.data<double>() : double(*a.data<int64_t>());
}

// True once `pid` no longer exists or is a zombie.
inline bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.substr(close_paren + 2, 1) == "Z";
}

}  // namespace synk::testing
