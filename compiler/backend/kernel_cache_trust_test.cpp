// Tests of when the kernel cache is trusted (it holds code that will run): a missing directory is
// created with mode 0700; a group-writable one, one of another user (a real chown when the tests
// run as root, else the injected owner check only) or a non-directory is refused, with one
// warning, and the JIT then compiles in process and writes nothing there; entries are never read
// through a symlink or from a file of someone else; without HOME the passwd entry's home is used,
// not a predictable name in /tmp.
#include <gtest/gtest.h>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "base/testing.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/llvm/jit.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

std::string fresh_dir(const std::string& what) {
  std::string dir = fmt::format("{}/synk-cache-trust-{}-{}-{}", ::testing::TempDir(), what, ::getpid(),
                                std::random_device{}());
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

void remove_dir(const std::string& dir) { std::system(("rm -rf '" + dir + "'").c_str()); }

mode_t mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

using synk::testing::ScopedEnv;

// Compiles a function no other test has, with the given cache directory; returns how it was built.
CacheOutcome compile_with_cache(const std::string& dir) {
  ScopedEnv env("SYNK_CACHE_DIR", dir.c_str());
  clear_memory_cache_for_tests();
  ir::Module m = dsl::compile_source(
      "t.synk", fmt::format("fn f(bcast x: f32[n]) {{ out y: none = x * {}.0 + 1.5; }}", std::random_device{}() % 100000));
  auto fn = compile_cpu_function(m, "f", {.use_disk_cache = true});
  rt::Array x;
  x.resize(rt::DType::F32, {2});
  x.data<float>()[0] = 0;
  x.data<float>()[1] = 0;
  std::vector<rt::ArrayRef> in{x.ref()};
  std::vector<rt::Array> out(1), ups;
  fn->run(in, {}, out, ups);
  EXPECT_EQ(out[0].data<float>()[1], 1.5f) << "the function is compiled and runs either way";
  return fn->cache_outcome();
}

}  // namespace

TEST(KernelCacheTrust, MissingDirectoryIsCreatedPrivate) {
  const std::string dir = fresh_dir("new") + "/nested/cache";
  KernelCache cache(dir);
  ASSERT_TRUE(cache.put(cache_key({"a"}), bytes("payload")));
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(cache.refusal(), "");
  EXPECT_EQ(cache.get(cache_key({"a"})), bytes("payload"));
  remove_dir(dir.substr(0, dir.size() - std::string("/nested/cache").size()));
}

TEST(KernelCacheTrust, GroupWritableDirectoryIsRefused) {
  const std::string dir = fresh_dir("group");
  KernelCache cache(dir);
  const std::string key = cache_key({"planted"});
  ASSERT_TRUE(cache.put(key, bytes("good")));   // written while the directory was private
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  EXPECT_EQ(cache.refusal(), fmt::format("its mode is 0770, so other users can write or read it (make it "
                                         "private: chmod 700 {})", dir));
  EXPECT_FALSE(cache.get(key)) << "nothing is read from a directory others can write";
  EXPECT_FALSE(cache.put(cache_key({"new"}), bytes("x")));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(compile_with_cache(dir), CacheOutcome::Compiled);
  EXPECT_EQ(compile_with_cache(dir), CacheOutcome::Compiled);
  const std::string err = ::testing::internal::GetCapturedStderr();
  // The warning names the directory once per process (an earlier call of this test may have
  // printed it already).
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 1) << err;
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(cache.get(key), bytes("good")) << "private again: trusted again";
  ASSERT_EQ(::chmod(dir.c_str(), 0705), 0);
  EXPECT_NE(cache.refusal(), "") << "readable by others is refused too: mode 0700 only";
  remove_dir(dir);
}

TEST(KernelCacheTrust, RefusalIsAWarningOnStderr) {
  const std::string dir = fresh_dir("warn");
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  ::testing::internal::CaptureStderr();
  KernelCache(dir).get(cache_key({"x"}));
  KernelCache(dir).get(cache_key({"y"}));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, fmt::format("synk: warning: not using the kernel cache {}: its mode is 0777, so other users can write or "
                             "read it (make it private: chmod 700 {}); compiling without the disk cache\n",
                             dir, dir));
  remove_dir(dir);
}

TEST(KernelCacheTrust, DirectoryOfAnotherUserIsRefused) {
  const std::string dir = fresh_dir("owner");
  KernelCache cache(dir);
  ASSERT_TRUE(cache.put(cache_key({"k"}), bytes("v")));
  // The injected owner check: this user's directory, judged as if we were someone else.
  KernelCache::set_expected_owner_for_tests(::geteuid() + 1);
  EXPECT_EQ(cache.refusal(), fmt::format("it is owned by uid {}, not by this user (uid {})", ::geteuid(), ::geteuid() + 1));
  EXPECT_FALSE(cache.get(cache_key({"k"})));
  KernelCache::set_expected_owner_for_tests(std::nullopt);
  EXPECT_EQ(cache.get(cache_key({"k"})), bytes("v"));
  if (::geteuid() != 0) {
    remove_dir(dir);
    GTEST_SKIP() << "a directory really owned by another user needs root to make (chown); the injected owner check "
                    "above covers the refusal";
  }
  // As root: the directory really belongs to someone else (nobody).
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  EXPECT_EQ(cache.refusal(), "it is owned by uid 65534, not by this user (uid 0)");
  EXPECT_FALSE(cache.get(cache_key({"k"})));
  EXPECT_FALSE(cache.put(cache_key({"k2"}), bytes("v")));
  EXPECT_EQ(compile_with_cache(dir), CacheOutcome::Compiled);
  remove_dir(dir);
}

TEST(KernelCacheTrust, NotADirectoryIsRefusedOrAbsent) {
  const std::string file = fresh_dir("file");
  std::ofstream(file) << "not a directory";
  KernelCache cache(file);
  EXPECT_FALSE(cache.put(cache_key({"k"}), bytes("v")));
  EXPECT_FALSE(cache.get(cache_key({"k"})));
  std::remove(file.c_str());
}

TEST(KernelCacheTrust, EntriesAreNotReadThroughSymlinksOrFromOtherOwners) {
  const std::string dir = fresh_dir("links");
  KernelCache cache(dir);
  const std::string key = cache_key({"real"}), linked = cache_key({"linked"});
  ASSERT_TRUE(cache.put(key, bytes("code")));
  // A link under a valid key that points at a valid entry is still not an entry.
  ASSERT_EQ(::symlink(cache.path_for(key).c_str(), cache.path_for(linked).c_str()), 0);
  EXPECT_FALSE(cache.get(linked));
  ASSERT_TRUE(cache.put(linked, bytes("own"))) << "put replaces the link itself";
  struct stat st;
  ASSERT_EQ(::lstat(cache.path_for(linked).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(cache.get(key), bytes("code")) << "the link's target was not written through";
  if (::geteuid() == 0) {
    // An entry that belongs to someone else is removed, not run.
    ASSERT_EQ(::chown(cache.path_for(key).c_str(), 65534, 65534), 0);
    EXPECT_FALSE(cache.get(key));
    EXPECT_NE(::access(cache.path_for(key).c_str(), F_OK), 0);
  }
  remove_dir(dir);
}

TEST(KernelCacheTrust, NoHomeMeansThePasswdHome) {
  ScopedEnv a("SYNK_CACHE_DIR", nullptr);
  ScopedEnv b("XDG_CACHE_HOME", nullptr);
  ScopedEnv c("HOME", nullptr);
  struct passwd* pw = ::getpwuid(::geteuid());
  if (pw && pw->pw_dir && *pw->pw_dir)
    EXPECT_EQ(KernelCache::default_dir(), std::string(pw->pw_dir) + "/.cache/synk");
  else
    EXPECT_EQ(KernelCache::default_dir(), "/tmp/synk-cache-" + std::to_string(::geteuid()));
}

}  // namespace synk::compiler
