// The ahead-of-time runtime (synk/aot_module.h) in process: a ModuleDef like the one a stub
// bakes, whose kernel table points at kernels the JIT compiled from the prefixed source (what
// synkc links). Checks: results equal the JIT's on fresh random inputs, before and after fork()
// (after it, workers rebuild through the "aot" loader), on 1 and 2 ranks; a wrong baked hash or a
// missing kernel is an InternalError naming the module; unknown names are UsageErrors; the texts
// synkc generates declare what the table defines. With GPU images (what synkc --cuda-arch
// builds), a 2-rank GPU group on the CUDA emulator (an emulated sm_86: the sm_80 CUBIN is chosen,
// the kernels run from the same source) computes what the JIT computes on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "compiler/aot/aot.h"
#include "synk/aot_module.h"
#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cuda/codegen_cuda.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/emulator.h"
#include "runtime/group/backend.h"
#include "compiler/llvm/jit.h"
#include "compiler/lower.h"
#include "synk/jit.h"
#include "dsl/frontend.h"

using namespace synk;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const char* kText = R"(shared s: f32[3] = ones;
fn f(scatter x: f32[n, 3], bcast y: f32[3]) {
  out z: avg = mean(x @ y, axis=0);
  update s = s + mean(x, axis=0);
}
)";

// Everything a stub would hold, with the kernels from the JIT (kept loaded for the process).
struct FakeStub {
  std::vector<std::string> names;              // JIT names
  std::vector<aot::KernelSymbol> kernels;
  aot::FunctionTable function{};
  aot::ModuleDef def{};
  std::shared_ptr<compiler::LoadedObject> object;

  compiler::CudaImageSet gpu;                  // with_gpu: the images synkc would embed
  std::vector<aot::GpuImage> gpu_images;

  FakeStub(const char* module_name, uint64_t hash_delta = 0, bool drop_kernel = false, bool with_gpu = false) {
    synk::SourceFile file("<aot test>", kText);
    synk::DiagnosticEngine diags(file);
    ast::Program program = dsl::parse_program(file, diags);
    ir::Module module = *dsl::analyze(program, diags, "/");
    compiler::KernelPlan plan = compiler::lower(module, *module.find_function("f"));
    std::string source = compiler::generate_cpu_source(module, plan, module_name);
    object = compiler::compile_cached(source, "aot_test").object;
    for (const compiler::Kernel& k : plan.kernels) {
      if (compiler::kernel_is_library_call(plan, k)) continue;
      names.push_back(compiler::kernel_symbol(plan, k));
      kernels.push_back({nullptr, reinterpret_cast<aot::KernelEntry>(
                                      object->lookup(compiler::kernel_symbol(plan, k, module_name)))});
    }
    for (size_t i = 0; i < kernels.size(); ++i) kernels[i].name = names[i].c_str();
    if (drop_kernel) kernels.pop_back();
    function = {"f", aot::source_hash(source) + hash_delta, kernels.data(), kernels.size()};
    if (with_gpu) {
      gpu = compiler::compile_cuda_images(compiler::generate_cuda_program(module, plan).source, "synk_f",
                                          compiler::default_cuda_archs());
      for (const compiler::CudaImage& image : gpu.images)
        gpu_images.push_back({image.sm, image.ptx ? aot::GpuImageKind::Ptx : aot::GpuImageKind::Cubin, image.min_driver,
                              image.bytes(), image.bytes() + image.byte_count()});
      function.cuda_source_hash = gpu.source_hash;
      function.gpu_images = gpu_images.data();
      function.gpu_image_count = gpu_images.size();
    }
    def = {module_name, "<aot test>", "/", kText, &function, 1};
    aot::register_module(&def);
  }
};

struct Result {
  float z;
  std::vector<float> s;
};

template <class SharedHandle>
Result call(synk::Function f, const SharedHandle& s, const std::vector<float>& xs, const std::vector<float>& ys) {
  int64_t rows = int64_t(xs.size() / 3);
  float z = synk::to_vector<float>(f({synk::data<float>(xs, {rows, 3}), synk::data<float>(ys, {3})}).get("z"))[0];
  return {z, s.template values<float>()};
}

std::vector<float> random_values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(AotRuntime, MatchesTheJitBeforeAndAfterFork) {
  static FakeStub stub("aot_test_model");
  jit::Module reference = jit::compile_string(kText);
  std::mt19937 rng(std::random_device{}());
  for (int ranks : {1, 2}) {
    for (bool register_before_fork : {true, false}) {
      // The shared variable starts at ones again in every case; workers copy the master's value at fork.
      aot::shared(stub.def, "s").set_value(std::vector<float>{1, 1, 1}, {3});
      reference.shared("s").set_value(std::vector<float>{1, 1, 1}, {3});
      std::vector<float> xs = random_values(rng, 3 * (4 + rng() % 30)), ys = random_values(rng, 3);
      if (register_before_fork) aot::load_all(stub.def);
      synk::fork(ranks);
      Result got = call(aot::function(stub.def, "f"), aot::shared(stub.def, "s"), xs, ys);
      Result want = call(reference.function("f"), reference.shared("s"), xs, ys);
      synk::close();
      EXPECT_EQ(got.z, want.z) << ranks << " ranks";
      EXPECT_EQ(got.s, want.s) << ranks << " ranks";
      double z = 0;
      for (size_t i = 0; i < xs.size(); ++i) z += double(xs[i]) * ys[i % 3] / double(xs.size() / 3);
      EXPECT_NEAR(got.z, z, 1e-4 * (1 + std::fabs(z)));
    }
  }
}

TEST(AotRuntime, GpuImagesRunOnAnEmulatedGpuGroupLikeTheJitOnTheCpu) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the emulator's fibers (swapcontext) are not supported under AddressSanitizer";
#endif
  std::string reason;
  if (!compiler::nvrtc_available(&reason)) GTEST_SKIP() << "NVRTC cannot be loaded (synkc would build no GPU images): " << reason;
  if (std::system("c++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no host C++ compiler (c++) for the emulator";
  static FakeStub stub("aot_test_gpu", 0, false, true);
  static auto* emulator = new compiler::emulator::EmulatorExecutor();
  jit::Module reference = jit::compile_string(kText);
  std::mt19937 rng(std::random_device{}());
  std::vector<float> xs = random_values(rng, 3 * (4 + rng() % 30)), ys = random_values(rng, 3);
  ASSERT_EQ(synk::fork(2, Backend::Cpu), 2);
  Result want = call(reference.function("f"), reference.shared("s"), xs, ys);
  synk::close();
  rt::override_gpu_probe_for_testing(rt::GpuProbe{true, "", 1});
  compiler::set_default_cuda_executor(emulator, compiler::CudaTarget{86, true});
  aot::shared(stub.def, "s").set_value(std::vector<float>{1, 1, 1}, {3});
  ASSERT_EQ(synk::fork(2, Backend::Gpu), 2);
  Result got = call(aot::function(stub.def, "f"), aot::shared(stub.def, "s"), xs, ys);
  const int64_t launches = emulator->launches;
  // The GPU version is the stub's images (not an NVRTC compile): images of other code are refused.
  static FakeStub other("aot_test_gpu_other", 0, false, true);
  other.function.cuda_source_hash ^= 1;
  try {
    aot::function(other.def, "f");
    ADD_FAILURE() << "images of other code were accepted";
  } catch (const synk::InternalError& e) {
    EXPECT_HAS(e.what(), "function 'f': the artifact's GPU images were compiled from other CUDA code");
  }
  synk::close();
  rt::override_gpu_probe_for_testing(std::nullopt);
  compiler::set_default_cuda_executor(nullptr, std::nullopt);
  EXPECT_GT(launches, 0) << "rank 0 ran no kernel on the emulated GPU";
  EXPECT_NEAR(got.z, want.z, 1e-5 * (1 + std::fabs(want.z)));
  ASSERT_EQ(got.s.size(), want.s.size());
  for (size_t i = 0; i < got.s.size(); ++i) EXPECT_NEAR(got.s[i], want.s[i], 1e-5 * (1 + std::fabs(want.s[i])));
}

TEST(AotRuntime, AWrongHashOrAMissingKernelIsAnInternalErrorNamingTheModule) {
  static FakeStub wrong_hash("aot_test_wrong_hash", 1);
  try {
    aot::function(wrong_hash.def, "f");
    ADD_FAILURE() << "no error for a wrong hash";
  } catch (const synk::InternalError& e) {
    EXPECT_HAS(e.what(), "aot module 'aot_test_wrong_hash', function 'f': the linked kernels were generated from other code");
  }
  static FakeStub missing("aot_test_missing_kernel", 0, true);
  try {
    aot::function(missing.def, "f");
    ADD_FAILURE() << "no error for a missing kernel";
  } catch (const synk::InternalError& e) {
    EXPECT_HAS(e.what(), "aot module 'aot_test_missing_kernel', function 'f': no linked kernel 'synk_f_k");
  }
}

TEST(AotRuntime, UnknownNamesAreUsageErrors) {
  static FakeStub stub("aot_test_names");
  try {
    aot::function(stub.def, "g");
    ADD_FAILURE();
  } catch (const synk::UsageError& e) {
    EXPECT_HAS(e.what(), "no function named 'g' (the module has: f)");
  }
  try {
    aot::shared(stub.def, "t");
    ADD_FAILURE();
  } catch (const synk::UsageError& e) {
    EXPECT_HAS(e.what(), "no shared variable named 't' (the module has: s)");
  }
  EXPECT_EQ(aot::function_names(stub.def), std::vector<std::string>{"f"});
}

TEST(AotGenerate, StubAndHeaderDeclareTheTable) {
  compiler::aot::AotModule m = compiler::aot::generate("dir/my-model.synk", kText, {});
  EXPECT_EQ(m.name, "my_model");
  ASSERT_EQ(m.kernels.size(), 1u);
  for (const std::string& sym : m.kernels[0].linked_symbols) {
    EXPECT_HAS(m.stub, "extern \"C\" int64_t " + sym + "(");
    EXPECT_HAS(m.kernels[0].source, "extern \"C\" int64_t " + sym + "(");
  }
  EXPECT_HAS(m.stub, fmt::format("0x{:016x}ull", aot::source_hash(m.kernels[0].source)));
  EXPECT_HAS(m.header, "namespace my_model {");
  EXPECT_HAS(m.header, "// f(x: f32[n, 3] scatter, y: f32[3] bcast)");
  EXPECT_HAS(m.header, "//   updates s: f32[3] (avg)");
  EXPECT_EQ(compiler::aot::cxx_identifier("class"), "class_");
  EXPECT_EQ(compiler::aot::cxx_identifier("3d"), "_3d");
  compiler::aot::AotOptions only_f;
  only_f.functions = {"f"};
  EXPECT_EQ(compiler::aot::generate("m.synk", kText, only_f).kernels.size(), 1u);
}

}  // namespace
