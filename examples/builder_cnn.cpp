// A convolutional network written in C++ with the expression builder (docs/builder.md,
// "Convolutional networks and random numbers") instead of a .synk file: a conv-BN-ReLU block as a
// helper shared by the training and the evaluation function, max pooling, a global average pool,
// dropout and a dense head, trained with Adam through a training step on synthetic 8x8 images
// whose class is the bright quadrant. It checks that the loss falls, that training updated batch
// norm's running statistics on every rank, and prints the accuracy (CHECK lines below).
// Usage: example_builder_cnn [RANKS] (default 2).
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "dsl/builder.h"
#include "synk/jit.h"

using namespace synk::dsl;
using synk::ir::DType;

namespace {

ModuleBuilder make_cnn() {
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {8, 1, 3, 3}, init::normal(/*seed=*/1, 0.0, 0.3));
  auto gamma = mb.shared("gamma", DType::F32, {8}, init::ones());
  auto beta = mb.shared("beta", DType::F32, {8});
  auto mean_ = mb.shared("running_mean", DType::F32, {8});
  auto var_ = mb.shared("running_var", DType::F32, {8}, init::ones());
  auto dense = mb.shared("dense", DType::F32, {8, 4}, init::normal(2, 0.0, 0.3));
  mb.optimizer("opt", "adam", {{"lr", 0.01}});
  // Training normalises with the batch's statistics and updates the running ones; evaluation
  // uses the running ones. One helper serves both, as a .synk `def` would.
  auto block = mb.helper("block", [&](FunctionBuilder&, const Expr& x, bool training) {
    return relu(batch_norm(conv2d(x, w, {.padding = "same"}), gamma, beta, mean_, var_, {.training = training}));
  });
  auto scores = [&](FunctionBuilder& f, const Expr& images, bool training) {
    auto h = f.let("h", block(f, images, training));
    return dropout(global_avg_pool(max_pool2d(h, 2)), 0.1, training).matmul(dense);
  };
  auto train = mb.function("train");
  auto x = train.scatter("x", DType::F32, {"n", 1, 8, 8});
  auto y = train.scatter("y", DType::I64, {"n"});
  auto loss = train.let("loss", mean(cross_entropy(scores(train, x, true), y)));
  train.out("loss", loss);
  train.minimize(loss, {w, gamma, beta, dense}, "opt");
  auto evaluate = mb.function("evaluate");
  auto ex = evaluate.scatter("x", DType::F32, {"n", 1, 8, 8});
  auto ey = evaluate.scatter("y", DType::I64, {"n"});
  evaluate.out("accuracy", mean(cast(argmax(scores(evaluate, ex, false), 1) == ey, DType::F32)));
  return mb;
}

float scalar(const synk::Outputs& out, const char* name) { return synk::to_vector<float>(out.get(name))[0]; }

}  // namespace

int main(int argc, char** argv) try {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  synk::fork(ranks);
  synk::jit::Module mod = synk::jit::compile(make_cnn());
  synk::TrainStep step = mod.train_step("train");

  // 256 noisy images of 8x8; class k (0-3) has its k-th quadrant brighter.
  const int n = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::vector<float> xs(size_t(n) * 64);
  std::vector<int64_t> ys(n);
  for (int i = 0; i < n; ++i) {
    ys[size_t(i)] = i % 4;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c)
        xs[size_t(i) * 64 + size_t(r * 8 + c)] = noise(rng) + ((r / 4) * 2 + c / 4 == ys[size_t(i)] ? 1.0f : 0.0f);
  }
  synk::Data images = synk::data<float>(xs, {n, 1, 8, 8}, {.name = "x"});
  synk::Data labels = synk::data<int64_t>(ys, {n}, {.name = "y"});

  const float first = scalar(step({images, labels}), "loss");
  float last = first;
  for (int s = 1; s < 60; ++s) last = scalar(step({images, labels}), "loss");
  std::printf("loss %s after 60 steps\n", last < 0.8f * first ? "fell by over 20%" : "did not fall");
  bool updated = true;
  for (int r = 0; r < synk::size(); ++r)
    for (float m : synk::to_vector<float>(mod.shared("running_mean").get_value(r))) updated &= m != 0.0f;
  std::printf("running statistics %s\n", updated ? "updated on every rank" : "NOT updated");
  const float accuracy = scalar(mod.function("evaluate")({images, labels}), "accuracy");
  std::printf("accuracy %.2f on %d ranks\n", accuracy, synk::size());
  synk::close();
  return 0;
} catch (const std::exception& e) {   // a synk error says what was wrong and where
  std::fprintf(stderr, "example_builder_cnn: %s\n", e.what());
  return 1;
}

// CHECK:      loss fell by over 20% after 60 steps
// CHECK-NEXT: running statistics updated on every rank
// CHECK-NEXT: accuracy 0.9{{[0-9]}} on 2 ranks
