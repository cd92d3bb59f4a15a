// Tests of the files that keep what a compiler rejected: they go into one private directory per
// process (mode 0700, an unpredictable name), are created exclusively with mode 0600, and a
// symlink planted at the old predictable name is never written through.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>

#include <fmt/format.h>

#include "compiler/backend/failure_files.h"

namespace synk::compiler {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

TEST(FailureFiles, PrivateDirectoryExclusiveFiles) {
  const std::string tmp = fmt::format("{}/synk-failure-test-{}-{}", ::testing::TempDir(), ::getpid(), std::random_device{}());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0777), 0);
  setenv("TMPDIR", tmp.c_str(), 1);
  // The name the files used to have: another user could plant a link there.
  const std::string target = tmp + "/precious";
  std::ofstream(target) << "keep me";
  const std::string old_name = fmt::format("{}/synk-failed-kernel_1-{}-0.cpp", tmp, ::getpid());
  ASSERT_EQ(::symlink(target.c_str(), old_name.c_str()), 0);

  const std::string a = save_failure_file("int main() {", "kernel-1", "cpp");
  const std::string b = save_failure_file("log text", "kernel-1", "log");
  ASSERT_EQ(a.find('<'), std::string::npos) << a;
  ASSERT_EQ(b.find('<'), std::string::npos) << b;
  EXPECT_EQ(slurp(a), "int main() {");
  EXPECT_EQ(slurp(b), "log text");
  EXPECT_EQ(parent_of(a), parent_of(b)) << "one directory per process";
  EXPECT_EQ(parent_of(parent_of(a)), tmp);
  EXPECT_EQ(parent_of(a).rfind(fmt::format("{}/synk-failed-{}-", tmp, ::getpid()), 0), 0u) << a;
  EXPECT_EQ(mode_of(parent_of(a)), 0700u);
  EXPECT_EQ(mode_of(a), 0600u);
  EXPECT_NE(a.find("kernel_1-"), std::string::npos) << "the hint, made safe, names the file: " << a;
  EXPECT_EQ(slurp(target), "keep me") << "the planted link was not followed";
  unsetenv("TMPDIR");
  std::system(("rm -rf '" + tmp + "'").c_str());
}

TEST(FailureFiles, UnwritableTmpdirIsReportedNotThrown) {
  setenv("TMPDIR", "/proc/synk-cannot-exist", 1);
  // A fresh process: the directory of this one may have been made by the test above.
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string path = save_failure_file("x", "k", "cpp");
    _exit(path.rfind("<could not write", 0) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  unsetenv("TMPDIR");
}

}  // namespace synk::compiler
