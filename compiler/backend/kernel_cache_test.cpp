// Tests of the on-disk kernel cache: round trips, keys, the directory rule, detection and removal
// of corrupt or truncated entries (then rebuilt by the JIT), an unwritable directory, a function
// compiled on several threads stored as one entry, and many forked processes compiling the same
// function at once into one shared cache.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>

#include <fmt/format.h>

#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/llvm/jit.h"
#include "base/testing.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/lower.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

// Every directory a test made, removed when the test program exits.
struct MadeDirs {
  std::vector<std::string> dirs;
  ~MadeDirs() {
    for (const std::string& d : dirs) std::system(("rm -rf '" + d + "'").c_str());
  }
};

std::string fresh_dir(const std::string& what) {
  static MadeDirs made;
  static int counter = 0;
  std::string dir = fmt::format("{}/synk-cache-test-{}-{}-{}-{}", ::testing::TempDir(), what, ::getpid(), counter++,
                                std::random_device{}());
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  made.dirs.push_back(dir);
  return dir;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

using synk::testing::ScopedEnv;

TEST(KernelCache, RoundTripAndMiss) {
  KernelCache cache(fresh_dir("roundtrip"));
  std::string key = cache_key({"some source", "options"});
  EXPECT_EQ(key.size(), 32u);
  EXPECT_FALSE(cache.get(key));
  std::vector<char> payload = bytes(std::string("\x7f" "ELF object bytes\0with nul", 26));
  ASSERT_TRUE(cache.put(key, payload));
  auto got = cache.get(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, payload);
  EXPECT_FALSE(cache.get(cache_key({"other source", "options"})));
  // Only the entry itself is left: the temporary file was renamed into place.
  EXPECT_EQ(list_dir(cache.dir()), std::vector<std::string>{key + ".o"});
  // An empty payload is a valid entry too.
  std::string empty_key = cache_key({"empty"});
  ASSERT_TRUE(cache.put(empty_key, {}));
  ASSERT_TRUE(cache.get(empty_key));
  EXPECT_TRUE(cache.get(empty_key)->empty());
}

TEST(KernelCache, KeysSeparateTheirParts) {
  EXPECT_NE(cache_key({"ab", "c"}), cache_key({"a", "bc"}));
  EXPECT_NE(cache_key({"abc"}), cache_key({"abc", ""}));
  EXPECT_EQ(cache_key({"x", "y"}), cache_key({"x", "y"}));
  EXPECT_FALSE(KernelCache(fresh_dir("badkey")).get("not-a-hex-key"));
}

TEST(KernelCache, DirectoryFromEnvironment) {
  ScopedEnv a("SYNK_CACHE_DIR", "/tmp/explicit-synk-cache");
  ScopedEnv b("XDG_CACHE_HOME", "/tmp/xdg");
  ScopedEnv c("HOME", "/home/someone");
  EXPECT_EQ(KernelCache::default_dir(), "/tmp/explicit-synk-cache");
  {
    ScopedEnv no_synk("SYNK_CACHE_DIR", nullptr);
    EXPECT_EQ(KernelCache::default_dir(), "/tmp/xdg/synk");
    ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(KernelCache::default_dir(), "/home/someone/.cache/synk");
    ScopedEnv empty_xdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(KernelCache::default_dir(), "/home/someone/.cache/synk");
  }
  EXPECT_EQ(KernelCache().dir(), "/tmp/explicit-synk-cache");
}

TEST(KernelCache, CorruptOrTruncatedEntriesAreRemoved) {
  KernelCache cache(fresh_dir("corrupt"));
  std::vector<char> payload(5000);
  std::mt19937 rng(7);
  for (char& c : payload) c = char(rng());
  // Each damage is applied to a fresh copy of a good entry.
  struct Damage {
    const char* what;
    void (*apply)(std::string& file);
  };
  const Damage damages[] = {
      {"truncated", [](std::string& f) { f.resize(f.size() - 17); }},
      {"header only", [](std::string& f) { f.resize(48); }},
      {"empty", [](std::string& f) { f.clear(); }},
      {"flipped payload byte", [](std::string& f) { f[f.size() / 2] ^= 0x20; }},
      {"wrong magic", [](std::string& f) { f[0] = 'X'; }},
      {"wrong key", [](std::string& f) { f[9] ^= 1; }},
      {"extra bytes", [](std::string& f) { f += "garbage"; }},
  };
  for (const Damage& d : damages) {
    std::string key = cache_key({"entry", d.what});
    ASSERT_TRUE(cache.put(key, payload));
    std::string path = cache.path_for(key);
    std::string file;
    {
      std::ifstream in(path, std::ios::binary);
      file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    d.apply(file);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << file;
    }
    EXPECT_FALSE(cache.get(key)) << d.what;
    EXPECT_FALSE(exists(path)) << d.what << ": a bad entry is removed";
    ASSERT_TRUE(cache.put(key, payload));
    EXPECT_EQ(cache.get(key), payload) << d.what << ": and can be written again";
  }
}

TEST(KernelCache, UnwritableDirectoryOnlyCostsTheCache) {
  KernelCache cache("/proc/synk-cannot-exist/cache");
  EXPECT_FALSE(cache.put(cache_key({"x"}), bytes("payload")));
  EXPECT_FALSE(cache.get(cache_key({"x"})));
  ScopedEnv env("SYNK_CACHE_DIR", "/proc/synk-cannot-exist/cache");
  ir::Module m = dsl::compile_source("t.synk", "fn f(bcast x: f32[n]) { out y: none = x * 7 + 0.25; }");
  auto fn = compile_cpu_function(m, "f", {.use_disk_cache = true});
  rt::Array x;
  x.resize(rt::DType::F32, {3});
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = float(i);
  std::vector<rt::ArrayRef> in{x.ref()};
  std::vector<rt::Array> out(1), ups;
  fn->run(in, {}, out, ups);
  EXPECT_EQ(out[0].data<float>()[2], 14.25f);
}

// A program with a unique constant so that no earlier test or run has it cached.
std::string unique_program(const char* tag) {
  return fmt::format("fn f(bcast x: f64[n]) {{ out y: none = exp(x) * {}; out s: none = sum(x * x); }} // {}",
                     std::random_device{}() % 100000 + 1, tag);
}

TEST(KernelCache, JitUsesTheCacheAndRebuildsCorruptEntries) {
  std::string dir = fresh_dir("jit");
  ScopedEnv env("SYNK_CACHE_DIR", dir.c_str());
  ir::Module m = dsl::compile_source("t.synk", unique_program("jit"));
  auto first = compile_cpu_function(m, "f");
  EXPECT_EQ(first->cache_outcome(), CacheOutcome::Compiled);
  EXPECT_EQ(compile_cpu_function(m, "f")->cache_outcome(), CacheOutcome::MemoryHit);
  clear_memory_cache_for_tests();
  EXPECT_EQ(compile_cpu_function(m, "f")->cache_outcome(), CacheOutcome::DiskHit);
  // Truncate the one entry: the next compile detects it, compiles again and rewrites it.
  std::vector<std::string> entries = list_dir(dir);
  ASSERT_EQ(entries.size(), 1u);
  std::string path = dir + "/" + entries[0];
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  clear_memory_cache_for_tests();
  auto rebuilt = compile_cpu_function(m, "f");
  EXPECT_EQ(rebuilt->cache_outcome(), CacheOutcome::Compiled);
  clear_memory_cache_for_tests();
  EXPECT_EQ(compile_cpu_function(m, "f")->cache_outcome(), CacheOutcome::DiskHit);
  // Every variant computes the same thing.
  rt::Array x;
  x.resize(rt::DType::F64, {4});
  for (int i = 0; i < 4; ++i) x.data<double>()[i] = 0.5 * i;
  std::vector<rt::ArrayRef> in{x.ref()};
  std::vector<rt::Array> a(2), b(2), ups;
  first->run(in, {}, a, ups);
  rebuilt->run(in, {}, b, ups);
  EXPECT_EQ(a[0].bytes, b[0].bytes);
  EXPECT_DOUBLE_EQ(a[1].data<double>()[0], 0.25 + 1 + 2.25);
}

TEST(KernelCache, KernelsCompiledOnSeveralThreadsShareOneEntry) {
  // Five kernels (reductions along different axes do not fuse): enough text for three units.
  std::string program = fmt::format(
      "fn f(bcast x: f64[n, 6]) {{ out a: none = sum(exp(x) * {}, axis=0); out b: none = max(tanh(x), axis=1); "
      "out c: none = sum(log(x * x + 1.0), axis=1); out d: none = min(x * 3.0, axis=0); "
      "out e: none = mean(exp(-x)); }} // threads",
      std::random_device{}() % 100000 + 1);
  ir::Module m = dsl::compile_source("t.synk", program);
  std::string dir = fresh_dir("threads");
  ScopedEnv env("SYNK_CACHE_DIR", dir.c_str());
  std::unique_ptr<CpuFunction> split, whole;
  {
    ScopedEnv threads("SYNK_JIT_THREADS", "3");
    ASSERT_EQ(jit_compile_threads(), 3);
    std::vector<std::string> units = split_translation_units(
        generate_cpu_source_parts(m, lower(m, *m.find_function("f"), {})), jit_compile_threads());
    ASSERT_EQ(units.size(), 3u) << "the program is meant to be large enough for three units";
    CpuSourceParts parts = generate_cpu_source_parts(m, lower(m, *m.find_function("f"), {}));
    std::string rejoined = parts.head;
    for (const std::string& u : units) {
      ASSERT_EQ(u.compare(0, parts.head.size(), parts.head), 0) << "every unit starts with the prelude";
      rejoined += u.substr(parts.head.size());
    }
    EXPECT_EQ(rejoined, parts.joined()) << "every kernel once, in order";
    EXPECT_EQ(split_translation_units(parts, 1), std::vector<std::string>{parts.joined()});
    CpuSourceParts tiny{parts.head, {"// k0\n", "// k1\n"}};
    EXPECT_EQ(split_translation_units(tiny, 4).size(), 1u) << "too little kernel text to share";
    split = compile_cpu_function(m, "f");
    EXPECT_EQ(split->cache_outcome(), CacheOutcome::Compiled);
    std::vector<std::string> entries = list_dir(dir);
    ASSERT_EQ(entries.size(), 1u) << "the units' objects are one entry";
    std::ifstream in(dir + "/" + entries[0], std::ios::binary);
    std::string entry{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_NE(entry.find("SYNKOBJS"), std::string::npos) << "an entry of several objects";
    clear_memory_cache_for_tests();
    EXPECT_EQ(compile_cpu_function(m, "f")->cache_outcome(), CacheOutcome::DiskHit);
  }
  {
    ScopedEnv threads("SYNK_JIT_THREADS", "1");
    clear_memory_cache_for_tests();
    whole = compile_cpu_function(m, "f", {.use_disk_cache = false});
    EXPECT_EQ(whole->cache_outcome(), CacheOutcome::Compiled);
  }
  {
    ScopedEnv threads("SYNK_JIT_THREADS", "0");   // out of range: the default
    EXPECT_GE(jit_compile_threads(), 1);
    EXPECT_LE(jit_compile_threads(), 4);
  }
  rt::Array x;
  x.resize(rt::DType::F64, {5, 6});
  for (int i = 0; i < 30; ++i) x.data<double>()[i] = 0.1 * i - 1.3;
  std::vector<rt::ArrayRef> in{x.ref()};
  std::vector<rt::Array> a(5), b(5), ups;
  split->run(in, {}, a, ups);
  whole->run(in, {}, b, ups);
  for (size_t o = 0; o < 5; ++o) EXPECT_EQ(a[o].bytes, b[o].bytes) << "output " << o;
}

TEST(KernelCache, ConcurrentCompilesFromForkedProcesses) {
  std::string dir = fresh_dir("concurrent");
  ScopedEnv env("SYNK_CACHE_DIR", dir.c_str());
  const std::string program = unique_program("concurrent");
  const int kProcesses = 6;
  for (int round = 0; round < 2; ++round) {   // round 0 races to create, round 1 races to read
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        int status = 1;
        try {
          clear_memory_cache_for_tests();
          ir::Module m = dsl::compile_source("t.synk", program);
          auto fn = compile_cpu_function(m, "f");
          rt::Array x;
          x.resize(rt::DType::F64, {3});
          x.data<double>()[0] = 1, x.data<double>()[1] = 2, x.data<double>()[2] = 3;
          std::vector<rt::ArrayRef> in{x.ref()};
          std::vector<rt::Array> out(2), ups;
          fn->run(in, {}, out, ups);
          bool ok = out[1].data<double>()[0] == 14.0;
          if (round == 1) ok = ok && fn->cache_outcome() == CacheOutcome::DiskHit;
          status = ok ? 0 : 2;
        } catch (...) {
          status = 3;
        }
        ::_exit(status);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round << ", child status " << status;
    }
    // Exactly one entry, no temporary files left behind, and it is valid.
    std::vector<std::string> entries = list_dir(dir);
    ASSERT_EQ(entries.size(), 1u) << fmt::format("{}", fmt::join(entries, " "));
    EXPECT_EQ(entries[0].size(), 34u);
    EXPECT_TRUE(KernelCache(dir).get(entries[0].substr(0, 32)));
  }
}

}  // namespace
}  // namespace synk::compiler
