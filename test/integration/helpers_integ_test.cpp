// Helpers change nothing that runs: examples/fashion_mnist/mlp.synk, whose forward pass is one
// helper called by three functions, and test/helpers/Inputs/mlp-copied.synk, the same model with
// the forward pass copied into each function (the file before helpers), are compiled through the
// JIT and run on 2 ranks on the same random data. Both modules are structurally equal, and every
// output, the averaged gradient, the optimizer's state and every updated parameter are equal bit
// for bit (memcmp) after training steps over scattered inputs and over sliceable shared data, and
// after evaluation.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synk/jit.h"
#include "synk/train_step.h"

using namespace synk;

namespace {

const std::string kHelperVersion = SYNK_SOURCE_DIR "/examples/fashion_mnist/mlp.synk";
const std::string kCopiedVersion = SYNK_SOURCE_DIR "/test/helpers/Inputs/mlp-copied.synk";

void expect_same_bits(const Array& a, const Array& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.dtype, b.dtype) << what;
  ASSERT_EQ(a.bytes.size(), b.bytes.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size())) << what;
}

void expect_same_outputs(const Outputs& a, const Outputs& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) expect_same_bits(a[i], b[i], fmt::format("{}, output {}", what, i));
}

// Every shared variable of both modules (parameters, opt_grads, the velocities, the data set),
// on every rank.
void expect_same_shareds(const jit::Module& a, const jit::Module& b, int ranks, const std::string& what) {
  ASSERT_EQ(a.shared_names(), b.shared_names());
  for (const std::string& name : a.shared_names())
    for (int r = 0; r < ranks; ++r)
      expect_same_bits(a.shared(name).get_value(r), b.shared(name).get_value(r),
                       fmt::format("{}: {} on rank {}", what, name, r));
}

struct Batch {
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  int64_t rows = 0;
};

Batch random_batch(int64_t rows, std::mt19937_64& rng) {
  Batch b;
  b.rows = rows;
  std::uniform_int_distribution<int> byte(0, 255), label(0, 9);
  for (int64_t i = 0; i < rows * 784; ++i) b.images.push_back(uint8_t(byte(rng)));
  for (int64_t i = 0; i < rows; ++i) b.labels.push_back(label(rng));
  return b;
}

TEST(HelperMlp, TheHelperVersionIsTheCopiedVersionBitForBit) {
  constexpr int kRanks = 2;
  jit::Module helper = jit::load_file(kHelperVersion);
  jit::Module copied = jit::load_file(kCopiedVersion);
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(helper.ir(), copied.ir(), &difference)) << difference;
  TrainStep helper_train = helper.train_step("train"), copied_train = copied.train_step("train");
  TrainStep helper_device = helper.train_step("train_device"), copied_device = copied.train_step("train_device");
  ASSERT_EQ(kRanks, synk::fork(kRanks));
  expect_same_shareds(helper, copied, kRanks, "initial values");

  std::mt19937_64 rng(20240616);
  // The data set of train_device: each rank holds its own rows of the sliceable variables.
  for (int r = 0; r < kRanks; ++r) {
    Batch own = random_batch(24 + 5 * r, rng);
    for (jit::Module* m : {&helper, &copied}) {
      m->shared("train_images").set_value<uint8_t>(r, own.images, {own.rows, 784});
      m->shared("train_labels").set_value<int64_t>(r, own.labels, {own.rows});
    }
  }
  for (int step = 0; step < 3; ++step) {
    Batch b = random_batch(40 + 7 * step, rng);
    Data images = data<uint8_t>(b.images, {b.rows, 784});
    Data labels = data<int64_t>(b.labels, {b.rows});
    std::vector<int64_t> rows;
    for (int64_t i = b.rows - 1; i >= 0; i -= 3) rows.push_back(i);
    expect_same_outputs(helper_train({images, labels}, {.batch = rows}),
                        copied_train({images, labels}, {.batch = rows}), fmt::format("train, step {}", step));
    expect_same_shareds(helper, copied, kRanks, fmt::format("after train step {}", step));

    BatchS own_rows = BatchS(Range{step, step + 10});
    expect_same_outputs(helper_device({}, {.batch_s = own_rows}),
                        copied_device({}, {.batch_s = own_rows}),
                        fmt::format("train_device, step {}", step));
    expect_same_shareds(helper, copied, kRanks, fmt::format("after train_device step {}", step));

    Outputs a = helper.function("evaluate")({images, labels}, {.num_slices = 2});
    Outputs c = copied.function("evaluate")({images, labels}, {.num_slices = 2});
    expect_same_outputs(a, c, fmt::format("evaluate, step {}", step));
  }
  // Training moved the parameters: the comparisons were not between untouched copies.
  EXPECT_NE(jit::load_file(kCopiedVersion).shared("w1").values<float>(), helper.shared("w1").values<float>());
  synk::close();
}

}  // namespace
