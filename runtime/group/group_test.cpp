// Multi-process tests of the process group (real forks): fork/close/re-fork, distribution of
// functions and modules registered before and after the fork, per-rank shared values, rank
// handlers with barriers, small results inline in a rank's completion. Each checks /dev/shm is left clean. Faults: faults_test.cpp.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "runtime/group/backend.h"
#include "runtime/group/process_group.h"
#include "runtime/call/registry.h"
#include "synk/core.h"
#include "synk/synk.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)

namespace {


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
  if (!synk::rt::probe_gpus().usable) {   // with a GPU, compiler/cuda_group_test covers Backend::Gpu
    try {
      synk::fork(2, Backend::Gpu);
      ADD_FAILURE();
    } catch (const UsageError& e) {
      EXPECT_HAS(e.what(), "Backend::Gpu: no CUDA GPU");
    }
  }
  EXPECT_FALSE(synk::forked());
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Group, WaitPolicyFromOptionsEnvironmentOrCoreCount) {
  using synk::rt::ProcessGroup;
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cores = CPU_COUNT(&mask);
  unsetenv("SYNK_SPIN_US");
  unsetenv("SYNK_YIELD_US");
  {   // a core per rank: spin 50 us, then poll yielding for 2 ms
    auto g = ProcessGroup::start(1, Backend::Cpu, {});
    EXPECT_EQ(g->wait_policy().spin_ns, 50'000);
    EXPECT_EQ(g->wait_policy().yield_ns, 2'000'000);
  }
  {   // more ranks than cores: no spinning, a short yield phase
    auto g = ProcessGroup::start(cores + 1, Backend::Cpu, {});
    EXPECT_EQ(g->wait_policy().spin_ns, 0);
    EXPECT_EQ(g->wait_policy().yield_ns, 50'000);
  }
  setenv("SYNK_SPIN_US", "7", 1);
  setenv("SYNK_YIELD_US", "300", 1);
  {
    auto g = ProcessGroup::start(1, Backend::Cpu, {});
    EXPECT_EQ(g->wait_policy().spin_ns, 7'000);
    EXPECT_EQ(g->wait_policy().yield_ns, 300'000);
  }
  {   // explicit options win over the environment
    auto g = ProcessGroup::start(1, Backend::Cpu, {.spin_ns = 0, .yield_ns = 11});
    EXPECT_EQ(g->wait_policy().spin_ns, 0);
    EXPECT_EQ(g->wait_policy().yield_ns, 11);
  }
  for (const char* bad : {"abc", "-5", "12us", "99999999999"}) {
    setenv("SYNK_YIELD_US", bad, 1);
    try {
      synk::fork(2);
      ADD_FAILURE() << "SYNK_YIELD_US=" << bad << " must be refused";
      synk::close();
    } catch (const UsageError& e) {
      EXPECT_HAS(e.what(), "SYNK_YIELD_US must be a whole number of microseconds");
      EXPECT_HAS(e.what(), std::string("'") + bad + "'");
    }
  }
  unsetenv("SYNK_SPIN_US");
  unsetenv("SYNK_YIELD_US");
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
    rt::Array& s = rt::module_on_rank(ctx, module_id).values[0];
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

namespace {
// Each worker publishes 100 + its rank and sums what its peers published; with payload "fail",
// rank 2 fails before publishing and its peers must see that instead of waiting for it.
void exchange_inline(rt::RankContext& ctx, std::string_view payload) {
  if (payload == "fail" && ctx.rank() == 2) throw std::runtime_error("rank two refuses");
  int32_t mine = 100 + ctx.rank();
  std::memcpy(ctx.inline_results().data(), &mine, sizeof mine);
  ctx.publish_inline();
  int32_t peers = 0;
  for (int r = 1; r < ctx.size(); ++r) {
    if (r == ctx.rank()) continue;
    std::span<const std::byte> theirs = ctx.peer_inline(r);
    if (theirs.empty()) throw std::runtime_error(fmt::format("peer {} failed", r));
    int32_t v;
    std::memcpy(&v, theirs.data(), sizeof v);
    peers += v;
  }
  std::memcpy(ctx.inline_results().data() + sizeof mine, &peers, sizeof peers);
}
const rt::CommandKind kExchangeInline = rt::register_command("exchange inline", exchange_inline);
}  // namespace

TEST(Group, InlineResultsReachTheMasterAndPeersOrTheirFailureDoes) {
  ASSERT_EQ(synk::fork(4), 4);
  rt::ProcessGroup& g = *synk::current_group();
  for (int round = 0; round < 200; ++round) {
    const std::vector<std::string>& errors = g.run(kExchangeInline, "ok", nullptr);
    for (int r = 1; r < 4; ++r) {
      ASSERT_EQ(errors[size_t(r)], "");
      int32_t got[2];
      std::memcpy(got, g.worker_inline_results(r).data(), sizeof got);
      EXPECT_EQ(got[0], 100 + r);
      EXPECT_EQ(got[1], 101 + 102 + 103 - (100 + r)) << "rank " << r << " read its peers' values";
    }
  }
  const std::vector<std::string>& errors = g.run(kExchangeInline, "fail", nullptr);
  EXPECT_EQ(errors[2], "rank two refuses");
  EXPECT_EQ(errors[1], "peer 2 failed");
  // Rank 1's failure is published like rank 2's: rank 3 may read either first.
  EXPECT_TRUE(errors[3] == "peer 2 failed" || errors[3] == "peer 1 failed") << errors[3];
  EXPECT_TRUE(g.run(kExchangeInline, "ok", nullptr)[1].empty()) << "the group stays usable";
  synk::close();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Group, ARankThatSkipsTheBarrierIsNamedAndTheGroupStaysUsable) {
  Module m = synk::module(counter_module());
  int32_t module_id = m.id();
  // Payload "<rank> <rounds>": every rank meets the others `rounds` times, but `rank` ends at once.
  synk::register_rank_handler("skip_barrier", [module_id](rt::RankContext& ctx, std::string_view payload) {
    const size_t space = payload.find(' ');
    const int skipper = std::stoi(std::string(payload.substr(0, space)));
    const int rounds = std::stoi(std::string(payload.substr(space + 1)));
    if (ctx.rank() == skipper) return;
    for (int round = 0; round < rounds; ++round) ctx.barrier();
    *rt::module_on_rank(ctx, module_id).values[0].data<double>() = double(rounds);
  });
  ASSERT_EQ(synk::fork(4), 4);
  for (int skipper : {2, 0}) {
    try {
      synk::run_on_all_ranks("skip_barrier", fmt::format("{} 3", skipper));
      ADD_FAILURE() << "expected a RankError";
    } catch (const RankError& e) {
      EXPECT_HAS(e.what(), fmt::format("ended the command without reaching the barrier"));
      EXPECT_HAS(e.what(), fmt::format("rank {} ended", skipper));
      EXPECT_FALSE(e.group_lost());
    }
    synk::run_on_all_ranks("skip_barrier", "-1 5");   // every rank meets the others again
    for (int r = 0; r < 4; ++r) EXPECT_EQ(scalar(m.get_value(r, "s")), 5.0);
  }
  synk::close();
  EXPECT_TRUE(leftover_segments().empty());
}

// std::bad_alloc's own text ("std::bad_alloc") names no cause: a rank that runs out of memory says
// so, on a worker and on the master.
TEST(Group, ARankOutOfMemoryIsNamedAsSuch) {
  synk::register_rank_handler("bad_alloc", [](rt::RankContext& ctx, std::string_view payload) {
    if (ctx.rank() == std::stoi(std::string(payload))) throw std::bad_alloc();
  });
  // A finite ulimit -v (1 TiB, far above what the test maps) is named with its value.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  rlimit one_tib = saved;
  one_tib.rlim_cur = rlim_t(1) << 40;
  const bool limited = (saved.rlim_max == RLIM_INFINITY || saved.rlim_max >= one_tib.rlim_cur) &&
                       ::setrlimit(RLIMIT_AS, &one_tib) == 0;
  ASSERT_EQ(synk::fork(2), 2);
  for (int rank : {1, 0}) {
    try {
      synk::run_on_all_ranks("bad_alloc", std::to_string(rank));
      ADD_FAILURE() << "expected a RankError";
    } catch (const RankError& e) {
      EXPECT_HAS(e.what(), "out of memory (std::bad_alloc)");
      if (limited) EXPECT_HAS(e.what(), "; ulimit -v is 1073741824 here (1048576 MiB)");
      EXPECT_EQ(e.ranks(), std::vector<int>{rank});
    }
  }
  synk::close();
  if (limited) ::setrlimit(RLIMIT_AS, &saved);
  EXPECT_TRUE(leftover_segments().empty());
}
