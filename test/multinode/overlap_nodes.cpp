// The overlapped gradient all-reduce across nodes (docs/training.md, "Overlap"), run under mpirun
// (CMakeLists.txt): two copies of one model, trained side by side on the same batches, one with
// TrainStep::set_overlap and one with the one-buffer all_reduce, must hold the same bits on every
// global rank after every setting: equal and unequal rows per rank, a rank without rows, buckets
// of 100 bytes (hundreds of direct exchanges between the leaders), 8 KiB and the 1 MiB default
// (the whole 79 KB gradient in one bucket, which 2 leaders reduce with MPI's blocking all-reduce). The timeline (one file
// per leader) counts the buckets: every rank reduces each bucket, and each leader also reduces it
// with the other nodes (in node order: between 3 or more nodes the leaders split each bucket
// into parts, reduce one each and share them).
// Prints "PASS ..." on every leader, or "FAIL ..." lines.
//
// Fault modes (run_multinode.sh's kill and kill-leader): streamed steps of 100-byte buckets for up
// to 30 s, while NODE kills its worker of local rank 1 (--kill-worker) or itself (--kill-leader)
// 0.3 s in, that is in the middle of a step whose buckets the leaders are exchanging. The job must
// end naming the node and rank, with nothing left behind.
//
//   overlap_nodes RANKS_PER_NODE PREFIX [--kill-worker NODE | --kill-leader NODE]
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "synk/jit.h"
#include "synk/train_step.h"

using namespace synk;

namespace {

constexpr const char* kModel = R"(
shared w1: f32[64, 300] = uniform(seed=3, low=-0.1, high=0.1);
shared b1: f32[300];
shared w2: f32[300, 4] = uniform(seed=4, low=-0.1, high=0.1);
shared b2: f32[4];
optimizer opt = momentum(lr=0.05, momentum=0.9);

fn train(scatter x: f32[n, 64], scatter y: f32[n, 4]) {
  let h = tanh(x @ w1 + b1);
  let d = h @ w2 + b2 - y;
  out loss: avg = mean(d * d);
  minimize mean(d * d) over w1, b1, w2, b2 using opt;
}
)";

constexpr int64_t kGradientBytes = (64 * 300 + 300 + 300 * 4 + 4) * 4;

std::string hex(const Array& a) {
  std::string s;
  for (std::byte b : a.bytes) s += fmt::format("{:02x}", unsigned(b));
  return s;
}

int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// The fault modes: never returns normally (the killed node ends the job).
int run_until_killed(TrainStep& step, const Data& dx, const Data& dy, const std::string& prefix,
                     const std::string& mode, int fault_node) {
  std::ofstream(fmt::format("{}.pid{}", prefix, synk::node())) << getpid() << "\n";   // for the clean-up checks
  std::thread killer;
  if (synk::node() == fault_node)
    killer = std::thread([mode] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (mode == "--kill-worker" && synk::local_size() > 1) kill(synk::worker_pid(1), SIGKILL);
      if (mode == "--kill-leader") raise(SIGKILL);   // the OOM killer: no handler runs
    });
  step.set_overlap(true, 100);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int64_t k = 0; std::chrono::steady_clock::now() < end; ++k) {
    std::vector<int64_t> batch;
    for (int64_t j = 0; j < 8 * synk::size(); ++j) batch.push_back((k * 31 + j * 17) % 400);
    step({dx, dy}, {.batch = batch});
  }
  if (killer.joinable()) killer.join();
  std::printf("FAIL node %d: 30 s of streamed steps and the job still runs\n", synk::node());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: overlap_nodes RANKS_PER_NODE TRACE_PREFIX\n");
    return 2;
  }
  try {
    jit::Module streamed = jit::compile_string(kModel), plain = jit::compile_string(kModel);
    TrainStep a = streamed.train_step("train"), b = plain.train_step("train");
    synk::fork(std::atoi(argv[1]));
    const int ranks = synk::size(), local = synk::local_size();
    const int64_t rows = 400;
    std::vector<float> x, y;
    for (int64_t i = 0; i < rows; ++i) {
      for (int j = 0; j < 64; ++j) x.push_back(float((i * 7 + j * 3) % 23) / 11.0f - 1.0f);
      for (int j = 0; j < 4; ++j) y.push_back(float((i * 5 + j) % 7) * 0.25f);
    }
    Data dx = data<float>(x, {rows, 64}), dy = data<float>(y, {rows, 4});
    if (argc >= 5) return run_until_killed(a, dx, dy, argv[2], argv[3], std::atoi(argv[4]));
    int failures = 0, steps = 0;
    const int kSteps = 3;
    for (int64_t bucket : {int64_t(100), int64_t(8192), int64_t(0)}) {
      // Equal rows; unequal rows; fewer rows than ranks (a rank without rows counts for nothing).
      for (int64_t batch_rows : {int64_t(8 * ranks), int64_t(8 * ranks + 3), int64_t(ranks - 1)}) {
        const std::string trace = fmt::format("{}.b{}r{}.json", argv[2], bucket, batch_rows);
        a.set_overlap(true, bucket);
        synk::trace_start(trace);
        std::vector<Outputs> seen;
        for (int k = 0; k < kSteps; ++k) {
          std::vector<int64_t> batch;
          for (int64_t j = 0; j < batch_rows; ++j) batch.push_back((steps * 31 + j * 17) % rows);
          seen.push_back(a({dx, dy}, {.batch = batch}));
          const Outputs one_buffer = b({dx, dy}, {.batch = batch});
          if (hex(seen.back()[0]) != hex(one_buffer[0])) {
            std::printf("FAIL node %d: bucket %lld, %lld rows, step %d: the loss differs\n", synk::node(),
                        (long long)bucket, (long long)batch_rows, k);
            ++failures;
          }
          ++steps;
        }
        synk::trace_stop();
        for (int r = 0; r < ranks; ++r)
          for (const char* var : {"w1", "b1", "w2", "b2"})
            if (hex(get_value(r, streamed.runtime_module().var(var))) != hex(get_value(r, plain.runtime_module().var(var)))) {
              std::printf("FAIL node %d: bucket %lld, %lld rows: '%s' of global rank %d differs from the one-buffer "
                          "step's\n", synk::node(), (long long)bucket, (long long)batch_rows, var, r);
              ++failures;
            }
        std::ifstream in(fmt::format("{}.node{}", trace, synk::node()));
        std::stringstream text;
        text << in.rdbuf();
        const int64_t size = bucket > 0 ? bucket : int64_t(1) << 20;
        const int per_step = int((kGradientBytes + size - 1) / size);
        const int want = kSteps * per_step * local, want_across = kSteps * per_step;
        const int got = count_of(text.str(), "\"gradient bucket\""), across = count_of(text.str(), "\"bucket across nodes\"");
        if (got != want || across != want_across) {
          std::printf("FAIL node %d: bucket %lld, %lld rows: %d buckets and %d across nodes on the timeline, "
                      "expected %d and %d\n", synk::node(), (long long)bucket, (long long)batch_rows, got, across, want,
                      want_across);
          ++failures;
        }
      }
    }
    if (failures == 0)
      std::printf("PASS node %d of %d: %d steps with overlap, streamed across the nodes, give the one-buffer "
                  "step's bits on all %d ranks\n", synk::node(), synk::nodes(), steps, ranks);
    synk::close();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_nodes (node %d): %s\n", synk::node(), e.what());
    return 1;
  }
}
