// CUDA code generation without a GPU: every function of every program in test/codegen-cuda/,
// examples/ and the other lit suites (those that compile) is lowered, turned into CUDA, compiled
// the ahead-of-time way (compile_cuda_images: NVRTC to a CUBIN for each of synkc's default
// architectures, sm_80 and sm_90, and PTX of the newest; the examples and the other suites'
// programs to PTX only, and each distinct source once), and the PTX is assembled by ptxas for
// sm_90; every kernel symbol must exist in each result. Plus the generator's structural promises (no
// #include, grid-stride loops, 16-byte vectors, shuffles, one kernel for a fused
// pointwise+reduction) and the launch arithmetic. Skips, with the reason, when NVRTC cannot be
// loaded (a machine without the CUDA toolkit).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/cuda/codegen_cuda.h"
#include "compiler/cuda/cuda_function.h"
#include "compiler/lower.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/nvrtc.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::vector<char>& bytes, const std::string& needle) {
  return std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()) != bytes.end();
}

struct Program {
  std::string name;   // path relative to the source dir
  ir::Module module;
  bool core = false;  // test/codegen-cuda: compiled as synkc does, for every default architecture
};

// Every .synk under test/codegen-cuda and examples (which must compile) and under the other
// test suites (those that compile: many are diagnostics tests).
std::vector<Program> load_programs(std::vector<std::string>* failures) {
  std::vector<Program> programs;
  const fs::path root = SYNK_SOURCE_DIR;
  std::vector<fs::path> files;
  for (const char* dir : {"test", "examples"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.is_regular_file() && e.path().extension() == ".synk") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string rel = fs::relative(f, root).string();
    const bool core = rel.rfind("test/codegen-cuda/", 0) == 0;
    const bool must_compile = core || rel.rfind("examples/", 0) == 0;
    try {
      programs.push_back({rel, dsl::compile_source(f.string(), read_file(f)), core});
    } catch (const std::exception& e) {
      if (must_compile) failures->push_back(rel + ": " + e.what());
    }
  }
  return programs;
}

bool skip_without_nvrtc(std::string* why) {
  std::string reason;
  if (nvrtc_available(&reason)) return false;
  *why = "NVRTC cannot be loaded: " + reason;
  return true;
}

// ptxas on `ptx`; returns its exit status and the cubin it wrote.
int run_ptxas(const std::string& ptxas, const std::vector<char>& ptx, std::vector<char>* cubin, std::string* output) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("synk-ptxas-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path in = dir / "k.ptx", out = dir / "k.cubin", log = dir / "log.txt";
  {
    std::ofstream f(in, std::ios::binary);
    f.write(ptx.data(), std::streamsize(std::strlen(ptx.data())));
  }
  const std::string cmd = fmt::format("'{}' -arch=sm_90 '{}' -o '{}' > '{}' 2>&1", ptxas, in.string(), out.string(), log.string());
  int status = std::system(cmd.c_str());
  *output = read_file(log);
  std::ifstream c(out, std::ios::binary);
  cubin->assign(std::istreambuf_iterator<char>(c), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The PTX of the newest default architecture: its target, every kernel's entry, and (when
// `ptxas` is known) ptxas assembles it with every kernel in the result. Returns 1 when assembled.
int check_ptx(const std::vector<char>& ptx, const std::vector<std::string>& symbols, const std::string& ptxas) {
  const std::string ptx_text(ptx.data(), strnlen(ptx.data(), ptx.size()));
  EXPECT_NE(ptx_text.find(fmt::format(".target sm_{}", default_cuda_archs().back())), std::string::npos);
  for (const std::string& s : symbols)
    EXPECT_NE(ptx_text.find(".entry " + s + "("), std::string::npos) << s << " missing from the PTX";
  if (ptxas.empty()) return 0;
  std::vector<char> assembled_cubin;
  std::string log;
  EXPECT_EQ(run_ptxas(ptxas, ptx, &assembled_cubin, &log), 0) << log;
  for (const std::string& s : symbols) EXPECT_TRUE(contains(assembled_cubin, s)) << s << " missing after ptxas";
  return 1;
}

TEST(CudaCodegen, EveryProgramCompilesWithNvrtcAndPtxas) {
  std::string why;
  if (skip_without_nvrtc(&why)) GTEST_SKIP() << why;
  std::vector<std::string> failures;
  std::vector<Program> programs = load_programs(&failures);
  for (const std::string& f : failures) ADD_FAILURE() << "does not compile: " << f;
  ASSERT_GE(programs.size(), 19u) << "the test/codegen-cuda programs were not found";
  const std::string ptxas = configured_ptxas_path();
  if (ptxas.empty()) std::cout << "[ NOTE     ] ptxas not found (set SYNK_PTXAS): PTX is compiled but not assembled\n";
  int functions = 0, kernels = 0, assembled = 0, repeated = 0;
  // Many lit programs share functions (the same update rule, the same pointwise body): a source
  // already compiled adds no coverage, only minutes of NVRTC.
  std::set<std::string> compiled_sources;
  std::vector<std::pair<double, std::string>> timings;   // the slowest are printed
  for (const Program& p : programs) {
    for (const ir::Function& fn : p.module.functions) {
      SCOPED_TRACE(p.name + ": function " + fn.name);
      KernelPlan plan;
      try {
        plan = lower(p.module, fn);
      } catch (const synk::UserError& e) {
        // Programs the compiler does not handle yet (grad before the gradient pass) are not
        // the CUDA generator's business; the CPU suites report them.
        std::cout << "[ NOTE     ] " << p.name << ": " << fn.name << " does not lower: " << e.what() << "\n";
        continue;
      }
      CudaProgram program = generate_cuda_program(p.module, plan);
      ++functions;
      if (const char* dump = std::getenv("SYNK_DUMP_CUDA"); dump && *dump) {   // for reading the output
        std::string file = p.name + "." + fn.name + ".cu";
        std::replace(file.begin(), file.end(), '/', '_');
        std::ofstream(fs::path(dump) / file) << program.source;
      }
      EXPECT_EQ(program.source.find("#include"), std::string::npos);
      EXPECT_EQ(program.launches.size(), plan.kernels.size());
      std::vector<std::string> symbols;
      for (const CudaKernelLaunch& l : program.launches)
        if (l.kind != CudaLaunchKind::Blas) symbols.push_back(l.symbol);
      kernels += int(symbols.size());
      for (const std::string& s : symbols)
        EXPECT_NE(program.source.find(fmt::format("__launch_bounds__({}) {}(", kCudaMaxThreads, s)), std::string::npos) << s;
      if (symbols.empty()) continue;
      if (!compiled_sources.insert(program.source).second) {
        ++repeated;
        continue;
      }
      const std::string hint = "test_" + fn.name;
      const auto started = std::chrono::steady_clock::now();
      if (p.core) {
        // The ahead-of-time path synkc takes: a CUBIN per default architecture (NVRTC runs ptxas
        // for each) and PTX of the newest, every image passing the load path's checks.
        CudaImageSet set = compile_cuda_images(program.source, hint, default_cuda_archs(), {}, /*use_disk_cache=*/false);
        ASSERT_EQ(set.images.size(), default_cuda_archs().size() + 1);
        for (const CudaImage& image : set.images) {
          EXPECT_EQ(cuda_image_problem(image), "") << image.name();
          const std::vector<char> bytes(image.bytes(), image.bytes() + image.byte_count());
          for (const std::string& s : symbols) EXPECT_TRUE(contains(bytes, s)) << s << " missing from the " << image.name();
        }
        assembled += check_ptx(set.images.back().owned, symbols, ptxas);
      } else {
        // The examples and the other suites' programs: NVRTC's PTX of the newest architecture,
        // assembled by ptxas (what the CUBIN for it holds). What sm_80 could refuse that sm_90
        // accepts is the generator's, which the core programs above exercise with every kind of
        // kernel. (ResNet-20's training function took 127 s the whole way, 28 s this way.)
        const CudaTarget ptx{default_cuda_archs().back(), /*cubin=*/false, false};
        CachedCudaBinary bin = nvrtc_compile_cached(program.source, hint, ptx, nvrtc_options_from_env(), false);
        assembled += check_ptx(bin.binary.image, symbols, ptxas);
      }
      timings.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                           p.name + ": " + fn.name);
    }
  }
  std::sort(timings.rbegin(), timings.rend());
  for (size_t i = 0; i < timings.size() && i < 5; ++i)
    std::cout << fmt::format("[ NOTE     ] {:.1f} s: {}\n", timings[i].first, timings[i].second);
  std::cout << fmt::format("[ NOTE     ] {} functions, {} kernels compiled to CUBIN and PTX ({} sources already compiled "
                           "skipped); {} PTX modules assembled\n",
                           functions, kernels, repeated, assembled);
  EXPECT_GE(functions, 19);
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not found (configure with the CUDA toolkit or set SYNK_PTXAS): PTX not assembled";
}

// The CUDA program of function f of `source`.
CudaProgram cuda_program_for(const std::string& source) {
  const ir::Module module = dsl::compile_source("inline.synk", source);
  return generate_cuda_program(module, lower(module, *module.find_function("f")));
}

TEST(CudaCodegen, FusedPointwiseUsesVectorLoadsAndGridStride) {
  CudaProgram p = cuda_program_for("fn f(scatter x: f32[n], scatter y: f32[n]) { out z: gather = x * y + exp(x); }");
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_EQ(p.launches[0].kind, CudaLaunchKind::Flat);
  EXPECT_EQ(p.launches[0].vector_width, 4);
  EXPECT_NE(p.source.find("SynkVec<float, 4>"), std::string::npos);
  EXPECT_NE(p.source.find("e += synk_threads() * 4"), std::string::npos);   // grid-stride, vectors
  EXPECT_NE(p.source.find("e < total; e += synk_threads()"), std::string::npos);   // scalar tail
  EXPECT_NE(p.source.find("expf("), std::string::npos);
  EXPECT_EQ(p.source.find("__expf"), std::string::npos);   // fast math is off by default
}

TEST(CudaCodegen, PointwiseReductionIsOneKernelWithShuffles) {
  CudaProgram p = cuda_program_for("fn f(scatter x: f32[n], scatter y: f32[n]) { out s: sum = sum(x * y); }");
  ASSERT_EQ(p.launches.size(), 1u);
  const CudaKernelLaunch& l = p.launches[0];
  EXPECT_EQ(l.kind, CudaLaunchKind::RowTeams);
  EXPECT_TRUE(l.splittable);
  EXPECT_EQ(l.vector_width, 4);
  EXPECT_NE(p.source.find("synk_block_reduce(acc, identity, combine)"), std::string::npos);
  EXPECT_NE(p.source.find("__shfl_down_sync"), std::string::npos);
  size_t globals = 0;
  for (size_t at = p.source.find("__global__"); at != std::string::npos; at = p.source.find("__global__", at + 1)) ++globals;
  EXPECT_EQ(globals, 1u);
}

TEST(CudaCodegen, ColumnReductionIsThreadPerOutput) {
  CudaProgram p = cuda_program_for("fn f(scatter x: f32[n, 8]) { out s: sum = sum(x, axis=0); }");
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_EQ(p.launches[0].kind, CudaLaunchKind::Columns);
}

TEST(CudaCodegen, FloatMatmulHasNoKernel) {
  CudaProgram p = cuda_program_for("fn f(scatter x: f32[n, 8], bcast w: f32[8, 3]) { out z: gather = x @ w; }");
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_EQ(p.launches[0].kind, CudaLaunchKind::Blas);
  EXPECT_EQ(p.source.find("__global__"), std::string::npos);
}

TEST(CudaCodegen, FastMathIsAnOption) {
  std::string why;
  if (skip_without_nvrtc(&why)) GTEST_SKIP() << why;
  NvrtcOptions o;
  o.fast_math = true;
  std::vector<std::string> list = nvrtc_option_list(CudaTarget{90, true}, o);
  EXPECT_NE(std::find(list.begin(), list.end(), "--use_fast_math"), list.end());
  NvrtcOptions plain;
  std::vector<std::string> l2 = nvrtc_option_list(CudaTarget{90, true}, plain);
  EXPECT_EQ(std::find(l2.begin(), l2.end(), "--use_fast_math"), l2.end());
  EXPECT_EQ(l2.front(), "-arch=sm_90");
}

TEST(CudaLaunchConfig, FullReductionSplitsAcrossBlocks) {
  CudaKernelLaunch l;
  l.kind = CudaLaunchKind::RowTeams;
  l.splittable = true;
  l.vector_width = 4;
  l.partial_bytes = 4;
  const int sms = 132;
  CudaLaunchConfig c = cuda_launch_config(l, 1, int64_t(1) << 28, sms);
  EXPECT_EQ(c.threads, 256);
  EXPECT_GT(c.splits, 1);
  EXPECT_LE(c.splits, 4 * sms);
  EXPECT_EQ(c.grid_x, c.splits);
  EXPECT_EQ(c.counters, 1);
  EXPECT_EQ(c.scratch_bytes, 16 + c.splits * 4);
  // A short row is never split, and gets a block sized to it.
  CudaLaunchConfig small = cuda_launch_config(l, 1, 40, sms);
  EXPECT_EQ(small.splits, 1);
  EXPECT_EQ(small.threads, 32);
  EXPECT_EQ(small.scratch_bytes, 0);
  // Many rows: one block per row, grid capped, no split.
  CudaLaunchConfig many = cuda_launch_config(l, 100000, 64, sms);
  EXPECT_EQ(many.splits, 1);
  EXPECT_EQ(many.grid_x, 32 * sms);
  EXPECT_TRUE(cuda_launch_config(l, 0, 64, sms).skip);
}

TEST(CudaLaunchConfig, ColumnsAndFlat) {
  CudaKernelLaunch cols;
  cols.kind = CudaLaunchKind::Columns;
  cols.splittable = true;
  cols.partial_bytes = 8;
  CudaLaunchConfig c = cuda_launch_config(cols, 8, 1 << 24, 132);
  EXPECT_EQ(c.grid_x, 1);
  EXPECT_EQ(c.grid_y, c.splits);
  EXPECT_GT(c.splits, 1);
  EXPECT_EQ(c.counters, 1);
  EXPECT_EQ(c.scratch_bytes, 16 + 8 * c.splits * 8);
  CudaKernelLaunch flat;
  flat.kind = CudaLaunchKind::Flat;
  flat.vector_width = 4;
  CudaLaunchConfig f = cuda_launch_config(flat, 1000, 1, 132);
  EXPECT_EQ(f.grid_x, 1);   // 1000 elements / (256 threads * 4)
  EXPECT_EQ(cuda_launch_config(flat, int64_t(1) << 30, 1, 132).grid_x, 32 * 132);
  EXPECT_TRUE(cuda_launch_config(flat, 0, 1, 132).skip);
}

}  // namespace
}  // namespace synk::compiler
