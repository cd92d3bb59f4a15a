// Multi-process tests of the process group (real forks): fork/close/re-fork, distribution of
// functions and modules registered before and after the fork, per-rank shared values, rank
// handlers with barriers, and every fault path: a rank that throws, a worker killed during a
// call or while idle, a master that dies. Each checks /dev/shm is left clean.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/synk.h"
#include "runtime/testing.h"

using namespace synk;
using synk::testing::fixed;
using synk::testing::input;
using synk::testing::LambdaFunction;
using synk::testing::leftover_segments;
using synk::testing::output;
using synk::testing::sym;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// f(x: f32[n, 1]) -> count: i64 sum = rows * scale. Rows equal to 666 throw; 777 kill the rank;
// 888 make the rank sleep for 3 s.
std::shared_ptr<rt::CompiledFunction> counting_function(int64_t scale, std::string name = "count_rows") {
  rt::FunctionSignature sig;
  sig.name = std::move(name);
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F32, {sym(0), fixed(1)})};
  sig.outputs = {output("count", ReduceMode::Sum, DType::I64, {})};
  sig.shareds_read = {0};
  sig.updates = {rt::UpdateSpec{0, ReduceMode::Sum}};
  return std::make_shared<LambdaFunction>(sig, [scale](auto in, auto sh, auto out, auto upd) {
    const float* x = synk::testing::ptr<float>(in[0]);
    for (int64_t i = 0; i < in[0].shape[0]; ++i) {
      if (x[i] == 666) throw std::runtime_error("row 666 is poison");
      if (x[i] == 777) raise(SIGKILL);
      if (x[i] == 888) usleep(3'000'000);
    }
    out[0].resize(DType::I64, {});
    *out[0].template data<int64_t>() = in[0].shape[0] * scale;
    // The shared counter s: f64[] becomes s + rows.
    upd[0].resize(DType::F64, {});
    *upd[0].template data<double>() = *synk::testing::ptr<double>(sh[0]) + double(in[0].shape[0]);
  });
}

rt::ModuleSpec counter_module() {
  rt::ModuleSpec spec;
  spec.shareds = {synk::testing::shared("s", DType::F64, {})};
  return spec;
}

Data rows_data(const std::vector<float>& values) {
  return synk::data<float>(values, {int64_t(values.size()), 1}, {.name = "x"});
}

double scalar(const Array& a) { return a.dtype == DType::F64 ? *a.data<double>() : double(*a.data<int64_t>()); }

bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.substr(close_paren + 2, 1) == "Z";
}

}  // namespace

TEST(Group, ForkCloseAndForkAgain) {
  EXPECT_FALSE(synk::forked());
  EXPECT_HAS([] { try { synk::size(); } catch (const UsageError& e) { return std::string(e.what()); } return std::string(); }(),
             "no process group is running; call synk::fork() first");
  ASSERT_EQ(synk::fork(3), 3);
  EXPECT_TRUE(synk::forked());
  std::vector<pid_t> pids = {synk::worker_pid(1), synk::worker_pid(2)};
  EXPECT_EQ(synk::worker_pid(0), getpid());
  for (pid_t p : pids) EXPECT_EQ(kill(p, 0), 0);
  EXPECT_FALSE(leftover_segments().empty());
  try {
    synk::fork(2);
    ADD_FAILURE() << "a second fork must fail";
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "already running");
  }
  synk::close();
  synk::close();   // idempotent
  for (pid_t p : pids) EXPECT_TRUE(process_gone(p));
  EXPECT_TRUE(leftover_segments().empty());
  ASSERT_EQ(synk::fork(1), 1);
  synk::close();
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  EXPECT_EQ(synk::fork(0), CPU_COUNT(&mask)) << "n = 0 means one rank per allowed core";
  synk::close();
  EXPECT_THROW(synk::fork(-2), UsageError);
  try {
    synk::fork(2, Backend::Gpu);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "GPU backend is not built yet");
  }
  EXPECT_FALSE(synk::forked());
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Group, FunctionsAndModulesRegisteredBeforeAndAfterFork) {
  synk::register_loader("scaled", [](const std::string& payload) {
    return counting_function(std::stoll(payload), "scaled_" + payload);
  });
  Module m = synk::module(counter_module());
  Function before = synk::function(counting_function(1), m);
  ASSERT_EQ(synk::fork(3), 3);
  Data x = rows_data(std::vector<float>(10, 1.0f));
  EXPECT_EQ(scalar(before({x})[0]), 10);
  Function after = synk::function(counting_function(5, "scaled_5"), m, "scaled", "5");
  EXPECT_EQ(scalar(after({x})[0]), 50) << "workers rebuilt it from its payload";
  try {
    synk::function(counting_function(2), m);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "registered after fork() without a kind");
  }
  try {
    synk::function(counting_function(2), m, "nobody", "2");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "kind 'nobody' has no loader in the workers");
  }
  // A module registered after the fork: every worker initialises its own copy.
  rt::ModuleSpec late;
  late.shareds = {synk::testing::shared("r", DType::F64, {fixed(4)}, rt::InitSpec{rt::InitSpec::Kind::Uniform, 0, 1, 7})};
  Module m2 = synk::module(late);
  synk::distribute();
  synk::distribute();   // repeatable
  Array master = m2.get_value("r");
  for (int r = 1; r < 3; ++r) EXPECT_EQ(m2.get_value(r, "r").bytes, master.bytes);
  synk::close();
  // After a new fork, everything registered so far is inherited.
  ASSERT_EQ(synk::fork(2), 2);
  EXPECT_EQ(scalar(after({x})[0]), 50);
  EXPECT_EQ(m2.get_value(1, "r").bytes, master.bytes);
  synk::close();
  x = Data();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Group, SharedValuesPerRank) {
  Module m = synk::module(counter_module());
  Function f = synk::function(counting_function(1), m);
  ASSERT_EQ(synk::fork(3), 3);
  m.set_value(2, "s", std::vector<double>{100.0}, {});
  EXPECT_EQ(scalar(m.get_value(2, "s")), 100);
  EXPECT_EQ(scalar(m.get_value(1, "s")), 0);
  Data x = rows_data(std::vector<float>(9, 1.0f));
  f({x});   // each rank adds its 3 rows to its own s
  EXPECT_EQ(scalar(m.get_value(0, "s")), 3);
  EXPECT_EQ(scalar(m.get_value(1, "s")), 3);
  EXPECT_EQ(scalar(m.get_value(2, "s")), 103);
  EXPECT_EQ(scalar(m.get_value("s")), 3);
  auto msg = [](auto f) { try { f(); } catch (const UsageError& e) { return std::string(e.what()); } return std::string("<none>"); };
  EXPECT_HAS(msg([&] { m.get_value(3, "s"); }), "get_value: rank must be in [0, 3), received 3");
  EXPECT_HAS(msg([&] { m.get_value(-1, "s"); }), "received -1");
  EXPECT_HAS(msg([&] { m.get_value(1, "t"); }), "no shared variable named 't' (the module has: s)");
  EXPECT_HAS(msg([&] { m.set_value(1, "s", std::vector<double>{1, 2}, {2}); }), "expected a value with 0 dimensions");
  m.set_value(1, "s", std::vector<float>{4}, {});   // f32 -> f64 is a safe cast
  EXPECT_EQ(scalar(m.get_value(1, "s")), 4);
  synk::close();
}

TEST(Group, RankHandlersRunEverywhereWithBarriers) {
  Module m = synk::module(counter_module());
  int32_t module_id = m.id();
  synk::register_rank_handler("stamp", [module_id](rt::RankContext& ctx, std::string_view payload) {
    for (int round = 0; round < 20; ++round) ctx.barrier();
    if (payload == "fail" && ctx.rank() == 2) throw std::runtime_error("rank two refuses");
    rt::Array& s = ctx.module(module_id).values[0];
    *s.data<double>() = 10.0 * ctx.rank() + double(payload.size());
  });
  ASSERT_EQ(synk::fork(4), 4);
  synk::run_on_all_ranks("stamp", "ab");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(scalar(m.get_value(r, "s")), 10.0 * r + 2);
  try {
    synk::run_on_all_ranks("stamp", "fail");
    ADD_FAILURE();
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "stamp failed on rank 2: rank two refuses");
    EXPECT_EQ(e.ranks(), std::vector<int>{2});
    EXPECT_FALSE(e.group_lost());
  }
  synk::run_on_all_ranks("stamp", "abc");   // still usable
  EXPECT_EQ(scalar(m.get_value(3, "s")), 33);
  EXPECT_THROW(synk::run_on_all_ranks("nope", ""), UsageError);
  synk::close();
}

TEST(Faults, RankThatThrowsFailsTheCallEverywhereAndUpdatesNothing) {
  Module m = synk::module(counter_module());
  Function f = synk::function(counting_function(1), m);
  for (int n : {1, 3}) {
    ASSERT_EQ(synk::fork(n), n);
    std::vector<float> rows(9, 1.0f);
    rows[8] = 666;   // the last rank's rows
    Data bad = rows_data(rows);
    try {
      f({bad});
      ADD_FAILURE();
    } catch (const RankError& e) {
      EXPECT_HAS(e.what(), "count_rows failed on rank " + std::to_string(n - 1) + ": row 666 is poison");
      EXPECT_EQ(e.ranks(), std::vector<int>{n - 1});
      EXPECT_FALSE(e.group_lost());
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(scalar(m.get_value(r, "s")), 0) << "no rank applied its update";
    Data good = rows_data(std::vector<float>(9, 1.0f));
    EXPECT_EQ(scalar(f({good})[0]), 9);
    for (int r = 0; r < n; ++r) EXPECT_EQ(scalar(m.get_value(r, "s")), 9 / n);
    m.set_value("s", std::vector<double>{0}, {});
    synk::close();
  }
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Faults, WorkerKilledDuringACall) {
  Module m = synk::module(counter_module());
  Function f = synk::function(counting_function(1), m);
  ASSERT_EQ(synk::fork(3), 3);
  pid_t victim = synk::worker_pid(1);
  std::vector<float> rows(9, 1.0f);
  rows[4] = 777;   // rank 1 kills itself
  Data x = rows_data(rows);
  try {
    f({x});
    ADD_FAILURE();
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9 (SIGKILL)");
    EXPECT_HAS(e.what(), "shut down");
    EXPECT_TRUE(e.group_lost());
    EXPECT_EQ(e.ranks(), std::vector<int>{1});
  }
  EXPECT_FALSE(synk::forked());
  std::vector<std::string> left = leftover_segments();
  // Only the Data x (owned by this process) remains.
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], x.segment_name());
  EXPECT_THROW(f({x}), UsageError);
  ASSERT_EQ(synk::fork(2), 2);
  Data good = rows_data(std::vector<float>(4, 1.0f));
  EXPECT_EQ(scalar(f({good})[0]), 4);
  synk::close();
}

TEST(Faults, WorkerKilledWhileIdleIsNamedAtTheNextCall) {
  Module m = synk::module(counter_module());
  Function f = synk::function(counting_function(1), m);
  ASSERT_EQ(synk::fork(4), 4);
  Data x = rows_data(std::vector<float>(8, 1.0f));
  f({x});
  pid_t victim = synk::worker_pid(2);
  kill(victim, SIGKILL);
  usleep(20'000);
  auto start = std::chrono::steady_clock::now();
  try {
    f({x});
    ADD_FAILURE();
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "rank 2 (pid " + std::to_string(victim) + ") was killed by signal 9 (SIGKILL)");
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[death of an idle worker reported after %.3f s]\n", seconds);
  EXPECT_FALSE(synk::forked());
  x = Data();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Faults, WorkerKilledFromOutsideWhileComputing) {
  Module m = synk::module(counter_module());
  Function f = synk::function(counting_function(1), m);
  ASSERT_EQ(synk::fork(2), 2);
  pid_t victim = synk::worker_pid(1);
  std::vector<float> rows(4, 1.0f);
  rows[3] = 888;   // rank 1 sleeps for 3 s
  Data x = rows_data(rows);
  std::thread killer([victim] {
    usleep(100'000);
    kill(victim, SIGTERM);
  });
  try {
    f({x});
    ADD_FAILURE();
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "rank 1 (pid " + std::to_string(victim) + ") was killed by signal 15 (SIGTERM)");
  }
  killer.join();
  x = Data();
  EXPECT_TRUE(leftover_segments().empty()) << "a SIGTERM while the master lives removes nothing of its own";
}

TEST(Faults, MasterDeathTakesWorkersAndSegmentsWithIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t master = ::fork();
  if (master == 0) {
    // A fresh master process: start a group, make a Data, report, then die abruptly.
    ::close(fds[0]);
    synk::fork(3);
    Data d = synk::data<float>({1, 2, 3}, {3});
    std::string report = rt::shm::process_prefix() + " " + synk::current_group()->segment_prefix() + " " + std::to_string(synk::worker_pid(1)) + " " +
                         std::to_string(synk::worker_pid(2)) + "\n";
    if (write(fds[1], report.data(), report.size()) < 0) _exit(2);
    raise(SIGKILL);
  }
  ::close(fds[1]);
  char buf[256] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  int status;
  waitpid(master, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  char own[128], group[128];
  int w1, w2;
  ASSERT_EQ(std::sscanf(buf, "%127s %127s %d %d", own, group, &w1, &w2), 4);
  auto left = [&] { return rt::shm::list(own).size() + rt::shm::list(group).size(); };
  bool clean = false;
  for (int i = 0; i < 500 && !clean; ++i) {
    clean = process_gone(w1) && process_gone(w2) && left() == 0;
    if (!clean) usleep(10'000);
  }
  EXPECT_TRUE(process_gone(w1));
  EXPECT_TRUE(process_gone(w2));
  EXPECT_EQ(left(), 0u) << "rank 1 removes the dead master's segments (its Data and the group's)";
  rt::shm::remove_all(own);
  rt::shm::remove_all(group);
}

TEST(Faults, WorkerDeathWhileOthersWaitInABarrier) {
  synk::register_rank_handler("die_then_barrier", [](rt::RankContext& ctx, std::string_view) {
    if (ctx.rank() == 2) raise(SIGKILL);
    ctx.barrier();   // everyone else waits for rank 2, which never comes
  });
  ASSERT_EQ(synk::fork(3), 3);
  try {
    synk::run_on_all_ranks("die_then_barrier", "");
    ADD_FAILURE();
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "rank 2 (pid");
    EXPECT_HAS(e.what(), "SIGKILL");
    EXPECT_TRUE(e.group_lost());
  }
  EXPECT_FALSE(synk::forked());
  EXPECT_TRUE(leftover_segments().empty());
}
