// Overlapped gradient all-reduce (TrainStep::set_overlap, docs/training.md "Overlap"): the
// Fashion-MNIST CNN of examples/fashion_cnn (convolutions, batch norm, dropout, a dense head)
// trained for a few steps on fresh random images gives bit-identical parameters, optimizer state,
// running statistics and losses with and without overlap, on 2 and 3 ranks, with the same and
// with unequal rows per rank (the weighted average), with buckets from 100 bytes to the default
// 1 MiB, and where the step falls back to the one all_reduce (num_slices, a rank without rows). The timeline shows the buckets on each rank's helper track, the right number
// per step, starting before the rank's backward pass ends. A rank that fails during a streamed
// step fails the step, names the rank, and leaves the group usable; a worker killed during
// streamed steps ends the group cleanly; a bad bucket size is a UsageError.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "runtime/testing.h"
#include "synk/jit.h"
#include "synk/synk.h"
#include "synk/train_step.h"

using namespace synk;
using json = nlohmann::json;

namespace {

const std::string kModel = SYNK_SOURCE_DIR "/examples/fashion_cnn/cnn.synk";
constexpr int64_t kRows = 96, kSteps = 3;

struct DataSet {
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
};

DataSet random_data(uint64_t seed) {
  std::mt19937_64 rng(seed);
  DataSet d;
  for (int64_t i = 0; i < kRows * 784; ++i) d.images.push_back(uint8_t(rng() % 256));
  for (int64_t i = 0; i < kRows; ++i) d.labels.push_back(int64_t(rng() % 10));
  return d;
}

struct Setting {
  int ranks = 2;
  bool overlap = false;
  int64_t bucket_bytes = 0;
  int64_t rows = 24;        // per step
  int64_t num_slices = 1;
};

struct Result {
  std::map<std::string, std::vector<std::byte>> vars;
  std::vector<float> losses;
};

Result train(const Setting& s, const DataSet& d) {
  jit::Module m = jit::load_file(kModel);
  TrainStep step = m.train_step("train");
  step.set_overlap(s.overlap, s.bucket_bytes);
  EXPECT_EQ(s.ranks, synk::fork(s.ranks));
  Data images = data<uint8_t>(d.images, {kRows, 784}), labels = data<int64_t>(d.labels, {kRows});
  Result r;
  for (int64_t k = 0; k < kSteps; ++k) {
    std::vector<int64_t> batch;
    for (int64_t j = 0; j < s.rows; ++j) batch.push_back((k * 37 + j * 5) % kRows);
    r.losses.push_back(step({images, labels}, {.batch = batch, .num_slices = s.num_slices})[0].data<float>()[0]);
  }
  for (const std::string& name : m.shared_names()) {
    const Array a = m.shared(name).get_value();
    r.vars[name].assign(a.bytes.begin(), a.bytes.end());
    // Batch norm's running statistics are each rank's own (docs/language.md); the rest is shared.
    const bool per_rank = name.ends_with("_mean") || name.ends_with("_var");
    for (int rank = 1; rank < s.ranks; ++rank) {
      const Array other = m.shared(name).get_value(rank);
      if (per_rank) r.vars[name + " on rank " + std::to_string(rank)].assign(other.bytes.begin(), other.bytes.end());
      else EXPECT_EQ(other.bytes, a.bytes) << name << " on rank " << rank;
    }
  }
  synk::close();
  return r;
}

std::string describe(const Setting& s) {
  return fmt::format("{} ranks, bucket {} bytes, {} rows, num_slices {}", s.ranks, s.bucket_bytes, s.rows,
                     s.num_slices);
}

TEST(OverlapStep, SameBitsAsTheOneBufferStep) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("data seed " + std::to_string(seed));
  const DataSet d = random_data(seed);
  // 24 rows: the same rows on every rank (the plain average); 23 and 25: unequal rows (the
  // weighted average of all_reduce_weighted, bucket by bucket); 2 rows on 3 ranks: a rank
  // without rows, whose share is 0.
  for (auto [ranks, rows] : {std::pair{2, 24}, std::pair{3, 24}, std::pair{2, 23}, std::pair{3, 25}, std::pair{3, 2}}) {
    const Result plain = train(Setting{ranks, false, 0, rows}, d);
    for (int64_t bucket : {int64_t(0), int64_t(100), int64_t(65536)}) {
      const Setting s{ranks, true, bucket, rows};
      const Result overlapped = train(s, d);
      EXPECT_EQ(overlapped.losses, plain.losses) << describe(s);
      for (const auto& [name, bytes] : plain.vars) EXPECT_EQ(overlapped.vars.at(name), bytes) << name << ", " << describe(s);
    }
  }
  // Where the step cannot stream it takes the one all_reduce: slices.
  for (const Setting& fallback : {Setting{2, true, 4096, 24, 2}}) {
    Setting off = fallback;
    off.overlap = false;
    const Result a = train(fallback, d), b = train(off, d);
    EXPECT_EQ(a.losses, b.losses) << describe(fallback);
    EXPECT_EQ(a.vars, b.vars) << describe(fallback);
  }
}

struct Span {
  std::string name;
  int tid;
  double ts, end;
};

// Every X span of the trace file, per rank.
std::map<int, std::vector<Span>> read_spans(const std::string& file) {
  std::ifstream in(file);
  json doc = json::parse(in);
  std::map<int, std::vector<Span>> spans;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], dur = e["dur"];
    spans[e["pid"].get<int>()].push_back(Span{e["name"], e["tid"].get<int>(), ts, ts + dur});
  }
  return spans;
}

std::map<int, std::vector<Span>> traced_run(const Setting& s, const DataSet& d) {
  const std::string file = fmt::format("/tmp/synk-overlap-test-{}.json", getpid());
  trace_start(file);
  train(s, d);
  trace_stop();
  std::map<int, std::vector<Span>> spans = read_spans(file);
  std::filesystem::remove(file);
  return spans;
}

TEST(OverlapStep, BucketsRunOnTheHelperTrackDuringTheBackwardPass) {
  const DataSet d = random_data(7);
  // cnn.synk's flat gradient: 421,738 f32 parameters.
  constexpr int64_t kGradientBytes = 421738 * 4, kBucket = 65536;
  constexpr int64_t kBuckets = (kGradientBytes + kBucket - 1) / kBucket;
  std::map<int, std::vector<Span>> spans = traced_run(Setting{2, true, kBucket, 24}, d);
  ASSERT_EQ(spans.size(), 2u);
  int overlapped_steps = 0;
  for (auto& [rank, list] : spans) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::vector<const Span*> runs, buckets;
    for (const Span& s : list) {
      if (s.name == "compiled function run()" && s.tid == 0) runs.push_back(&s);
      if (s.name == "gradient bucket") {
        EXPECT_EQ(s.tid, 1) << "buckets are reduced on the helper's track";
        buckets.push_back(&s);
      }
    }
    // The gradient calls (kSteps), then the update calls; the update function streams nothing.
    ASSERT_GE(runs.size(), size_t(kSteps));
    EXPECT_EQ(buckets.size(), size_t(kSteps * kBuckets));
    for (const Span* run : runs) {
      int inside = 0;
      for (const Span* b : buckets) inside += b->ts >= run->ts && b->ts < run->end;
      overlapped_steps += inside > 0;
    }
  }
  // Each track of a rank (its own thread, the helper) holds spans nested or disjoint, as the
  // trace viewers expect (ts and dur are rounded separately: 2 ns slack).
  for (auto& [rank, list] : spans)
    for (int tid : {0, 1}) {
      std::vector<const Span*> track;
      for (const Span& s : list)
        if (s.tid == tid) track.push_back(&s);
      std::sort(track.begin(), track.end(),
                [](const Span* a, const Span* b) { return a->ts != b->ts ? a->ts < b->ts : a->end > b->end; });
      std::vector<const Span*> open;
      for (const Span* s : track) {
        while (!open.empty() && open.back()->end <= s->ts + 0.002) open.pop_back();
        if (!open.empty()) {
          EXPECT_LE(s->end, open.back()->end + 0.002) << "rank " << rank << " track " << tid << ": '" << s->name
                                                     << "' overlaps '" << open.back()->name << "'";
        }
        open.push_back(s);
      }
    }
  // A bucket of the last layers starts while the first layers' gradients are computed. Each step
  // could in principle be delayed by the host's scheduler; on 2 ranks x 3 steps, not all of them.
  EXPECT_GT(overlapped_steps, 0);

  // A step that falls back streams nothing.
  spans = traced_run(Setting{2, true, kBucket, 24, 2}, d);
  for (auto& [rank, list] : spans)
    for (const Span& s : list) EXPECT_NE(s.name, "gradient bucket") << "rank " << rank;
  // Unequal rows stream (weighted), and so does a rank without rows.
  for (const Setting& weighted : {Setting{2, true, kBucket, 23}, Setting{3, true, kBucket, 2}}) {
    spans = traced_run(weighted, d);
    EXPECT_EQ(spans.size(), size_t(weighted.ranks)) << describe(weighted);
    for (auto& [rank, list] : spans)
      EXPECT_TRUE(std::any_of(list.begin(), list.end(), [](const Span& s) { return s.name == "gradient bucket"; }))
          << "rank " << rank << ", " << describe(weighted);
  }
}

TEST(OverlapStep, AFailingRankFailsTheStepAndKeepsTheGroup) {
  DataSet d = random_data(11);
  for (int64_t i = kRows / 2; i < kRows; ++i) d.labels[size_t(i)] = 10;   // out of range: rank 1's rows fail
  jit::Module m = jit::load_file(kModel);
  TrainStep step = m.train_step("train");
  step.set_overlap(true, 4096);
  ASSERT_EQ(2, synk::fork(2));
  const Array before = m.shared("d1_w").get_value(1);
  Data images = data<uint8_t>(d.images, {kRows, 784}), labels = data<int64_t>(d.labels, {kRows});
  std::vector<int64_t> all;
  for (int64_t j = 0; j < kRows; ++j) all.push_back(j);
  try {
    step({images, labels}, {.batch = all});
    ADD_FAILURE() << "a label out of range on rank 1 must fail the step";
  } catch (const RankError& e) {
    EXPECT_EQ(e.ranks(), std::vector<int>{1}) << e.what();
    EXPECT_FALSE(e.group_lost()) << e.what();
  }
  EXPECT_EQ(m.shared("d1_w").get_value(1).bytes, before.bytes) << "a failed step changes nothing";
  std::vector<int64_t> good;
  for (int64_t j = 0; j < kRows / 2; ++j) good.push_back(j);
  const float loss = step({images, labels}, {.batch = good})[0].data<float>()[0];
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(m.shared("d1_w").get_value(0).bytes, m.shared("d1_w").get_value(1).bytes);
  EXPECT_NE(m.shared("d1_w").get_value(1).bytes, before.bytes);
  synk::close();
}

// A worker killed at a random moment of a run of streamed steps (its helper may be in a bucket's
// barrier, waiting for a bucket, or not started): the master's next call reports the lost group,
// its own helper is joined before the group's memory goes, nothing is left in /dev/shm, and a
// new group trains again.
TEST(OverlapStep, AKilledWorkerEndsTheGroupCleanly) {
  const DataSet d = random_data(13);
  jit::Module m = jit::load_file(kModel);
  TrainStep step = m.train_step("train");
  step.set_overlap(true, 4096);
  std::vector<int64_t> batch;
  for (int64_t j = 0; j < 48; ++j) batch.push_back(j);
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(2, synk::fork(2));
    const int delay_us = int(rng() % 150'000);
    bool lost = false;
    {
      Data images = data<uint8_t>(d.images, {kRows, 784}), labels = data<int64_t>(d.labels, {kRows});
      step({images, labels}, {.batch = batch});   // warm: the kernels are loaded
      const pid_t victim = worker_pid(1);
      std::thread killer([&] {
        usleep(useconds_t(delay_us));
        ::kill(victim, SIGKILL);
      });
      for (int k = 0; k < 200 && !lost; ++k) {
        try {
          step({images, labels}, {.batch = batch});
        } catch (const RankError& e) {
          lost = true;
          EXPECT_TRUE(e.group_lost()) << e.what();
          EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
        }
      }
      killer.join();
    }
    EXPECT_TRUE(lost) << "round " << round << ", kill after " << delay_us << " us";
    synk::close();
    const std::vector<std::string> left = synk::testing::leftover_segments();
    EXPECT_TRUE(left.empty()) << "round " << round << ": " << fmt::format("{}", fmt::join(left, ", "));
  }
}

TEST(OverlapStep, BadBucketSizeIsAUsageError) {
  jit::Module m = jit::load_file(kModel);
  TrainStep step = m.train_step("train");
  try {
    step.set_overlap(true, -1);
    ADD_FAILURE() << "a negative bucket size must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bucket_bytes must be >= 0"), std::string::npos) << e.what();
  }
}

}  // namespace
