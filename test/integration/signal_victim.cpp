// The program runtime/group/signals_test.cpp kills: a synk master with RANKS ranks, a Data and a
// shared variable, that keeps calling a function until a signal ends it. Usage:
//   signal_victim MODE RANKS FD
// It writes "pid <pid>" to FD at once and "ready" after its first call, then, by MODE:
//   loop   calls forever;
//   print  calls forever and prints a line to stdout after each (for a closed pipe: SIGPIPE);
//   crash  makes every rank, itself included, crash with SIGSEGV at the same moment;
//   leak   (stale-segment test) like loop: the test SIGKILLs the whole group.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/testing.h"
#include "synk/synk.h"
#include "runtime/group/process_group.h"

namespace {

void say(int fd, const std::string& line) {
  std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) < 0) _exit(90);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: signal_victim loop|print|crash|leak RANKS FD\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int ranks = std::atoi(argv[2]);
  const int fd = std::atoi(argv[3]);
  say(fd, "pid " + std::to_string(getpid()));
  synk::register_rank_handler("crash", [](synk::rt::RankContext& ctx, std::string_view) {
    ctx.barrier();
    volatile int* nowhere = nullptr;
    *nowhere = 1;   // every rank at once, as a kernel bug would
  });
  synk::Module m = synk::module(synk::testing::counter_module());
  synk::Function f = synk::function(synk::testing::counting_function(1), m);
  synk::fork(ranks);
  synk::Data x = synk::testing::rows_data(std::vector<float>(size_t(64 * ranks), 1.0f));
  synk::Data other = synk::data(synk::DType::F64, {1024, 16});
  f({x});
  say(fd, "ready");
  if (mode == "crash") synk::run_on_all_ranks("crash", "");
  for (long i = 0;; ++i) {
    f({x});
    if (mode == "print") {
      std::printf("call %ld\n", i);
      std::fflush(stdout);
    }
  }
}
