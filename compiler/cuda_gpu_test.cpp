// GPU execution tests (they need a CUDA GPU; elsewhere every test skips with the reason): each
// function of test/codegen-cuda/ and examples/ runs on the device through CudaFunction on fresh
// random inputs (several sizes, so vector paths, tails and split reductions all run) and is
// compared with the float64 reference evaluator (dsl/evaluator.h); where the reference reports a
// data error (an index out of range, a bad cast), the GPU must report a UserError too. Plus the
// error paths: bad indices and labels with the CPU backend's messages, an empty max, device
// out-of-memory naming the size, and a 4M-element fused dot product split over many blocks.
// Replay a run with SYNK_TEST_SEED=<seed printed by the test>.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/cpu_function.h"
#include "compiler/cuda_function.h"
#include "dsl/evaluator.h"
#include "dsl/frontend.h"
#include "runtime/cuda_driver.h"

namespace synk::compiler {
namespace {

namespace fs = std::filesystem;
using dsl::HostTensor;

#define SKIP_WITHOUT_GPU()                                      \
  do {                                                          \
    std::string reason_;                                        \
    if (!rt::cuda::cuda_available(&reason_)) GTEST_SKIP() << "no CUDA GPU: " << reason_; \
  } while (0)

class Rng {
 public:
  explicit Rng(const std::string& test) {
    const char* env = std::getenv("SYNK_TEST_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::cout << "[ seed     ] " << test << ": SYNK_TEST_SEED=" << seed_ << "\n";
    engine_.seed(seed_);
  }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Values are rounded to the dtype the way the evaluator reads them (f32 rounds to float).
double to_dtype(ir::DType t, double v) {
  switch (t) {
    case ir::DType::F32: return double(float(v));
    case ir::DType::Bool: return v != 0 ? 1 : 0;
    default: return v;
  }
}

rt::Array to_array(const HostTensor& h) {
  rt::Array a;
  a.resize(to_rt(h.dtype), h.shape);
  for (size_t i = 0; i < h.data.size(); ++i) {
    const double v = h.data[i];
    switch (h.dtype) {
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

double element(const rt::Array& a, size_t i) {
  switch (a.dtype) {
    case rt::DType::F32: return a.data<float>()[i];
    case rt::DType::F64: return a.data<double>()[i];
    case rt::DType::I32: return a.data<int32_t>()[i];
    case rt::DType::I64: return double(a.data<int64_t>()[i]);
    case rt::DType::U8: case rt::DType::Bool: return a.data<uint8_t>()[i];
  }
  return 0;
}

// Random values of `type` with symbols from `sizes`; integers in [0, 3) so that they are mostly
// valid indices and labels (every symbolic size is at least 3).
HostTensor random_tensor(const ir::TensorType& type, const std::map<std::string, int64_t>& sizes, Rng& rng, double lo,
                         double hi) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : type.shape) shape.push_back(d.is_symbolic() ? sizes.at(d.symbol) : d.size);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> data(static_cast<size_t>(n));
  for (double& v : data) {
    if (ir::is_float(type.dtype)) v = to_dtype(type.dtype, rng.uniform(lo, hi));
    else if (type.dtype == ir::DType::Bool) v = double(rng.integer(0, 1));
    else v = double(rng.integer(0, 2));
  }
  return HostTensor::make(type.dtype, shape, std::move(data));
}

void collect_symbols(const ir::Shape& shape, std::vector<std::string>* symbols) {
  for (const ir::Dim& d : shape)
    if (d.is_symbolic() && std::find(symbols->begin(), symbols->end(), d.symbol) == symbols->end())
      symbols->push_back(d.symbol);
}

void expect_close(const rt::Array& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  const bool flt = ir::is_float(want.dtype);
  const double rtol = want.dtype == ir::DType::F64 ? 1e-9 : 2e-4;
  int reported = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = element(got, i), w = want.data[i];
    bool ok;
    if (!flt) ok = g == w;
    else if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::abs(g - w) <= rtol * (1 + std::abs(w));
    if (!ok && reported++ < 5) ADD_FAILURE() << what << "[" << i << "]: GPU " << g << ", reference " << w;
  }
}

// One trial: random inputs and shared values, the reference, the GPU, compared.
void run_trial(const ir::Module& module, const ir::Function& fn, CudaFunction& gpu, Rng& rng, int64_t size_lo,
               int64_t size_hi, double lo, double hi) {
  std::vector<std::string> symbols;
  for (const ir::Param& p : fn.params) collect_symbols(p.type.shape, &symbols);
  for (const ir::SharedVar& s : module.shareds) collect_symbols(s.type.shape, &symbols);
  std::map<std::string, int64_t> sizes;
  for (const std::string& s : symbols) sizes[s] = rng.integer(size_lo, size_hi);
  std::vector<HostTensor> inputs, shared_values;
  for (const ir::Param& p : fn.params) inputs.push_back(random_tensor(p.type, sizes, rng, lo, hi));
  for (const ir::SharedVar& s : module.shareds) shared_values.push_back(random_tensor(s.type, sizes, rng, lo, hi));
  std::vector<rt::Array> input_arrays, shared_arrays;
  std::vector<rt::ArrayRef> input_refs, shared_refs;
  for (const HostTensor& h : inputs) input_arrays.push_back(to_array(h));
  for (int32_t s : gpu.signature().shareds_read) shared_arrays.push_back(to_array(shared_values.at(size_t(s))));
  for (const rt::Array& a : input_arrays) input_refs.push_back(a.ref());
  for (const rt::Array& a : shared_arrays) shared_refs.push_back(a.ref());
  std::vector<rt::Array> outputs(fn.outputs.size()), updates(fn.updates.size());

  dsl::EvalResult want;
  try {
    want = dsl::evaluate(module, fn, inputs, shared_values);
  } catch (const dsl::UserError& e) {
    EXPECT_THROW(gpu.run(input_refs, shared_refs, outputs, updates), dsl::UserError)
        << "the reference failed (" << e.what() << ") but the GPU did not";
    return;
  }
  ASSERT_NO_THROW(gpu.run(input_refs, shared_refs, outputs, updates));
  for (size_t o = 0; o < fn.outputs.size(); ++o) expect_close(outputs[o], want.outputs[o], "output " + fn.outputs[o].name);
  for (size_t u = 0; u < fn.updates.size(); ++u)
    expect_close(updates[u], want.updates[u], "update of " + module.shareds.at(size_t(fn.updates[u].shared)).name);
}

std::vector<fs::path> program_files() {
  std::vector<fs::path> files;
  const fs::path root = SYNK_SOURCE_DIR;
  for (const char* dir : {"test/codegen-cuda", "examples"})
    for (const auto& e : fs::directory_iterator(root / dir))
      if (e.path().extension() == ".synk") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CudaGpu, EveryProgramMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  Rng rng("CudaGpu.EveryProgramMatchesTheReference");
  int functions = 0;
  for (const fs::path& file : program_files()) {
    ir::Module module = dsl::compile_source(file.string(), read_file(file));
    for (const ir::Function& fn : module.functions) {
      SCOPED_TRACE(file.filename().string() + ": " + fn.name);
      std::unique_ptr<CudaFunction> gpu;
      try {
        gpu = compile_cuda_function(module, fn.name);
      } catch (const dsl::UserError& e) {
        std::cout << "[ NOTE     ] " << file.filename().string() << ": " << fn.name << " not compiled: " << e.what() << "\n";
        continue;
      }
      ++functions;
      run_trial(module, fn, *gpu, rng, 3, 40, -2, 2);
      run_trial(module, fn, *gpu, rng, 3, 40, 0.1, 2);
      run_trial(module, fn, *gpu, rng, 300, 1500, -2, 2);
      run_trial(module, fn, *gpu, rng, 1, 3, -2, 2);
    }
  }
  EXPECT_GE(functions, 19);
}

ir::Module module_of(const std::string& text) { return dsl::compile_source("inline.synk", text); }

TEST(CudaGpu, LargeFusedDotProductIsSplitAndAccurate) {
  SKIP_WITHOUT_GPU();
  Rng rng("CudaGpu.LargeFusedDotProductIsSplitAndAccurate");
  ir::Module m = module_of("fn f(scatter x: f32[n], scatter y: f32[n]) { out s: sum = sum(x * y); out m: max = max(x - y); }");
  std::unique_ptr<CudaFunction> gpu = compile_cuda_function(m, "f");
  const int64_t n = (int64_t(1) << 22) + rng.integer(0, 1000);   // not a multiple of the vector width
  rt::Array x, y;
  x.resize(rt::DType::F32, {n});
  y.resize(rt::DType::F32, {n});
  double dot = 0, mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = float(rng.uniform(0, 1));
    y.data<float>()[i] = float(rng.uniform(0, 1));
    dot += double(x.data<float>()[i]) * double(y.data<float>()[i]);
    mx = std::max(mx, double(x.data<float>()[i]) - double(y.data<float>()[i]));
  }
  std::vector<rt::ArrayRef> in = {x.ref(), y.ref()};
  std::vector<rt::Array> out(2), upd;
  gpu->run(in, {}, out, upd);
  EXPECT_NEAR(out[0].data<float>()[0], dot, 1e-5 * dot);
  EXPECT_NEAR(out[1].data<float>()[0], mx, 1e-6);
  // Same answer every time: the split reduction combines its partials in a fixed order.
  std::vector<rt::Array> again(2);
  gpu->run(in, {}, again, upd);
  EXPECT_EQ(out[0].data<float>()[0], again[0].data<float>()[0]);
}

TEST(CudaGpu, DataErrorsMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  ir::Module m = module_of(
      "fn t(bcast table: f32[m, 2], scatter idx: i64[n]) { out r: gather = take(table, idx); }\n"
      "fn c(scatter x: f32[n, 3], scatter y: i32[n]) { out l: gather = cross_entropy(x, y); }\n"
      "fn h(scatter y: i32[n]) { out o: gather = one_hot(y, 4); }\n"
      "fn k(scatter x: f32[n]) { out o: gather = cast(x, i32); }\n"
      "fn e(scatter x: f32[n, k]) { out o: gather = max(x, axis=1); }\n");
  auto messages = [&](const std::string& name, std::vector<rt::Array> inputs) {
    std::vector<rt::ArrayRef> refs;
    for (const rt::Array& a : inputs) refs.push_back(a.ref());
    std::string cpu_msg, gpu_msg;
    std::vector<rt::Array> out(1), upd;
    try { compile_cpu_function(m, name)->run(refs, {}, out, upd); } catch (const dsl::UserError& e) { cpu_msg = e.what(); }
    try { compile_cuda_function(m, name)->run(refs, {}, out, upd); } catch (const dsl::UserError& e) { gpu_msg = e.what(); }
    EXPECT_FALSE(gpu_msg.empty()) << name << ": the GPU reported no error";
    EXPECT_EQ(gpu_msg, cpu_msg) << name;
  };
  auto array = [](rt::DType t, std::vector<int64_t> shape, std::vector<double> values) {
    rt::Array a;
    a.resize(t, shape);
    for (size_t i = 0; i < values.size(); ++i) {
      if (t == rt::DType::F32) a.data<float>()[i] = float(values[i]);
      if (t == rt::DType::I32) a.data<int32_t>()[i] = int32_t(values[i]);
      if (t == rt::DType::I64) a.data<int64_t>()[i] = int64_t(values[i]);
    }
    return a;
  };
  messages("t", {array(rt::DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}), array(rt::DType::I64, {4}, {0, 2, 7, 3})});
  messages("c", {array(rt::DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), array(rt::DType::I32, {2}, {1, -1})});
  messages("h", {array(rt::DType::I32, {3}, {0, 4, 1})});
  messages("k", {array(rt::DType::F32, {2}, {1, NAN})});
  messages("e", {array(rt::DType::F32, {2, 0}, {})});
}

TEST(CudaGpu, OutOfMemoryIsAUserErrorNamingTheSize) {
  SKIP_WITHOUT_GPU();
  // 400000 x 400000 floats (640 GB) for the product: more than any GPU has.
  ir::Module m = module_of("fn f(scatter x: f32[n], bcast y: f32[k]) { out z: none = reshape(x, [n, 1]) * y; }");
  std::unique_ptr<CudaFunction> gpu = compile_cuda_function(m, "f");
  rt::Array x, y;
  x.resize(rt::DType::F32, {400000});
  y.resize(rt::DType::F32, {400000});
  std::vector<rt::ArrayRef> in = {x.ref(), y.ref()};
  std::vector<rt::Array> out(1), upd;
  try {
    gpu->run(in, {}, out, upd);
    FAIL() << "no error";
  } catch (const dsl::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("out of GPU memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("640000000000 bytes"), std::string::npos) << e.what();
  }
  // The function stays usable after the failure.
  x.resize(rt::DType::F32, {3});
  y.resize(rt::DType::F32, {2});
  in = {x.ref(), y.ref()};
  EXPECT_NO_THROW(gpu->run(in, {}, out, upd));
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{3, 2}));
}

TEST(CudaGpu, BackendAutoPicksTheGpu) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(choose_backend("auto").backend, Backend::Cuda);
  EXPECT_EQ(choose_backend("cuda").backend, Backend::Cuda);
  EXPECT_EQ(choose_backend("cpu").backend, Backend::Cpu);
}

}  // namespace
}  // namespace synk::compiler
