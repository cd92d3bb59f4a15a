// The runtime's GPU backend end to end: synk::fork(n, Backend::Gpu / Backend::Auto), the backend
// choice and its messages, and jit functions running as CudaFunction in every rank.
// - Without a GPU: Backend::Gpu is a UsageError naming the probe's reason; Backend::Auto picks the
//   CPU and says why under SYNK_VERBOSE.
// - With the CUDA emulator (compiler/cuda/emulator.h) in place of the GPU (the probe
//   answer and the default executor replaced, which workers inherit): a 3-rank group on the GPU
//   path computes what a 3-rank CPU group computes, for a function created before the fork and one
//   created after it (rebuilt in workers by the "jit" loader), and every rank ran kernels on the
//   device rank % device_count; and a training step (gradient, all_reduce, momentum update) on 2
//   emulated-GPU ranks equals the same step on 2 CPU ranks.
// - On a real GPU: both comparisons with 2 then 1 ranks sharing the one GPU (skipped here).
// Inputs are fresh random values (seed printed; SYNK_TEST_SEED replays).
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/backend_function.h"
#include "compiler/cuda/emulator.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/cuda/cuda_function.h"
#include "compiler/cuda/nvrtc.h"
#include "synk/jit.h"
#include "runtime/group/backend.h"
#include "runtime/group/process_group.h"
#include "gpu/driver.h"

using namespace synk;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// A function with a matrix product (cuBLAS's path), a fused pointwise chain, reductions over
// rows (sum, max), an update of a shared variable, and a second function for after the fork.
const char* kProgram = R"(
shared m: f32[4, 3] = ones;
shared s: f32[3] = zeros;
fn step(scatter x: f32[n, 4], bcast c: f32[3]) {
  let h = tanh(x @ m) + c;
  out total: sum = sum(h, axis=0);
  out top: max = max(h);
  update s = s + sum(exp(h), axis=0);
}
fn scale(scatter x: f32[n, 4]) {
  out z: avg = mean(x * 2.0 - 1.0, axis=0);
}
)";

// A training step (gradient call, all_reduce, momentum update) on a small two-layer model.
const char* kTraining = R"(
shared w1: f32[6, 5] = normal(seed=1, std=0.3);
shared b1: f32[5];
shared w2: f32[5, 3] = normal(seed=2, std=0.3);
optimizer opt = momentum(lr=0.1, momentum=0.9);
fn train(scatter x: f32[n, 6], scatter y: i64[n], bcast scale: f32) {
  let h = tanh(x @ w1 + b1);
  let losses = cross_entropy(h @ w2, y);
  out loss_sum: sum = sum(losses);
  minimize sum(losses) * scale over w1, b1, w2 using opt;
}
)";

uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SYNK_TEST_SEED");
    uint64_t s = env && *env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cout << "[ seed     ] SYNK_TEST_SEED=" << s << "\n";
    return s;
  }();
  return seed;
}

struct Inputs {
  std::vector<float> x, c, m;
  int64_t rows = 0;
};

Inputs random_inputs(int64_t rows) {
  std::mt19937_64 rng(test_seed() + uint64_t(rows));
  std::normal_distribution<float> normal;
  Inputs in;
  in.rows = rows;
  for (int64_t i = 0; i < rows * 4; ++i) in.x.push_back(normal(rng));
  for (int i = 0; i < 3; ++i) in.c.push_back(normal(rng));
  for (int i = 0; i < 12; ++i) in.m.push_back(0.5f * normal(rng));
  return in;
}

// What one group computes: step's outputs, every rank's s after two calls, scale's output.
struct Results {
  std::vector<std::vector<float>> outputs;   // total, top, z
  std::vector<std::vector<float>> s_per_rank;
};

// Runs the program on a group of `ranks` ranks that fork() has just started; `step` was created
// before the fork, `scale` is created now.
Results run_program(jit::Module& mod, Function step, int ranks, const Inputs& in) {
  for (int r = 0; r < ranks; ++r) {
    mod.shared("m").set_value<float>(r, in.m, {4, 3});
    mod.shared("s").set_value<float>(r, {0, 0, 0}, {3});
  }
  Data x = data<float>(in.x, {in.rows, 4}, {.name = "x"});
  Data c = data<float>(in.c, {3}, {.name = "c"});
  Results res;
  step({x, c});
  Outputs out = step({x, c});
  res.outputs.push_back(to_vector<float>(out.get("total")));
  res.outputs.push_back(to_vector<float>(out.get("top")));
  Outputs z = mod.function("scale")({x});
  res.outputs.push_back(to_vector<float>(z.get("z")));
  for (int r = 0; r < ranks; ++r) res.s_per_rank.push_back(mod.shared("s").values<float>(r));
  return res;
}

// Three training steps on a group of `ranks` ranks that fork() has just started (the step was
// made before the fork): each step's loss_sum, then w1, b1, w2 on every rank.
Results run_training(jit::Module& mod, TrainStep step, int ranks, int64_t rows) {
  std::mt19937_64 rng(test_seed() + 7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, 2);
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < rows * 6; ++i) x.push_back(normal(rng));
  for (int64_t i = 0; i < rows; ++i) y.push_back(label(rng));
  Data xd = data<float>(x, {rows, 6}, {.name = "x"});
  Data yd = data<int64_t>(y, {rows}, {.name = "y"});
  Data scale = data<float>({float(ranks) / float(rows)}, {}, {.name = "scale"});
  Results res;
  for (int k = 0; k < 3; ++k) res.outputs.push_back(to_vector<float>(step({xd, yd, scale}).get("loss_sum")));
  for (int r = 0; r < ranks; ++r)
    for (const char* v : {"w1", "b1", "w2"}) res.s_per_rank.push_back(mod.shared(v).values<float>(r));
  return res;
}

void expect_same(const Results& got, const Results& want, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  ASSERT_EQ(got.s_per_rank.size(), want.s_per_rank.size());
  auto compare = [&](const std::vector<float>& a, const std::vector<float>& b, const std::string& name) {
    ASSERT_EQ(a.size(), b.size()) << what << ": " << name;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(b[i]))) << what << ": " << name << "[" << i << "]";
  };
  for (size_t k = 0; k < got.outputs.size(); ++k) compare(got.outputs[k], want.outputs[k], fmt::format("output {}", k));
  for (size_t r = 0; r < got.s_per_rank.size(); ++r)
    compare(got.s_per_rank[r], want.s_per_rank[r], fmt::format("shared value {}", r));
}

class GpuGroup : public ::testing::Test {
 protected:
  void TearDown() override {
    synk::close();
    rt::override_gpu_probe_for_testing(std::nullopt);
    compiler::set_default_cuda_executor(nullptr, std::nullopt);
    unsetenv("SYNK_VERBOSE");
  }
};

TEST_F(GpuGroup, GpuBackendWithoutAGpuNamesTheReason) {
  rt::GpuProbe probe = rt::probe_gpus();
  if (probe.usable) GTEST_SKIP() << "this machine has a usable GPU";
  ASSERT_FALSE(probe.reason.empty());
  try {
    synk::fork(2, Backend::Gpu);
    ADD_FAILURE() << "fork(2, Backend::Gpu) succeeded without a GPU";
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "Backend::Gpu: no CUDA GPU: " + probe.reason);
  }
  EXPECT_FALSE(synk::forked());
  EXPECT_FALSE(rt::cuda::cuda_initialized_here()) << "the probe must not initialise CUDA in the master";
  // The failed fork leaves nothing behind: a CPU group starts next.
  EXPECT_EQ(synk::fork(2, Backend::Cpu), 2);
  EXPECT_EQ(synk::backend(), Backend::Cpu);
}

TEST_F(GpuGroup, AutoPicksTheCpuHereAndSaysWhy) {
  rt::GpuProbe probe = rt::probe_gpus();
  if (probe.usable) GTEST_SKIP() << "this machine has a usable GPU";
  jit::Module mod = jit::compile_string(kProgram);
  setenv("SYNK_VERBOSE", "1", 1);
  ::testing::internal::CaptureStderr();
  int n = synk::fork(2, Backend::Auto);
  std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(n, 2);
  EXPECT_EQ(synk::backend(), Backend::Cpu);
  EXPECT_EQ(rt::active_backend(), Backend::Cpu);
  EXPECT_HAS(said, "synk: fork: 2 ranks on the CPU (backend auto: no CUDA GPU: " + probe.reason + ")");
  // Functions run (on the CPU) and agree with a plain CPU group.
  Inputs in = random_inputs(10);
  Results got = run_program(mod, mod.function("step"), 2, in);
  synk::close();
  EXPECT_EQ(synk::backend(), Backend::Cpu);
  unsetenv("SYNK_VERBOSE");
  ::testing::internal::CaptureStderr();
  synk::fork(2, Backend::Cpu);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "nothing is said without SYNK_VERBOSE";
  expect_same(run_program(mod, mod.function("step"), 2, in), got, "auto vs cpu");
}

// One process-wide emulator (each rank has its own copy after the fork).
compiler::emulator::EmulatorExecutor& emulator() {
  static auto* e = new compiler::emulator::EmulatorExecutor();
  return *e;
}

std::string emulator_unavailable() {
#if defined(__SANITIZE_ADDRESS__)
  return "the emulator's fibers (swapcontext) are not supported under AddressSanitizer";
#endif
  std::string reason;
  if (!compiler::nvrtc_available(&reason)) return "NVRTC cannot be loaded (the emulator still compiles with it): " + reason;
  if (std::system("c++ --version > /dev/null 2>&1") != 0) return "no host C++ compiler (c++) for the emulator";
  return "";
}

TEST_F(GpuGroup, EmulatedGpuRanksComputeWhatCpuRanksCompute) {
  if (std::string why = emulator_unavailable(); !why.empty()) GTEST_SKIP() << why;
  // Every rank checks that it ran kernels on the emulator, bound to GPU rank % 2.
  synk::register_rank_handler("gpu_test.check_device", [](rt::RankContext& ctx, std::string_view) {
    if (emulator().launches == 0) throw std::runtime_error("no kernel ran on this rank's (emulated) GPU");
    std::optional<int> ordinal = rt::cuda::CudaDevice::selected();
    if (ordinal != rt::gpu_for_rank(ctx.rank(), 2))
      throw std::runtime_error(fmt::format("rank {} is bound to GPU {}, not {}", ctx.rank(), ordinal ? *ordinal : -1,
                                           rt::gpu_for_rank(ctx.rank(), 2)));
    if (rt::active_backend() != Backend::Gpu) throw std::runtime_error("the rank does not know it is on the GPU");
  });
  Inputs in = random_inputs(37);
  // A fresh module per group: `step` is created before the fork (the GPU version is then built on
  // first use in every rank), `scale` after it (workers rebuild it through the "jit" loader).
  jit::Module cpu_mod = jit::compile_string(kProgram);
  Function cpu_step = cpu_mod.function("step");
  ASSERT_EQ(synk::fork(3, Backend::Cpu), 3);
  Results cpu = run_program(cpu_mod, cpu_step, 3, in);
  synk::close();

  rt::override_gpu_probe_for_testing(rt::GpuProbe{true, "", 2});
  compiler::set_default_cuda_executor(&emulator(), compiler::CudaTarget{90, true});
  jit::Module gpu_mod = jit::compile_string(kProgram);
  Function gpu_step = gpu_mod.function("step");
  setenv("SYNK_VERBOSE", "1", 1);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(synk::fork(3, Backend::Auto), 3);
  EXPECT_HAS(::testing::internal::GetCapturedStderr(), "synk: fork: 3 ranks on the GPU (2 devices; rank r uses GPU r % 2)");
  EXPECT_EQ(synk::backend(), Backend::Gpu);
  Results gpu = run_program(gpu_mod, gpu_step, 3, in);
  expect_same(gpu, cpu, "emulated GPU vs CPU, 3 ranks");
  EXPECT_NO_THROW(synk::run_on_all_ranks("gpu_test.check_device", ""));
  synk::close();
  EXPECT_EQ(synk::backend(), Backend::Cpu);
  EXPECT_EQ(rt::active_backend(), Backend::Cpu) << "closing the group ends the GPU backend in the master";
}

TEST_F(GpuGroup, EmulatedGpuTrainingStepEqualsTheCpuOne) {
  if (std::string why = emulator_unavailable(); !why.empty()) GTEST_SKIP() << why;
  jit::Module cpu_mod = jit::compile_string(kTraining);
  TrainStep cpu_step = cpu_mod.train_step("train");
  ASSERT_EQ(synk::fork(2, Backend::Cpu), 2);
  Results cpu = run_training(cpu_mod, cpu_step, 2, 21);
  synk::close();

  rt::override_gpu_probe_for_testing(rt::GpuProbe{true, "", 1});
  compiler::set_default_cuda_executor(&emulator(), compiler::CudaTarget{90, true});
  jit::Module gpu_mod = jit::compile_string(kTraining);
  TrainStep gpu_step = gpu_mod.train_step("train");
  const int64_t launches_before = emulator().launches;
  ASSERT_EQ(synk::fork(2, Backend::Gpu), 2);
  Results gpu = run_training(gpu_mod, gpu_step, 2, 21);
  EXPECT_GT(emulator().launches, launches_before) << "rank 0 ran no kernel on the emulated GPU";
  expect_same(gpu, cpu, "training on the emulated GPU vs the CPU, 2 ranks");
  // The loss goes down and the parameters moved (so the comparison compared something).
  EXPECT_LT(gpu.outputs[2][0], gpu.outputs[0][0]);
}

TEST_F(GpuGroup, BackendFunctionCompilesForTheActiveBackendAndTheOtherOnFirstUse) {
  if (std::string why = emulator_unavailable(); !why.empty()) GTEST_SKIP() << why;
  compiler::set_default_cuda_executor(&emulator(), compiler::CudaTarget{90, true});
  auto module = std::make_shared<const ir::Module>(jit::compile_string(kProgram).ir());
  int cpu_builds = 0;
  compiler::BackendFunction f(module, "scale", [&] {
    ++cpu_builds;
    return std::unique_ptr<rt::CompiledFunction>(compiler::compile_cpu_function(*module, "scale"));
  });
  // Outside a group the CPU is active: the CPU version is built at once, the GPU one is not.
  EXPECT_EQ(cpu_builds, 1);
  EXPECT_TRUE(f.has_version(Backend::Cpu));
  EXPECT_FALSE(f.has_version(Backend::Gpu));
  rt::CompiledFunction& gpu = f.version(Backend::Gpu);
  EXPECT_NE(dynamic_cast<compiler::CudaFunction*>(&gpu), nullptr);
  EXPECT_EQ(gpu.signature().name, f.signature().name);
  EXPECT_EQ(cpu_builds, 1);
}

TEST_F(GpuGroup, RealGpuOneAndTwoRanksShareOneDevice) {
  rt::GpuProbe probe = rt::probe_gpus();
  if (!probe.usable) GTEST_SKIP() << "no CUDA GPU: " << probe.reason;
  if (rt::cuda::cuda_initialized_here()) GTEST_SKIP() << "CUDA is initialised in this test process already";
  jit::Module mod = jit::compile_string(kProgram);
  Function step = mod.function("step");
  jit::Module train_mod = jit::compile_string(kTraining);
  TrainStep train = train_mod.train_step("train");
  Inputs in = random_inputs(1000);
  // 2 ranks first: once the master computed as rank 0 it holds a CUDA context, and only a
  // 1-rank group (no worker to fork) may use the GPU again in this process. Each group trains
  // from where the previous one left the master's parameters, so both backends start equal.
  for (int ranks : {2, 1}) {
    std::vector<Array> start;   // every shared variable of the training module (optimizer state too)
    for (const std::string& v : train_mod.shared_names()) start.push_back(train_mod.shared(v).get_value());
    ASSERT_EQ(synk::fork(ranks, Backend::Cpu), ranks);
    Results cpu = run_program(mod, step, ranks, in);
    Results cpu_training = run_training(train_mod, train, ranks, 64);
    synk::close();
    for (size_t k = 0; k < start.size(); ++k) train_mod.shared(train_mod.shared_names()[k]).set_value(start[k].ref());
    ASSERT_EQ(synk::fork(ranks, Backend::Gpu), ranks);
    Results gpu = run_program(mod, step, ranks, in);
    Results gpu_training = run_training(train_mod, train, ranks, 64);
    synk::close();
    expect_same(gpu, cpu, fmt::format("GPU vs CPU, {} ranks on one GPU", ranks));
    expect_same(gpu_training, cpu_training, fmt::format("training, GPU vs CPU, {} ranks on one GPU", ranks));
  }
  EXPECT_THROW(synk::fork(2, Backend::Gpu), UsageError) << "CUDA is initialised in the master now";
}

}  // namespace
