// Freeing modules and functions no handle holds (synk/core.h, runtime/call/registry.h): a program
// that makes modules in a loop stays at one module's memory on every rank; a Var, a Function, a
// SharedVariable or a TrainStep keeps its module; a released id stays free on every rank, also
// through distribute() and in workers forked after the release; a handle dropped by another
// thread while calls run is freed by the calling thread.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/call/registry.h"
#include "synk/jit.h"

using namespace synk;

namespace {

// 64 MiB, drawn so that every page is written (and above glibc's largest mmap threshold, so that
// freeing it gives the pages back at once).
constexpr const char* kBigProgram = R"(
shared w: f32[4096, 4096] = uniform(seed=3, low=-1.0, high=1.0);
fn f(scatter x: f32[n, 4]) { out y: sum = sum(x); out m: avg = mean(w); }
)";

constexpr const char* kSmallProgram = R"(
shared w: f32[4, 3] = uniform(seed=1, low=-0.5, high=0.5);
shared b: f32[3];
optimizer opt = sgd(lr=0.1);
fn f(scatter x: f32[n, 4]) { out y: gather = x @ w + b; }
fn train(scatter x: f32[n, 4], scatter y: i64[n]) {
  minimize mean(cross_entropy(x @ w + b, y)) over w, b using opt;
}
)";

int64_t rss_mib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) / 1024;
  return -1;
}

// Which of `ids` (payload: comma-separated) this rank still holds, as the error text.
void register_probe() {
  static bool done = false;
  if (done) return;
  done = true;
  register_rank_handler("release_test_probe", [](rt::RankContext& ctx, std::string_view payload) {
    const rt::Registry& reg = rt::Registry::instance();
    std::string held;
    for (size_t at = 0; at < payload.size();) {
      size_t comma = payload.find(',', at);
      if (comma == std::string_view::npos) comma = payload.size();
      int id = std::stoi(std::string(payload.substr(at, comma - at)));
      if (size_t(id) < reg.modules.size() && reg.modules[size_t(id)]) held += fmt::format("module {} ", id);
      at = comma + 1;
    }
    if (!held.empty()) throw Error(fmt::format("rank {} holds {}", ctx.rank(), held));
  });
}

void expect_freed_everywhere(int32_t id) {
  EXPECT_TRUE(rt::is_released(rt::Released::Module, id));
  EXPECT_TRUE(rt::Registry::instance().modules.at(size_t(id)) == nullptr);
  EXPECT_NO_THROW(run_on_all_ranks("release_test_probe", std::to_string(id)));
}

Data rows(int n) { return data<float>(std::vector<float>(size_t(n) * 4, 0.5f), {n, 4}); }

class Release : public ::testing::Test {
 protected:
  void SetUp() override { register_probe(); }
  void TearDown() override { close(); }
};

TEST_F(Release, ModulesMadeInALoopStayAtOneModulesMemoryOnEveryRank) {
  fork(2);
  Data x = rows(6);
  const int64_t master_before = rss_mib(getpid()), worker_before = rss_mib(worker_pid(1));
  int32_t last = -1;
  for (int i = 0; i < 5; ++i) {
    jit::Module m = jit::compile_string(kBigProgram);
    Outputs y = m.function("f")({x});   // the worker builds the module too
    EXPECT_FLOAT_EQ(to_vector<float>(y[0])[0], 12.0f);
    EXPECT_LT(std::abs(to_vector<float>(y[1])[0]), 0.01f);
    last = m.runtime_module().id();
  }
  distribute();   // a command: the last module goes on the worker too
  // Five modules of 64 MiB: 320 MiB on each rank without freeing, at most one with it.
  EXPECT_LT(rss_mib(getpid()) - master_before, 100);
  EXPECT_LT(rss_mib(worker_pid(1)) - worker_before, 100);
  expect_freed_everywhere(last);
}

TEST_F(Release, EveryKindOfHandleKeepsItsModule) {
  fork(2);
  Data x = rows(4);
  Function f;
  Var b;
  std::optional<SharedVariable> w;
  TrainStep step;
  int32_t id = -1;
  {
    jit::Module m = jit::compile_string(kSmallProgram);
    f = m.function("f");
    b = m.runtime_module().var("b");
    w = m.shared("w");
    step = m.train_step("train");
    id = m.runtime_module().id();
  }
  distribute();
  Data labels = data<int64_t>({0, 1, 2, 0}, {4});
  step({x, labels});
  f = Function();
  distribute();
  EXPECT_FALSE(rt::is_released(rt::Released::Module, id));
  EXPECT_EQ(get_value(1, b).shape, (std::vector<int64_t>{3}));
  b = Var();
  step = TrainStep();
  distribute();
  EXPECT_EQ(w->get_value(1).shape, (std::vector<int64_t>{4, 3}));
  EXPECT_FALSE(rt::is_released(rt::Released::Module, id));
  w.reset();
  distribute();
  expect_freed_everywhere(id);
}

TEST_F(Release, AModuleReleasedBeforeForkIsNotInTheNewWorkers) {
  int32_t id = -1;
  {
    jit::Module m = jit::compile_string(kSmallProgram);
    m.compile_all();
    id = m.runtime_module().id();
  }
  jit::Module kept = jit::compile_string(kSmallProgram);
  fork(2);
  EXPECT_TRUE(rt::is_released(rt::Released::Module, id));
  distribute();   // loads every module and function the master holds, no other
  expect_freed_everywhere(id);
  EXPECT_EQ(kept.function("f")({rows(2)})[0].shape, (std::vector<int64_t>{2, 3}));
}

TEST_F(Release, AHandleDroppedByAnotherThreadIsFreedByTheCallingThread) {
  fork(2);
  Data x = rows(4);
  auto m = std::make_unique<jit::Module>(jit::compile_string(kSmallProgram));
  Function f = m->function("f");
  const int32_t id = m->runtime_module().id();
  f = Function();
  std::thread dropper([&m] { m.reset(); });   // a garbage collector's thread, say
  jit::Module other = jit::compile_string(kSmallProgram);
  Function g = other.function("f");
  for (int i = 0; i < 200; ++i) g({x});
  dropper.join();
  g({x});
  expect_freed_everywhere(id);
}

TEST_F(Release, WithoutAGroupTheMasterFreesAtTheNextModule) {
  int32_t id = -1;
  {
    jit::Module m = jit::compile_string(kSmallProgram);
    EXPECT_EQ(m.function("f").run_local({rows(2)})[0].shape, (std::vector<int64_t>{2, 3}));
    id = m.runtime_module().id();
  }
  EXPECT_FALSE(rt::is_released(rt::Released::Module, id));   // nothing ran since
  jit::Module next = jit::compile_string(kSmallProgram);
  EXPECT_TRUE(rt::is_released(rt::Released::Module, id));
  EXPECT_TRUE(rt::Registry::instance().modules.at(size_t(id)) == nullptr);
}

}  // namespace
