// Tests of the shared-memory building blocks: segments (mode 0600, unguessable names, removal),
// the Store, futex waits and the barrier, each across real fork()s.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <regex>

#include "base/errors.h"
#include "runtime/group/futex.h"
#include "runtime/group/shm.h"
#include "runtime/group/store.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::rt;

namespace {

// Runs `child` in a forked process; returns its exit status (0 = success).
template <class F>
int in_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST(Shm, NamesAreUnguessableAndPrivate) {
  EXPECT_TRUE(std::regex_match(shm::session_prefix(), std::regex("synk-[0-9]+-[0-9]+-[0-9a-f]{16}-")));
  EXPECT_EQ(shm::owner_of(shm::session_prefix() + "x")->pid, getpid());
  EXPECT_NE(shm::random_hex(16), shm::random_hex(16));
  std::string name = shm::unique_name(shm::process_prefix(), "t");
  {
    shm::Segment seg = shm::Segment::create(name, 4096);
    struct stat st;
    ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_GE(seg.size(), 4096u);
    EXPECT_THROW(shm::Segment::create(name, 4096), Error);   // never reuses a name
  }
  EXPECT_TRUE(shm::list(name).empty()) << "the owner's destructor removes the name";
}

TEST(Shm, ChildSeesWritesAndRemoveAllCleans) {
  std::string prefix = shm::unique_name(shm::process_prefix(), "grp") + "-";
  shm::Segment a = shm::Segment::create(prefix + "a", 1 << 20);
  std::strcpy(reinterpret_cast<char*>(a.data()), "hello");
  int rc = in_child([&] {
    shm::Segment b = shm::Segment::open(prefix + "a");
    if (std::strcmp(reinterpret_cast<char*>(b.data()), "hello") != 0) return 1;
    std::strcpy(reinterpret_cast<char*>(b.data()), "world");
    shm::Segment c = shm::Segment::create(prefix + "b", 100);
    c.release_name();   // leave it behind, as a crashed process would
    return 0;
  });
  ASSERT_EQ(rc, 0);
  EXPECT_STREQ(reinterpret_cast<char*>(a.data()), "world");
  EXPECT_EQ(shm::list(prefix).size(), 2u);
  EXPECT_EQ(shm::remove_all(prefix), 2u);
  EXPECT_TRUE(shm::list(prefix).empty());
  a.release_name();
  EXPECT_THROW(shm::Segment::open(prefix + "missing"), InternalError);
}

TEST(Store, SetGetOverwriteAcrossProcesses) {
  std::string name = shm::unique_name(shm::process_prefix(), "store");
  Store store = Store::create(name, 1 << 16);
  store.set("a", "1");
  store.set("b", std::string("\0bin\0", 5));
  store.set("a", "2");
  EXPECT_EQ(store.get("a"), "2");
  EXPECT_EQ(store.get("b"), std::string("\0bin\0", 5));
  EXPECT_FALSE(store.get("c").has_value());
  int rc = in_child([&] {
    Store child = Store::open(name);
    if (child.get("a") != "2") return 1;
    usleep(20000);
    child.set("c", "from child");
    return 0;
  });
  // The child set "c" after a delay; wait() finds it (the child has exited by now, so this also
  // checks a late reader).
  ASSERT_EQ(rc, 0);
  WaitPolicy policy{1000, 1'000'000};
  EXPECT_EQ(store.wait("c", policy, [] {}), "from child");
  EXPECT_THROW(store.set("big", std::string(1 << 17, 'x')), Error);
  EXPECT_EQ(store.get("a"), "2") << "a failed set leaves the store usable";
}

// A reader indexes the log as far as it read it: entries set after a get, by this process or
// another, and keys set again, are found by the next get, latest value first.
TEST(Store, AGetSeesWhatWasSetSinceTheLastGet) {
  std::string name = shm::unique_name(shm::process_prefix(), "store");
  Store store = Store::create(name, 1 << 20);
  for (int i = 0; i < 2000; ++i) {
    store.set(fmt::format("k{}", i % 700), fmt::format("v{}", i));
    if (i % 3 == 0) ASSERT_EQ(store.get(fmt::format("k{}", i % 700)), fmt::format("v{}", i));
  }
  for (int k = 0; k < 700; ++k) {
    const int last = k + 700 * ((1999 - k) / 700);
    ASSERT_EQ(store.get(fmt::format("k{}", k)), fmt::format("v{}", last));
  }
  EXPECT_FALSE(store.get("k700").has_value());
  int rc = in_child([&] {
    Store child = Store::open(name);
    child.set("k5", "from child");
    child.set("k700", "new");
    return child.get("k5") == "from child" ? 0 : 1;
  });
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(store.get("k5"), "from child");
  EXPECT_EQ(store.get("k700"), "new");
}

TEST(Store, WaitWakesWhenAnotherProcessSets) {
  std::string name = shm::unique_name(shm::process_prefix(), "store");
  Store store = Store::create(name, 1 << 16);
  pid_t pid = ::fork();
  if (pid == 0) {
    Store child = Store::open(name);
    WaitPolicy policy{0, 5'000'000};
    int polls = 0;
    std::string v = child.wait("go", policy, [&] {
      if (++polls > 2000) _exit(3);   // ten seconds: give up rather than hang the test
    });
    child.set("reply", v + "!");
    _exit(0);
  }
  usleep(10000);
  store.set("go", "ping");
  WaitPolicy policy{0, 5'000'000};
  EXPECT_EQ(store.wait("reply", policy, [] {}), "ping!");
  int status;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Futex, WaitTimesOutAndPollCanAbort) {
  WaitWord word;
  int polls = 0;
  WaitPolicy policy{1000, 1'000'000};
  EXPECT_THROW(wait_until(word, [](uint32_t v) { return v == 1; }, policy,
                          [&] { if (++polls == 3) throw Error("gave up"); }),
               Error);
  EXPECT_EQ(polls, 3);
}

TEST(Futex, PingPongAndBarrierAcrossProcesses) {
  std::string name = shm::unique_name(shm::process_prefix(), "ff");
  shm::Segment seg = shm::Segment::create(name, 4096);
  struct Shared {
    WaitWord ping, pong;
    SharedBarrier barrier;
    std::atomic<int> counter;
  };
  auto* s = new (seg.data()) Shared();
  s->barrier.parties = 3;
  const int rounds = 2000;
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = ::fork();
    if (pid == 0) {
      WaitPolicy policy{k == 0 ? 20'000 : 0, 2'000'000};
      int polls = 0;
      auto poll = [&] { if (++polls > 5000) _exit(9); };
      if (k == 0)
        for (int i = 1; i <= rounds; ++i) {
          wait_until(s->ping, [i](uint32_t v) { return v == uint32_t(i); }, policy, poll);
          s->pong.store(uint32_t(i));
        }
      for (int b = 0; b < 50; ++b) {
        s->counter.fetch_add(1);
        s->barrier.arrive_and_wait(policy, poll);
        // After every barrier, all three have added for this round.
        if (s->counter.load() < 3 * (b + 1)) _exit(5);
        s->barrier.arrive_and_wait(policy, poll);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  WaitPolicy policy{20'000, 2'000'000};
  for (int i = 1; i <= rounds; ++i) {
    s->ping.store(uint32_t(i));
    wait_until(s->pong, [i](uint32_t v) { return v == uint32_t(i); }, policy, [] {});
  }
  for (int b = 0; b < 50; ++b) {
    s->counter.fetch_add(1);
    s->barrier.arrive_and_wait(policy, [] {});
    EXPECT_GE(s->counter.load(), 3 * (b + 1));
    s->barrier.arrive_and_wait(policy, [] {});
  }
  for (pid_t pid : kids) {
    int status;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

TEST(Shm, AForkedCopyNeverRemovesTheCreatorsName) {
  // A child forked from the creator (not through synk::fork) that destroys its copy of a segment,
  // e.g. a Python os.fork() child finalising its objects at exit, leaves the name to the creator.
  shm::Segment seg = shm::Segment::create(shm::unique_name(shm::process_prefix(), "f"), 64);
  const std::string name = seg.name();
  EXPECT_EQ(in_child([&] {
              shm::Segment copy = std::move(seg);
              copy.reset();
              return 0;
            }),
            0);
  EXPECT_NO_THROW(shm::Segment::open(name));
  seg.reset();   // the creator still removes it
  EXPECT_THROW(shm::Segment::open(name), InternalError);
}

TEST(Shm, NothingLeftBehind) {
  // Runs last in this file's order of declaration, but ctest runs each test alone: this checks a
  // fresh process creates and removes everything it uses.
  { shm::Segment seg = shm::Segment::create(shm::unique_name(shm::process_prefix(), "x"), 10); }
  EXPECT_TRUE(synk::testing::leftover_segments().empty());
}
