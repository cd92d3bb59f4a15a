// The CUDA plumbing that works without a GPU: the driver probe (never throws, says why), the
// backend choice, the library loaders, NVRTC's options, targets, failures (which save the source
// and the log) and the on-disk cache. On a GPU machine the probe tests check the other answer.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "compiler/cuda/cuda_function.h"
#include "compiler/cuda/nvrtc.h"
#include "gpu/cublas.h"
#include "gpu/driver.h"

namespace synk::compiler {
namespace {

namespace fs = std::filesystem;
namespace cu = rt::cuda;

TEST(CudaDriver, ProbeNeverThrowsAndExplainsItself) {
  cu::CudaStatus status;
  ASSERT_NO_THROW(status = cu::cuda_status());
  std::string reason;
  const bool available = cu::cuda_available(&reason);
  EXPECT_EQ(available, status.available);
  if (available) {
    EXPECT_TRUE(reason.empty()) << reason;
    EXPECT_GT(status.device_count, 0);
    EXPECT_EQ(int(status.device_sm.size()), status.device_count);
    std::cout << "[ NOTE     ] CUDA GPU present: " << status.device_count << " device(s), driver " << status.driver_version
              << "\n";
  } else {
    EXPECT_FALSE(reason.empty());
    std::cout << "[ NOTE     ] no CUDA GPU: " << reason << "\n";
  }
}

TEST(CudaDriver, WithoutAGpuTheDriverCallThrowsACudaError) {
  std::string reason;
  if (cu::cuda_available(&reason)) GTEST_SKIP() << "a CUDA GPU is present; this test is for machines without one";
  try {
    cu::cuda_driver();
    FAIL() << "cuda_driver() did not throw";
  } catch (const cu::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA is not usable"), std::string::npos) << e.what();
  }
  // Asking for the GPU explicitly is a user error with the reason; auto falls back to the CPU.
  EXPECT_THROW(choose_backend("cuda"), synk::UserError);
  BackendChoice choice = choose_backend("auto");
  EXPECT_EQ(choice.backend, Backend::Cpu);
  EXPECT_EQ(choice.reason, reason);
}

TEST(CudaDriver, ErrorNamesWithoutTheDriver) {
  EXPECT_EQ(cu::cuda_error_name(2), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(cu::cuda_error_name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_NE(cu::cuda_error_name(12345).find("12345"), std::string::npos);
  EXPECT_THROW(cu::cuda_check(2, "allocating"), cu::CudaError);
  try {
    cu::cuda_check(2, "allocating x");
  } catch (const cu::CudaError& e) {
    EXPECT_TRUE(e.out_of_memory());
    EXPECT_NE(std::string(e.what()).find("allocating x: CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cu::cuda_check(0, "fine"));
  EXPECT_EQ(cu::format_bytes(512), "512 bytes");
  EXPECT_EQ(cu::format_bytes(size_t(3) << 30), "3.00 GiB (3221225472 bytes)");
}

TEST(CudaDriver, LibrarySearchReportsEveryAttempt) {
  std::string error;
  EXPECT_EQ(cu::open_cuda_library("libsynk-does-not-exist.so.1", "/nonexistent-a:/nonexistent-b", &error), nullptr);
  EXPECT_NE(error.find("libsynk-does-not-exist.so.1"), std::string::npos) << error;
  EXPECT_NE(error.find("/nonexistent-b"), std::string::npos) << error;
}

TEST(CudaDriver, BackendNamesAreChecked) {
  EXPECT_EQ(choose_backend("cpu").backend, Backend::Cpu);
  try {
    choose_backend("tpu");
    FAIL() << "no error";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu' is not one of auto, cpu, cuda"), std::string::npos) << e.what();
  }
}

TEST(Cublas, LoadsWithoutAGpu) {
  std::string reason;
  if (!cu::cublas_loadable(&reason)) GTEST_SKIP() << "cuBLAS cannot be loaded: " << reason;
  const cu::CublasApi& api = cu::cublas_api();
  int version = 0;
  ASSERT_EQ(api.cublasGetVersion(nullptr, &version), 0);
  EXPECT_GE(version, 130000);
  EXPECT_NE(cu::cublas_status_text(1).find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos);
}

#define SKIP_WITHOUT_NVRTC()                                                              \
  do {                                                                                    \
    std::string reason_;                                                                  \
    if (!nvrtc_available(&reason_)) GTEST_SKIP() << "NVRTC cannot be loaded: " << reason_; \
  } while (0)

TEST(Nvrtc, VersionAndArchitectures) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_EQ(nvrtc_version().substr(0, 3), "13.");
  std::vector<int> archs = nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  CudaTarget h100 = choose_cuda_target(9, 0);
  EXPECT_EQ(h100.sm, 90);
  EXPECT_TRUE(h100.cubin);
  EXPECT_EQ(h100.arch_option(), "-arch=sm_90");
  // A device newer than NVRTC knows gets PTX for the newest architecture NVRTC has.
  CudaTarget future = choose_cuda_target(99, 9);
  EXPECT_FALSE(future.cubin);
  EXPECT_EQ(future.sm, archs.back());
  EXPECT_EQ(future.arch_option(), "-arch=compute_" + std::to_string(archs.back()));
  EXPECT_THROW(choose_cuda_target(3, 0), synk::UserError);
}

TEST(Nvrtc, OptionsAreValidated) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_NO_THROW(validate_nvrtc_options({"--use_fast_math", "-lineinfo", "-DX=1", "-maxrregcount=64"}));
  try {
    validate_nvrtc_options({"-O3"});
    FAIL() << "-O3 accepted";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'-O3'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no -O flag"), std::string::npos);
  }
  EXPECT_THROW(validate_nvrtc_options({"-arch=sm_80"}), synk::UserError);
  EXPECT_THROW(validate_nvrtc_options({"--frobnicate"}), synk::UserError);
  EXPECT_THROW(validate_nvrtc_options({"-I"}), synk::UserError);   // a prefix with nothing after it
  std::vector<std::string> list = nvrtc_option_list(CudaTarget{90, false}, {});
  EXPECT_EQ(list.at(0), "-arch=compute_90");
  EXPECT_NE(std::find(list.begin(), list.end(), "-std=c++17"), list.end());
  for (const std::string& o : list) EXPECT_NE(o.rfind("-O", 0), 0u) << o;
}

TEST(Nvrtc, IncludeDirectoryCanBeOverridden) {
  ::setenv("SYNK_CUDA_INCLUDE_DIR", "/tmp", 1);
  EXPECT_EQ(cuda_include_dir(), "/tmp");
  ::unsetenv("SYNK_CUDA_INCLUDE_DIR");
}

TEST(Nvrtc, CompileFailureIsAnInternalErrorNamingSavedFiles) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }\n";
  try {
    nvrtc_compile(source, "broken_test", CudaTarget{90, true});
    FAIL() << "no error";
  } catch (const synk::InternalError& e) {
    const std::string msg = e.what();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(msg, m, std::regex("source saved to (\\S+\\.cu), compiler log to (\\S+\\.log)"))) << msg;
    std::ifstream src(m[1].str()), log(m[2].str());
    std::stringstream s1, s2;
    s1 << src.rdbuf();
    s2 << log.rdbuf();
    EXPECT_EQ(s1.str(), source);
    EXPECT_NE(s2.str().find("undefined_name"), std::string::npos) << s2.str();
    EXPECT_NE(msg.find("undefined_name"), std::string::npos);
    fs::remove(m[1].str());
    fs::remove(m[2].str());
  }
}

TEST(Nvrtc, DiskCacheHitsOnTheSecondCompile) {
  SKIP_WITHOUT_NVRTC();
  const fs::path dir = fs::temp_directory_path() / ("synk-cuda-cache-test-" + std::to_string(::getpid()));
  ::setenv("SYNK_CACHE_DIR", dir.c_str(), 1);
  const std::string source = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  CachedCudaBinary first = nvrtc_compile_cached(source, "cache_test", CudaTarget{90, true});
  CachedCudaBinary second = nvrtc_compile_cached(source, "cache_test", CudaTarget{90, true});
  CachedCudaBinary ptx = nvrtc_compile_cached(source, "cache_test", CudaTarget{90, false});
  EXPECT_FALSE(first.from_disk_cache);
  EXPECT_TRUE(second.from_disk_cache);
  EXPECT_FALSE(ptx.from_disk_cache);   // another target is another key
  EXPECT_NE(ptx.key, first.key);
  EXPECT_EQ(first.binary.image, second.binary.image);
  ::unsetenv("SYNK_CACHE_DIR");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace synk::compiler
