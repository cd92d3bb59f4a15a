// The OpenBLAS core check (openblas_core.h): which core types a CPU's features call for, that
// this process's OpenBLAS does not run its Prescott kernels on a CPU with AVX or better (Debian's
// 0.3.21 falls back to them on CPUs it does not know), and that a core type the user chose with
// OPENBLAS_CORETYPE is left as it is (checked in a child process started with the variable).
#include "compiler/cpu/openblas_core.h"

#include <gtest/gtest.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace synk::compiler {
namespace {

TEST(OpenBlasCore, CoreTypesFollowTheFeatures) {
  CpuVectorFeatures none;
  EXPECT_TRUE(openblas_cores_for(none).empty());

  CpuVectorFeatures avx{.avx = true};
  EXPECT_EQ(openblas_cores_for(avx), (std::vector<std::string>{"Sandybridge"}));

  CpuVectorFeatures avx2{.avx = true, .avx2 = true, .fma = true};
  EXPECT_EQ(openblas_cores_for(avx2), (std::vector<std::string>{"Haswell", "Sandybridge"}));

  CpuVectorFeatures avx2_no_fma{.avx = true, .avx2 = true};
  EXPECT_EQ(openblas_cores_for(avx2_no_fma), (std::vector<std::string>{"Sandybridge"}));

  CpuVectorFeatures skylake{.avx = true, .avx2 = true, .fma = true, .avx512 = true};
  EXPECT_EQ(openblas_cores_for(skylake), (std::vector<std::string>{"SkylakeX", "Haswell", "Sandybridge"}));

  CpuVectorFeatures cooperlake = skylake;
  cooperlake.avx512_bf16 = true;
  EXPECT_EQ(openblas_cores_for(cooperlake),
            (std::vector<std::string>{"Cooperlake", "SkylakeX", "Haswell", "Sandybridge"}));
}

TEST(OpenBlasCore, NoPrescottKernelsOnAVectorCpu) {
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice stands";
  const OpenBlasCoreReport& report = ensure_openblas_core();
  ASSERT_TRUE(report.is_openblas) << "synk is built against OpenBLAS (CMakeLists.txt: BLA_VENDOR OpenBLAS)";
  const std::vector<std::string> cores = openblas_cores_for(detect_cpu_vector_features());
  if (cores.empty()) GTEST_SKIP() << "this CPU has no AVX: Prescott is OpenBLAS's right choice";
  EXPECT_NE(strcasecmp(report.in_use.c_str(), "Prescott"), 0)
      << "OpenBLAS chose " << report.chosen_by_library << "; note: " << report.note;
  // A switch happens only from Prescott, and says so.
  if (report.switched) {
    EXPECT_EQ(strcasecmp(report.chosen_by_library.c_str(), "Prescott"), 0);
    EXPECT_NE(report.note.find(report.in_use), std::string::npos) << report.note;
  } else {
    EXPECT_EQ(report.in_use, report.chosen_by_library);
    EXPECT_TRUE(report.note.empty());
  }
  // Later calls give the same report.
  EXPECT_EQ(&ensure_openblas_core(), &report);
}

// Run in a child process that has OPENBLAS_CORETYPE=Prescott from its start (see below).
TEST(OpenBlasCore, ChildWithUserChoice) {
  if (!std::getenv("SYNK_OPENBLAS_CORE_CHILD")) GTEST_SKIP() << "run by UserChoiceIsKept in a child process";
  const OpenBlasCoreReport& report = ensure_openblas_core();
  EXPECT_FALSE(report.switched);
  EXPECT_EQ(strcasecmp(report.in_use.c_str(), "Prescott"), 0) << report.in_use;
  EXPECT_TRUE(report.note.empty()) << report.note;
}

TEST(OpenBlasCore, UserChoiceIsKept) {
  if (std::getenv("SYNK_OPENBLAS_CORE_CHILD")) GTEST_SKIP() << "the child itself";
  const std::string command = fmt::format(
      "SYNK_OPENBLAS_CORE_CHILD=1 OPENBLAS_CORETYPE=Prescott /proc/{}/exe "
      "--gtest_filter=OpenBlasCore.ChildWithUserChoice",
      getpid());
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 0) << command;
}

}  // namespace
}  // namespace synk::compiler
