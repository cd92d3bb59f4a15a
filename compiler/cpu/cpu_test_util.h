// Test helpers for the CPU code generator: random arguments for a function's declared types,
// conversion between the reference evaluator's HostTensor (float64 values) and the runtime's
// typed arrays, and the differential check "compiled kernels == reference evaluator" with a
// tolerance per dtype. Every random choice comes from one seed that failures print; set
// SYNK_TEST_SEED to replay one.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/backend/host_arrays.h"
#include "compiler/backend/signature.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/grad/grad.h"
#include "ir/evaluator.h"
#include "dsl/frontend.h"
#include "base/errors.h"

namespace synk::compiler::testing {

using Sizes = std::map<std::string, int64_t>;

// The dtypes the differential tests sweep.
inline constexpr const char* kFloatTypes[] = {"f32", "f64"};
inline constexpr const char* kIntTypes[] = {"i32", "i64", "u8"};

inline uint64_t test_seed() {
  static uint64_t seed = [] {
    if (const char* s = std::getenv("SYNK_TEST_SEED")) return uint64_t(std::strtoull(s, nullptr, 10));
    return uint64_t(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return seed;
}

inline ir::Module parse(const std::string& text) { return dsl::compile_source("test.synk", text); }

// The module `text` compiles to; nullopt, after a test failure with the diagnostic, when it does not.
inline std::optional<ir::Module> parse_or_fail(const std::string& text) {
  try {
    return parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "test program does not compile: " << e.what();
    return std::nullopt;
  }
}

#ifdef SYNK_BINARY_DIR
// Every CPU-backend test keeps its kernel cache in the build tree (set before the first compile).
inline const bool kKernelCacheInBuildTree = [] {
  setenv("SYNK_CACHE_DIR", SYNK_BINARY_DIR "/kernel-cache-tests", 0);
  return true;
}();
#endif

// How random values are drawn.
struct ValueStyle {
  double scale = 2.0;           // floats ~ normal(0, scale)
  int64_t int_low = -20, int_high = 20;   // integers uniform in [low, high]
  double special_fraction = 0;  // fraction of float elements replaced by NaN / +-inf / 0 / huge
  bool huge_specials = true;    // include huge finite values among the specials
};

inline std::vector<int64_t> concrete_shape(const ir::Shape& shape, const std::map<std::string, int64_t>& sizes) {
  std::vector<int64_t> out;
  for (const ir::Dim& d : shape) {
    if (!d.is_symbolic()) { out.push_back(d.size); continue; }
    auto it = sizes.find(d.symbol);
    if (it == sizes.end()) throw std::runtime_error("test: no size given for symbol " + d.symbol);
    out.push_back(it->second);
  }
  return out;
}

inline double round_to(ir::DType t, double v) { return t == ir::DType::F32 ? double(float(v)) : v; }

inline dsl::HostTensor random_tensor(const ir::TensorType& type, const std::map<std::string, int64_t>& sizes,
                                     std::mt19937_64& rng, const ValueStyle& style = {}) {
  std::vector<int64_t> shape = concrete_shape(type.shape, sizes);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> data(static_cast<size_t>(n));
  std::normal_distribution<double> normal(0.0, style.scale);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int64_t> ints(style.int_low, style.int_high);
  for (double& v : data) {
    switch (type.dtype) {
      case ir::DType::F32: case ir::DType::F64: {
        v = normal(rng);
        if (style.special_fraction > 0 && unit(rng) < style.special_fraction) {
          const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e30, -1e30, 3e38};
          v = specials[std::uniform_int_distribution<int>(0, style.huge_specials ? 7 : 4)(rng)];
        }
        v = round_to(type.dtype, v);
        break;
      }
      case ir::DType::Bool: v = double(rng() & 1); break;
      case ir::DType::U8: v = double(uint8_t(ints(rng))); break;
      default: v = double(ints(rng)); break;
    }
  }
  return dsl::HostTensor::make(type.dtype, shape, std::move(data));
}

inline rt::Array to_array(const dsl::HostTensor& t) {
  rt::Array a;
  a.resize(runtime_dtype(t.dtype), t.shape);
  for (size_t i = 0; i < t.data.size(); ++i) {
    double v = t.data[i];
    switch (t.dtype) {
      case ir::DType::F32: a.data<float>()[i] = float(v); break;
      case ir::DType::F64: a.data<double>()[i] = v; break;
      case ir::DType::I32: a.data<int32_t>()[i] = int32_t(v); break;
      case ir::DType::I64: a.data<int64_t>()[i] = int64_t(v); break;
      case ir::DType::U8: case ir::DType::Bool: a.data<uint8_t>()[i] = uint8_t(v); break;
      default: break;
    }
  }
  return a;
}

inline std::vector<double> values_of(const rt::Array& a) {
  std::vector<double> out(static_cast<size_t>(a.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (a.dtype) {
      case rt::DType::F32: out[i] = a.data<float>()[i]; break;
      case rt::DType::F64: out[i] = a.data<double>()[i]; break;
      case rt::DType::I32: out[i] = a.data<int32_t>()[i]; break;
      case rt::DType::I64: out[i] = double(a.data<int64_t>()[i]); break;
      case rt::DType::U8: case rt::DType::Bool: out[i] = a.data<uint8_t>()[i]; break;
      case rt::DType::F16: case rt::DType::BF16: synk::internal_error("values_of: a reserved dtype");
    }
  }
  return out;
}

struct Tolerance {
  double f32_rel = 2e-5, f32_abs = 1e-5;
  double f64_rel = 1e-12, f64_abs = 1e-12;
};

// Empty when equal within tolerance; else a description of the first difference.
inline std::string compare(const std::string& what, const dsl::HostTensor& want, const rt::Array& got,
                           const Tolerance& tol = {}) {
  if (runtime_dtype(want.dtype) != got.dtype)
    return fmt::format("{}: dtype {} vs expected {}", what, rt::dtype_name(got.dtype), ir::dtype_name(want.dtype));
  if (want.shape != got.shape)
    return fmt::format("{}: shape [{}] vs expected [{}]", what, fmt::join(got.shape, ","), fmt::join(want.shape, ","));
  std::vector<double> g = values_of(got);
  for (size_t i = 0; i < g.size(); ++i) {
    double w = want.data[i], v = g[i];
    bool ok;
    if (want.dtype == ir::DType::F32) w = double(float(w));   // the reference computes in double
    if (!ir::is_float(want.dtype)) ok = w == v;
    else if (std::isnan(w) || std::isnan(v)) ok = std::isnan(w) && std::isnan(v);
    else if (std::isinf(w) || std::isinf(v)) ok = w == v;
    else {
      bool f32 = want.dtype == ir::DType::F32;
      double rel = f32 ? tol.f32_rel : tol.f64_rel, abs = f32 ? tol.f32_abs : tol.f64_abs;
      ok = std::fabs(w - v) <= abs + rel * std::fabs(w);
    }
    if (!ok) return fmt::format("{}: element {} is {} but the reference says {}", what, i, v, w);
  }
  return {};
}

// What CpuFunction::run takes, built from host tensors: the function's inputs, then the shared
// variables it reads (in signature().shareds_read order, picked from every shared's value).
struct CallArguments {
  std::vector<rt::Array> arrays;
  std::vector<rt::ArrayRef> inputs, shareds;
};
inline CallArguments call_arguments(const CpuFunction& compiled, const std::vector<dsl::HostTensor>& inputs,
                                    const std::vector<dsl::HostTensor>& shareds) {
  CallArguments a;
  for (const dsl::HostTensor& t : inputs) a.arrays.push_back(to_array(t));
  for (int32_t s : compiled.signature().shareds_read) a.arrays.push_back(to_array(shareds.at(size_t(s))));
  for (size_t i = 0; i < a.arrays.size(); ++i) (i < inputs.size() ? a.inputs : a.shareds).push_back(a.arrays[i].ref());
  return a;
}

// The message of the user error `run` throws, or "" when it throws none. A compiled function
// reports bad data as synk::UserError, or as synk::ScatteredRowError (a UsageError, which the call
// engine renumbers) for a bad value in a scattered row.
template <class Run>
std::string user_error_of(Run&& run) {
  try {
    run();
  } catch (const synk::UserError& e) {
    return e.what();
  } catch (const UsageError& e) {
    return e.what();
  }
  return {};
}

struct CaseResult {
  std::string failure;   // empty: passed
  std::string user_error_compiled, user_error_reference;
};

// Runs `fn` of `module` compiled and in the reference evaluator on the same random arguments.
inline CaseResult run_differential(const ir::Module& module, const std::string& fn_name,
                                   const std::map<std::string, int64_t>& sizes, uint64_t seed,
                                   const ValueStyle& style = {}, const Tolerance& tol = {},
                                   std::vector<dsl::HostTensor>* inputs_override = nullptr,
                                   const CpuCompileOptions& compile_options = {}) {
  CaseResult result;
  const ir::Function* fn = module.find_function(fn_name);
  if (!fn) { result.failure = "no function " + fn_name; return result; }
  std::mt19937_64 rng(seed);
  std::vector<dsl::HostTensor> inputs, shareds;
  if (inputs_override) inputs = *inputs_override;
  else for (const ir::Param& p : fn->params) inputs.push_back(random_tensor(p.type, sizes, rng, style));
  for (const ir::SharedVar& s : module.shareds) shareds.push_back(random_tensor(s.type, sizes, rng, style));

  dsl::EvalResult want;
  try {
    // The reference evaluates expanded gradients: the gradient pass is tested on its own.
    ir::Module reference = has_gradients(module) ? expand_gradients(module) : module;
    want = dsl::evaluate(reference, fn_name, inputs, shareds);
  } catch (const synk::UserError& e) {
    result.user_error_reference = e.what();
  }
  std::unique_ptr<CpuFunction> compiled = compile_cpu_function(module, fn_name, compile_options);
  CallArguments args = call_arguments(*compiled, inputs, shareds);
  std::vector<rt::Array> outputs(fn->outputs.size()), updates(fn->updates.size());
  result.user_error_compiled = user_error_of([&] { compiled->run(args.inputs, args.shareds, outputs, updates); });
  if (!result.user_error_reference.empty() || !result.user_error_compiled.empty()) {
    if (result.user_error_reference.empty() != result.user_error_compiled.empty())
      result.failure = fmt::format("only one side failed: compiled '{}', reference '{}'", result.user_error_compiled,
                                   result.user_error_reference);
    return result;
  }
  for (size_t o = 0; o < outputs.size() && result.failure.empty(); ++o)
    result.failure = compare("output " + fn->outputs[o].name, want.outputs.at(o), outputs[o], tol);
  for (size_t u = 0; u < updates.size() && result.failure.empty(); ++u)
    result.failure = compare("update of " + module.shareds.at(size_t(fn->updates[u].shared)).name, want.updates.at(u),
                             updates[u], tol);
  if (!result.failure.empty()) {
    size_t total = 0;
    for (const dsl::HostTensor& t : inputs) total += t.data.size();
    if (total <= 256)
      for (size_t i = 0; i < inputs.size(); ++i)
        result.failure += fmt::format("\n  input {} = {}", fn->params[i].name, fmt::join(inputs[i].data, ", "));
  }
  return result;
}

// Runs function `fn` of `source` once per set of sizes (seed test_seed() + i) against the
// reference evaluator and expects them to agree (and, with `expect_user_error`, both to fail with
// a user error); returns the last case. A program that does not compile is a test failure.
inline CaseResult check_differential(const std::string& source, const std::string& fn,
                                     const std::vector<std::map<std::string, int64_t>>& size_sets,
                                     const ValueStyle& style = {}, const Tolerance& tol = {},
                                     bool expect_user_error = false) {
  SCOPED_TRACE(source);
  std::optional<ir::Module> parsed = parse_or_fail(source);
  if (!parsed) return {};
  CaseResult last;
  for (size_t i = 0; i < size_sets.size(); ++i) {
    const uint64_t seed = test_seed() + i;
    last = run_differential(*parsed, fn, size_sets[i], seed, style, tol);
    EXPECT_TRUE(last.failure.empty()) << "seed " << seed << " (replay: SYNK_TEST_SEED=" << test_seed()
                                      << "), sizes " << fmt::format("{}", size_sets[i]) << ": " << last.failure;
    if (expect_user_error) {
      EXPECT_FALSE(last.user_error_compiled.empty()) << "expected both sides to fail, sizes "
                                                     << fmt::format("{}", size_sets[i]);
    }
  }
  return last;
}

// Function f of `source_format` (whose {0} stands for the dtype) in f32 and in f64: on every set of
// `sizes` with ordinary values, then on `rows` rows (the symbol n) of each of `extreme_styles`
// (large magnitudes, NaN and infinities, ...).
inline void check_float_differential(const std::string& source_format,
                                     const std::vector<std::map<std::string, int64_t>>& sizes, int64_t rows,
                                     std::initializer_list<ValueStyle> extreme_styles) {
  for (const char* dtype : {"f32", "f64"}) {
    const std::string source = fmt::format(fmt::runtime(source_format), dtype);
    check_differential(source, "f", sizes);
    for (const ValueStyle& style : extreme_styles) check_differential(source, "f", {{{"n", rows}}}, style);
  }
}

}  // namespace synk::compiler::testing
