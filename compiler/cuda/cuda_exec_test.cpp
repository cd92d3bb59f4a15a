// Execution tests of the CUDA backend, run on two executors with the same test code:
// - "emulator" (compiler/cuda/emulator.h): the generated CUDA compiled by the host C++
//   compiler against a small model of CUDA's execution model, driven through CudaFunction's real
//   host path. It runs everywhere, so the kernels' logic is tested without a GPU; it cannot show
//   races, memory-model or performance problems.
// - "gpu": the real device; skipped with the reason where there is none.
// Each function of test/codegen-cuda/ and examples/ runs on fresh random inputs (several sizes,
// so vector paths, tails and split reductions all run) against the float64 reference evaluator;
// where the reference reports a data error, the backend must report a UserError too. Plus the
// error paths (the CPU backend's messages), out-of-memory, and a long split reduction.
// Replay a run with SYNK_TEST_SEED=<seed printed by the test>.
#include <dlfcn.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/testing.h"
#include "compiler/backend/host_arrays.h"
#include "compiler/backend/signature.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/cpu/cpu_test_util.h"
#include "compiler/cuda/emulator.h"
#include "compiler/backend_function.h"
#include "compiler/cuda/cuda_function.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/grad/grad.h"
#include "compiler/lower.h"
#include "ir/evaluator.h"
#include "dsl/frontend.h"
#include "gpu/driver.h"

namespace synk::compiler {
namespace {

namespace fs = std::filesystem;
namespace cu = rt::cuda;
using dsl::HostTensor;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using emulator::EmulatorExecutor;

// ---- the differential harness ---------------------------------------------------------------------

using ::synk::testing::Rng;
using testing::to_array;

// Random values; integers in [0, 3) so that they are mostly valid indices and labels.
HostTensor random_tensor(const ir::TensorType& type, const std::map<std::string, int64_t>& sizes, Rng& rng, double lo,
                         double hi) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : type.shape) shape.push_back(d.is_symbolic() ? sizes.at(d.symbol) : d.size);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> data(static_cast<size_t>(n));
  for (double& v : data) {
    if (type.dtype == ir::DType::F32) v = double(float(rng.uniform(lo, hi)));
    else if (type.dtype == ir::DType::F64) v = rng.uniform(lo, hi);
    else if (type.dtype == ir::DType::Bool) v = double(rng.integer(0, 1));
    else v = double(rng.integer(0, 2));
  }
  return HostTensor::make(type.dtype, shape, std::move(data));
}

void expect_close(const rt::Array& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  const bool flt = ir::is_float(want.dtype);
  const double rtol = want.dtype == ir::DType::F64 ? 1e-9 : 2e-4;
  int reported = 0;
  const std::vector<double> values = testing::values_of(got);
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = values[i], w = want.data[i];
    const bool ok = !flt ? g == w : std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::abs(g - w) <= rtol * (1 + std::abs(w));
    if (!ok && reported++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << ", reference " << w;
  }
}

// Random inputs and shared values, the reference, the backend, compared.
// `sizes` fixes some symbols; the others are drawn from [size_lo, size_hi].
void run_trial(const ir::Module& module, const ir::Function& fn, CudaFunction& f, Rng& rng, int64_t size_lo,
               int64_t size_hi, double lo, double hi, std::map<std::string, int64_t> sizes = {}) {
  auto bind = [&](const ir::Shape& shape) {
    for (const ir::Dim& d : shape)
      if (d.is_symbolic() && !sizes.count(d.symbol)) sizes[d.symbol] = rng.integer(size_lo, size_hi);
  };
  for (const ir::Param& p : fn.params) bind(p.type.shape);
  for (const ir::SharedVar& s : module.shareds) bind(s.type.shape);
  std::vector<HostTensor> inputs, shared_values;
  for (const ir::Param& p : fn.params) inputs.push_back(random_tensor(p.type, sizes, rng, lo, hi));
  for (const ir::SharedVar& s : module.shareds) shared_values.push_back(random_tensor(s.type, sizes, rng, lo, hi));
  std::vector<rt::Array> input_arrays, shared_arrays;
  std::vector<rt::ArrayRef> input_refs, shared_refs;
  for (const HostTensor& h : inputs) input_arrays.push_back(to_array(h));
  for (int32_t s : f.signature().shareds_read) shared_arrays.push_back(to_array(shared_values.at(size_t(s))));
  for (const rt::Array& a : input_arrays) input_refs.push_back(a.ref());
  for (const rt::Array& a : shared_arrays) shared_refs.push_back(a.ref());
  std::vector<rt::Array> outputs(fn.outputs.size()), updates(fn.updates.size());
  dsl::EvalResult want;
  try {
    // The reference evaluates expanded gradients (the gradient pass is tested on its own).
    const ir::Module reference = has_gradients(module) ? expand_gradients(module) : module;
    want = dsl::evaluate(reference, fn.name, inputs, shared_values);
  } catch (const synk::UserError& e) {
    EXPECT_NE(testing::user_error_of([&] { f.run(input_refs, shared_refs, outputs, updates); }), "")
        << "the reference failed (" << e.what() << ") but the backend did not";
    return;
  }
  ASSERT_NO_THROW(f.run(input_refs, shared_refs, outputs, updates));
  for (size_t o = 0; o < fn.outputs.size(); ++o) expect_close(outputs[o], want.outputs[o], "output " + fn.outputs[o].name);
  for (size_t u = 0; u < fn.updates.size(); ++u)
    expect_close(updates[u], want.updates[u], "update of " + module.shareds.at(size_t(fn.updates[u].shared)).name);
}

// ---- the tests, once per executor ---------------------------------------------------------------

class CudaExec : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "gpu") {
      std::string reason;
      if (!cu::cuda_available(&reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
      return;
    }
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "the emulator's fibers (swapcontext) are not supported under AddressSanitizer";
#endif
    std::string reason;
    if (!nvrtc_available(&reason)) GTEST_SKIP() << "NVRTC cannot be loaded (the emulator still compiles with it): " << reason;
    if (std::system("c++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no host C++ compiler (c++) for the emulator";
    emulator_ = std::make_unique<EmulatorExecutor>();
  }
  CudaCompileOptions options() const {
    CudaCompileOptions o;
    if (emulator_) {
      o.executor = emulator_.get();
      o.target = CudaTarget{90, true};   // NVRTC still compiles it: the CUBIN is checked, then unused
    }
    return o;
  }
  std::unique_ptr<CudaFunction> compile(const ir::Module& m, const std::string& name) {
    return compile_cuda_function(m, name, options());
  }
  std::unique_ptr<EmulatorExecutor> emulator_;
};

std::vector<fs::path> program_files() {
  std::vector<fs::path> files;
  const fs::path root = SYNK_SOURCE_DIR;
  for (const char* dir : {"test/codegen-cuda", "examples"})
    for (const auto& e : fs::directory_iterator(root / dir))
      if (e.path().extension() == ".synk") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

bool gradient_through_kinks(const ir::Function& fn) {
  bool grad = false, kink = false;
  for (const ir::Node& n : fn.nodes) {
    grad |= n.op == ir::Op::Grad;
    kink |= n.op == ir::Op::Relu || n.op == ir::Op::Abs || n.op == ir::Op::Maximum || n.op == ir::Op::Minimum ||
            n.op == ir::Op::ReduceMax || n.op == ir::Op::ReduceMin;
  }
  return grad && kink;
}

TEST_P(CudaExec, EveryProgramMatchesTheReference) {
  Rng rng("CudaExec.EveryProgramMatchesTheReference/" + GetParam());
  int functions = 0;
  for (const fs::path& file : program_files()) {
    ir::Module module = dsl::compile_source(file.string(), read_file(file));
    for (const ir::Function& fn : module.functions) {
      SCOPED_TRACE(file.filename().string() + ": " + fn.name);
      if (gradient_through_kinks(fn)) {
        // Random f32 inputs put some pre-activation within rounding of a relu/abs/max kink, where
        // the f32 kernels and the float64 reference legitimately take different sides and whole
        // gradient rows differ (seen: 6% on one entry for 1 seed in ~5). The gradient pass is
        // checked with kink-free inputs in compiler_grad_*; here such functions are skipped.
        std::cout << "[ NOTE     ] " << file.filename().string() << ": " << fn.name
                  << " skipped: gradient through a kink (see compiler_grad_cpu_test)\n";
        continue;
      }
      std::unique_ptr<CudaFunction> f;
      try {
        f = compile(module, fn.name);
      } catch (const synk::UserError& e) {
        std::cout << "[ NOTE     ] " << file.filename().string() << ": " << fn.name << " not compiled: " << e.what() << "\n";
        continue;
      }
      ++functions;
      run_trial(module, fn, *f, rng, 3, 40, -2, 2);
      run_trial(module, fn, *f, rng, 3, 40, 0.1, 2);
      run_trial(module, fn, *f, rng, 1, 3, -2, 2);
      run_trial(module, fn, *f, rng, GetParam() == "gpu" ? 300 : 60, GetParam() == "gpu" ? 1500 : 130, -2, 2);
    }
  }
  EXPECT_GE(functions, 19);
}

ir::Module module_of(const std::string& text) { return dsl::compile_source("inline.synk", text); }

TEST_P(CudaExec, LongReductionsAreSplitAndDeterministic) {
  Rng rng("CudaExec.LongReductionsAreSplitAndDeterministic/" + GetParam());
  ir::Module m = module_of(
      "fn f(scatter x: f32[n], scatter y: f32[n]) { out s: sum = sum(x * y); out m: max = max(x - y); }\n"
      "fn g(scatter x: f32[n, 2]) { out s: sum = sum(x, axis=0); }\n");
  std::unique_ptr<CudaFunction> f = compile(m, "f"), g = compile(m, "g");
  // Past threads * width * 16 elements per part, so the row is split (and not a multiple of 4).
  const int64_t n = (GetParam() == "gpu" ? (int64_t(1) << 22) : 300000) + rng.integer(1, 3);
  rt::Array x, y, x2;
  x.resize(rt::DType::F32, {n});
  y.resize(rt::DType::F32, {n});
  x2.resize(rt::DType::F32, {n, 2});
  double dot = 0, mx = -INFINITY, col[2] = {0, 0};
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = float(rng.uniform(0, 1));
    y.data<float>()[i] = float(rng.uniform(0, 1));
    dot += double(x.data<float>()[i]) * double(y.data<float>()[i]);
    mx = std::max(mx, double(x.data<float>()[i]) - double(y.data<float>()[i]));
    for (int j = 0; j < 2; ++j) col[j] += x2.data<float>()[2 * i + j] = float(rng.uniform(0, 1));
  }
  EXPECT_GT(cuda_launch_config(f->program().launches[0], 1, n, 2).splits, 1);
  std::vector<rt::ArrayRef> in = {x.ref(), y.ref()};
  std::vector<rt::Array> out(2), again(2), upd;
  f->run(in, {}, out, upd);
  EXPECT_NEAR(out[0].data<float>()[0], dot, 1e-5 * dot);
  EXPECT_NEAR(out[1].data<float>()[0], mx, 1e-6);
  f->run(in, {}, again, upd);   // same answer: the partials are combined in a fixed order
  EXPECT_EQ(out[0].data<float>()[0], again[0].data<float>()[0]);
  std::vector<rt::ArrayRef> in2 = {x2.ref()};
  std::vector<rt::Array> out2(1);
  g->run(in2, {}, out2, upd);
  for (int j = 0; j < 2; ++j) EXPECT_NEAR(out2[0].data<float>()[j], col[j], 1e-5 * col[j]);
}

// softmax, log_softmax and cross_entropy keep a row in the block's shared-memory cache when it fits
// (16 KiB: 4096 f32 or 2048 f64 elements) and read it again from global memory when it does not;
// rows on both sides of the limit, of symbolic and of static length, match the reference.
TEST_P(CudaExec, RowKernelsMatchTheReferenceWithAndWithoutTheRowCache) {
  Rng rng("CudaExec.RowKernelsMatchTheReferenceWithAndWithoutTheRowCache/" + GetParam());
  ir::Module m = module_of(
      "fn rows(scatter x: f32[n, k], scatter y: f64[n, k], scatter lab: i64[n]) {\n"
      "  out s: gather = softmax(x);\n  out l: gather = log_softmax(y);\n"
      "  out c: gather = cross_entropy(x, lab);\n  out p: gather = cross_entropy(y, softmax(y * 2.0));\n}\n"
      "fn fits(scatter x: f32[n, 4096]) { out s: gather = softmax(x); out c: gather = cross_entropy(x, softmax(x)); }\n"
      "fn long(scatter x: f32[n, 4097]) { out s: gather = softmax(x); out c: gather = cross_entropy(x, softmax(x)); }\n");
  for (const char* name : {"rows", "fits", "long"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<CudaFunction> f = compile(m, name);
    const bool static_long = std::string(name) == "long";
    EXPECT_EQ(f->program().source.find("const bool cached = false;") != std::string::npos, static_long)
        << "a static row is cached exactly when it fits";
    const ir::Function& fn = *m.find_function(name);
    for (int64_t k : {7, 2048, 2049, 4096, 4097, 6000}) {
      SCOPED_TRACE("k = " + std::to_string(k));
      run_trial(m, fn, *f, rng, 1, 3, -4, 4, {{"k", k}});
      if (std::string(name) != "rows") break;   // k is not a symbol of the static ones
    }
  }
}

TEST_P(CudaExec, DataErrorsMatchTheCpuBackend) {
  ir::Module m = module_of(
      "fn t(bcast table: f32[m, 2], scatter idx: i64[n]) { out r: gather = take(table, idx); }\n"
      "fn c(scatter x: f32[n, 3], scatter y: i32[n]) { out l: gather = cross_entropy(x, y); }\n"
      "fn h(scatter y: i32[n]) { out o: gather = one_hot(y, 4); }\n"
      "fn k(scatter x: f32[n]) { out o: gather = cast(x, i32); }\n"
      "fn e(scatter x: f32[n, k]) { out o: gather = max(x, axis=1); }\n"
      "fn d(scatter x: i32[n], scatter y: i32[n]) { out o: gather = x % y + floor_divide(x, y); }\n");
  auto array = [](rt::DType t, std::vector<int64_t> shape, std::vector<double> values) {
    rt::Array a;
    a.resize(t, std::move(shape));
    for (size_t i = 0; i < values.size(); ++i) {
      if (t == rt::DType::F32) a.data<float>()[i] = float(values[i]);
      if (t == rt::DType::I32) a.data<int32_t>()[i] = int32_t(values[i]);
      if (t == rt::DType::I64) a.data<int64_t>()[i] = int64_t(values[i]);
    }
    return a;
  };
  auto same_error = [&](const std::string& name, const std::vector<rt::Array>& inputs) {
    std::vector<rt::ArrayRef> refs;
    for (const rt::Array& a : inputs) refs.push_back(a.ref());
    std::vector<rt::Array> out(1), upd;
    const std::string cpu_msg = testing::user_error_of([&] { compile_cpu_function(m, name)->run(refs, {}, out, upd); });
    const std::string cuda_msg = testing::user_error_of([&] { compile(m, name)->run(refs, {}, out, upd); });
    EXPECT_FALSE(cuda_msg.empty()) << name << ": no error reported";
    EXPECT_EQ(cuda_msg, cpu_msg) << name;
  };
  same_error("t", {array(rt::DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}), array(rt::DType::I64, {5}, {0, 2, 7, 3, 9})});
  same_error("c", {array(rt::DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), array(rt::DType::I32, {2}, {1, -1})});
  same_error("h", {array(rt::DType::I32, {3}, {0, 4, 1})});
  same_error("k", {array(rt::DType::F32, {2}, {1, NAN})});
  same_error("e", {array(rt::DType::F32, {2, 0}, {})});
  // An integer division by zero names the '%' and its line (the first integer division).
  same_error("d", {array(rt::DType::I32, {3}, {5, -7, 9}), array(rt::DType::I32, {3}, {2, 0, 3})});
}

TEST_P(CudaExec, OutOfMemoryIsAUserErrorNamingTheSize) {
  // 400000 x 400000 floats (640 GB) for the product: more than any GPU (or the emulator) has.
  ir::Module m = module_of("fn f(scatter x: f32[n], bcast y: f32[k]) { out z: none = reshape(x, [n, 1]) * y; }");
  std::unique_ptr<CudaFunction> f = compile(m, "f");
  rt::Array x, y;
  x.resize(rt::DType::F32, {400000});
  y.resize(rt::DType::F32, {400000});
  std::vector<rt::ArrayRef> in = {x.ref(), y.ref()};
  std::vector<rt::Array> out(1), upd;
  try {
    f->run(in, {}, out, upd);
    ADD_FAILURE() << "no error";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("out of GPU memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("640000000000 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("function 'f'"), std::string::npos) << e.what();
  }
  // The function stays usable after the failure.
  x.resize(rt::DType::F32, {3});
  y.resize(rt::DType::F32, {2});
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = float(i);
  for (int i = 0; i < 2; ++i) y.data<float>()[i] = float(i + 1);
  in = {x.ref(), y.ref()};
  ASSERT_NO_THROW(f->run(in, {}, out, upd));
  ASSERT_EQ(out[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out[0].data<float>()[5], 4.0f);   // x[2] * y[1]
}

// Random ops draw the CPU backend's bits (base/philox.h on both), for every first row of a part.
TEST_P(CudaExec, RandomOpsDrawTheCpuBackendsBits) {
  ir::Module m = module_of(
      "fn f(scatter x: f32[n, 9], scatter y: f64[n, 5]) { out u: gather = uniform_like(x, low=-1, high=3); "
      "out z: gather = normal_like(y); out d: gather = dropout(x, 0.3, training=true); "
      "out b: gather = bernoulli_like(y, 0.6); out s: sum = normal([3, 4]); }");
  std::unique_ptr<CudaFunction> gpu = compile(m, "f");
  std::unique_ptr<CpuFunction> cpu = compile_cpu_function(m, "f");
  rt::Array x, y;
  x.resize(rt::DType::F32, {11, 9});
  y.resize(rt::DType::F64, {11, 5});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = float(i % 7) - 2.5f;
  for (int64_t i = 0; i < y.size(); ++i) y.data<double>()[i] = 0.5 * double(i);
  std::vector<rt::ArrayRef> in = {x.ref(), y.ref()};
  for (int64_t first_row : {0, 5, 1000003}) {
    std::vector<rt::Array> a(5), b(5), upd;
    gpu->set_random_state({0xabcdef, 12, first_row});
    cpu->set_random_state({0xabcdef, 12, first_row});
    gpu->run(in, {}, a, upd);
    cpu->run(in, {}, b, upd);
    for (size_t o = 0; o < 5; ++o) {
      ASSERT_EQ(a[o].bytes.size(), b[o].bytes.size()) << o;
      EXPECT_EQ(0, std::memcmp(a[o].bytes.data(), b[o].bytes.data(), a[o].bytes.size()))
          << "output " << o << ", first row " << first_row;
    }
  }
}

TEST_P(CudaExec, ResidentRunLeavesResultsOnTheDevice) {
  if (GetParam() != "emulator") GTEST_SKIP() << "checked on the emulator, whose device memory the test can read";
  ir::Module m = module_of("fn f(scatter x: f32[n]) { out z: gather = x * 2.0; }");
  std::unique_ptr<CudaFunction> f = compile(m, "f");
  std::vector<float> host = {1, 2, 3, 4, 5};
  const CudaExecutor::DevicePtr dev = emulator_->allocate(host.size() * 4, "x");
  emulator_->copy_to_device(dev, host.data(), host.size() * 4);
  std::vector<rt::ArrayRef> in = {rt::ArrayRef{reinterpret_cast<const void*>(uintptr_t(dev)), rt::DType::F32, {5}}};
  f->run_resident(in, {});
  rt::ArrayRef z = f->device_result(0);
  ASSERT_EQ(z.shape, (std::vector<int64_t>{5}));
  std::vector<float> back(5);
  emulator_->copy_to_host(back.data(), CudaExecutor::DevicePtr(reinterpret_cast<uintptr_t>(z.data)), 20);
  EXPECT_EQ(back, (std::vector<float>{2, 4, 6, 8, 10}));
  emulator_->release(dev);
}

// The ahead-of-time path (what an artifact's host stub hands the runtime): the images synkc
// builds (compile_cuda_images, the default architectures), one chosen for the device, no NVRTC
// at load. On the emulator the device is an sm_86 (so the sm_80 CUBIN is chosen) and the kernels
// run from the same source; on a GPU the chosen image is loaded for real. Both match the CPU.
TEST_P(CudaExec, PrebuiltImagesRunLikeTheCpuBackend) {
  ir::Module m = module_of(
      "fn f(scatter x: f32[n, 4], bcast w: f32[4]) { out z: gather = x * w + 1.0; out s: sum = sum(x * x); }");
  const ir::Function& fn = *m.find_function("f");
  CudaProgram program = generate_cuda_program(m, lower(m, fn));
  CudaCompileOptions o = options();
  if (emulator_) o.target = CudaTarget{86, true};
  o.prebuilt = std::make_shared<CudaImageSet>(compile_cuda_images(program.source, "synk_f", default_cuda_archs()));
  std::unique_ptr<CudaFunction> gpu = compile_cuda_function(m, "f", o);
  if (emulator_) EXPECT_EQ(gpu->target().str(), "sm_80 (cubin)");
  std::cout << "[ NOTE     ] the prebuilt image chosen: " << gpu->target().str() << "\n";
  std::unique_ptr<CpuFunction> cpu = compile_cpu_function(m, "f");
  rt::Array x, w;
  x.resize(rt::DType::F32, {37, 4});
  w.resize(rt::DType::F32, {4});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = float(i % 11) * 0.25f - 1.0f;
  for (int64_t i = 0; i < 4; ++i) w.data<float>()[i] = float(i) - 1.5f;
  std::vector<rt::ArrayRef> in = {x.ref(), w.ref()};
  std::vector<rt::Array> a(2), b(2), upd;
  gpu->run(in, {}, a, upd);
  cpu->run(in, {}, b, upd);
  ASSERT_EQ(a[0].bytes.size(), b[0].bytes.size());
  EXPECT_EQ(0, std::memcmp(a[0].bytes.data(), b[0].bytes.data(), a[0].bytes.size()));   // exact in f32
  EXPECT_NEAR(a[1].data<float>()[0], b[1].data<float>()[0], 1e-5 * b[1].data<float>()[0]);
  // Images of other code (another synk's artifact) are refused before anything loads.
  auto other = std::make_shared<CudaImageSet>(*o.prebuilt);
  other->source_hash ^= 1;
  o.prebuilt = other;
  try {
    compile_cuda_function(m, "f", o);
    ADD_FAILURE() << "images of other code were accepted";
  } catch (const synk::InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("the artifact's GPU images were compiled from other CUDA code"), std::string::npos)
        << e.what();
  }
}

TEST_P(CudaExec, BackendAutoPicksTheGpuWhenThereIsOne) {
  if (GetParam() != "gpu") GTEST_SKIP() << "about the real device";
  EXPECT_EQ(choose_backend("auto").backend, Backend::Cuda);
  EXPECT_EQ(choose_backend("cuda").backend, Backend::Cuda);
  EXPECT_EQ(choose_backend("cpu").backend, Backend::Cpu);
}

INSTANTIATE_TEST_SUITE_P(Executors, CudaExec, ::testing::Values("emulator", "gpu"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace synk::compiler
