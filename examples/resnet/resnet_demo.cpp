// resnet_demo: the seeds' ResNet demo (Synkhronos demos/resnet/train_resnet.py) in synk. A ResNet
// (resnet_model.h; ResNet-50 on 3x224x224 images with 1000 classes by default) is generated as
// .synk text and JIT-compiled, the ranks are forked, the master's parameters are broadcast to
// every rank, and synthetic data (4096 training, 1024 validation, 1024 test images by default)
// lives in shared memory (synk::Data), never copied whole to a rank. Each step is one
// synk::TrainStep call over a shuffled index batch (each rank gathers its own rows): gradient,
// one all-reduce of the flat gradient, plain SGD with learning rate 1e-3 x ranks; the batch is
// 64 images per rank. Each epoch ends with a validation of the whole validation set in one call
// with num_slices; the test set is evaluated once, at the end. It prints the set-up time, each
// epoch's training loss and time, and the total time. The defaults take hours on a CPU; --depth,
// --image-size, --train/--valid/--test and --ranks make it run in minutes.
//
//   resnet_demo [--depth 50] [--image-size 224] [--classes 1000] [--train 4096] [--valid 1024]
//               [--test 1024] [--batch 64] [--lr 1e-3] [--epochs 3] [--ranks N] [--profile] [--overlap] [--bucket-bytes B] [--print-model]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <limits>
#include <numeric>
#include <random>

#include "examples/cli_checks.h"
#include "examples/resnet/resnet_model.h"
#include "synk/collectives.h"
#include "synk/jit.h"
#include "synk/synk.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  resnet::Config model;
  int64_t train = 4096, valid = 1024, test = 1024;
  int64_t batch = 64;  // images per rank per step
  double lr = 1e-3;    // times the number of ranks
  int epochs = 3;
  int ranks = 0;  // 0: one per CPU core
  uint64_t seed = 1;
  bool print_model = false;
  bool profile = false;  // time the gradient, all-reduce and update of each step separately
  bool overlap = false;  // average the gradient in buckets during the backward pass
  int64_t bucket_bytes = 0;
};

struct DataSet {
  synk::Data images, labels;
  int64_t rows() const { return images.shape()[0]; }
};

// Synthetic images: each class is a fixed random pattern plus unit normal noise, so the loss
// can fall (pure noise gives nothing to learn); labels uniform over the classes.
DataSet synthetic(const Options& o, int64_t rows, uint64_t seed, const std::string& name) {
  const int64_t pixels = int64_t(o.model.channels) * o.model.image * o.model.image;
  DataSet d;
  d.images =
      synk::data(synk::DType::F32, {rows, o.model.channels, o.model.image, o.model.image}, {.name = name + " images"});
  d.labels = synk::data(synk::DType::I64, {rows}, {.name = name + " labels"});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, o.model.classes - 1);
  std::mt19937_64 pattern_rng(o.seed);
  float* x = d.images.view<float>().data();
  int64_t* y = d.labels.view<int64_t>().data();
  for (int64_t i = 0; i < rows; ++i) {
    y[i] = label(rng);
    // The class pattern: a deterministic function of (class, pixel), cheap to recompute.
    std::mt19937_64 pattern(o.seed * 0x9E3779B97F4A7C15ull + uint64_t(y[i]));
    for (int64_t p = 0; p < pixels; ++p) x[i * pixels + p] = 0.5f * float(int64_t(pattern() % 3) - 1) + normal(rng);
  }
  return d;
}

// The whole set in one call; each rank evaluates its share in slices of at most `batch` rows.
std::pair<double, double> evaluate(synk::Function& fn, const DataSet& set, int ranks, int64_t batch) {
  const int64_t per_rank = (set.rows() + ranks - 1) / ranks;
  const int64_t slices = std::max<int64_t>(1, (per_rank + batch - 1) / batch);
  synk::Outputs r = fn({set.images, set.labels}, {.num_slices = slices});
  return {synk::to_vector<float>(r.get("loss"))[0], synk::to_vector<float>(r.get("accuracy"))[0]};
}

// One training step: one TrainStep call, or (`phase` given) its three parts one by one, timed.
synk::Outputs call(const synk::TrainStep& step, const std::vector<synk::Data>& inputs, synk::CallOptions options,
                   double* phase) {
  if (!phase) return step(inputs, options);
  const Clock::time_point t0 = Clock::now();
  synk::Outputs out = step.gradient_call(inputs, options);
  const Clock::time_point t1 = Clock::now();
  const bool any_rows = step.reduce_gradient(out);
  const Clock::time_point t2 = Clock::now();
  if (any_rows) step.update()({});
  phase[0] += std::chrono::duration<double>(t1 - t0).count();
  phase[1] += std::chrono::duration<double>(t2 - t1).count();
  phase[2] += since(t2);
  return out;
}

int run(const Options& o) {
  const Clock::time_point start = Clock::now();
  resnet::Config cfg = o.model;
  cfg.optimizer = fmt::format("sgd(lr={})", o.lr);  // scaled by the ranks after the fork
  if (o.print_model) {
    std::cout << resnet::generate(cfg);
    return 0;
  }
  // Compile before the fork so that the workers inherit the functions.
  synk::jit::Module module =
      synk::jit::compile_string(resnet::generate(cfg), {}, fmt::format("resnet{}.synk", cfg.depth));
  synk::TrainStep step = module.train_step("train");
  step.set_overlap(o.overlap, o.bucket_bytes);
  synk::Function evaluate_fn = module.function("evaluate");
  const double compile_time = since(start);
  const int ranks = synk::fork(o.ranks);
  // The seeds' pattern: the master's initial parameters go to every rank after the start.
  std::vector<synk::Var> vars;
  for (const std::string& name : module.shared_names()) vars.push_back(module.shared(name).var());
  synk::broadcast(vars);
  step.set_lr(o.lr * ranks);
  DataSet train = synthetic(o, o.train, o.seed + 1, "train");
  DataSet valid = synthetic(o, o.valid, o.seed + 2, "validation");
  DataSet test = synthetic(o, o.test, o.seed + 3, "test");
  fmt::print(
      "ResNet-{} on {}x{}x{} synthetic images, {} classes: {} training, {} validation, {} test; {} ranks, "
      "{} images per rank per step, SGD lr {:g}\n",
      cfg.depth, cfg.channels, cfg.image, cfg.image, cfg.classes, o.train, o.valid, o.test, ranks, o.batch,
      o.lr * ranks);
  fmt::print("set-up: {:.2f} s (compile {:.2f} s)\n", since(start), compile_time);
  std::fflush(stdout);

  const int64_t global = o.batch * ranks;
  const int64_t steps = o.train / global;  // full batches only, as the seed's demo
  if (steps == 0) {  // --ranks 0 gave more ranks than the check before the fork assumed
    fmt::print(stderr, "resnet_demo: error: --train {} is less than one step's {} images\n", o.train, global);
    synk::close();
    return 2;
  }
  std::vector<int64_t> order(size_t(o.train));
  std::mt19937_64 rng(o.seed);
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const Clock::time_point t = Clock::now();
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0, phase[3] = {0, 0, 0};
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> batch(order.begin() + s * global, order.begin() + (s + 1) * global);
      synk::Outputs out =
          call(step, {train.images, train.labels}, {.batch = std::move(batch)}, o.profile ? phase : nullptr);
      loss_sum += synk::to_vector<float>(out[0])[0];
    }
    const double train_time = since(t);
    auto [vloss, vacc] = evaluate(evaluate_fn, valid, ranks, o.batch);
    fmt::print("epoch {}: train loss {:.4f}, {:.2f} s ({:.1f} images/s); validation loss {:.4f}, accuracy {:.2f}%\n",
               epoch, steps ? loss_sum / double(steps * global) : 0.0, train_time,
               double(steps * global) / std::max(train_time, 1e-9), vloss, 100 * vacc);
    if (o.profile && steps)
      fmt::print("  per step: gradient {:.3f} s, all-reduce {:.3f} s, update {:.3f} s\n", phase[0] / double(steps),
                 phase[1] / double(steps), phase[2] / double(steps));
    std::fflush(stdout);
  }
  auto [tloss, tacc] = evaluate(evaluate_fn, test, ranks, o.batch);
  fmt::print("test loss {:.4f}, accuracy {:.2f}%\ntotal time: {:.2f} s\n", tloss, 100 * tacc, since(start));
  synk::close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using synk_examples::at_least;
  using synk_examples::in_range;
  using synk_examples::unsigned_integer;
  Options o;
  CLI::App app{"The seeds' ResNet demo: data-parallel training of a ResNet on synthetic images with synk.",
               "resnet_demo"};
  app.add_option("--depth", o.model.depth, "18, 34, 50 (ImageNet style) or 20, 32, 44, 56 (CIFAR style)")
      ->capture_default_str();
  app.add_option("--image-size", o.model.image, "Image height and width")
      ->capture_default_str()
      ->check(at_least(1, 1 << 16));
  app.add_option("--channels", o.model.channels, "Image channels")->capture_default_str()->check(at_least(1, 1 << 16));
  app.add_option("--classes", o.model.classes, "Classes")->capture_default_str()->check(at_least(2, 1 << 20));
  app.add_option("--train", o.train, "Training images")->capture_default_str()->check(at_least(1, INT32_MAX));
  app.add_option("--valid", o.valid, "Validation images")->capture_default_str()->check(at_least(1, INT32_MAX));
  app.add_option("--test", o.test, "Test images")->capture_default_str()->check(at_least(1, INT32_MAX));
  app.add_option("--batch", o.batch, "Images per rank per step")->capture_default_str()->check(at_least(1, INT32_MAX));
  app.add_option("--lr", o.lr, "Learning rate per rank (SGD uses lr x ranks)")
      ->capture_default_str()
      ->check(in_range(0, true, std::numeric_limits<double>::max(), false, "a number > 0"));
  app.add_option("--epochs", o.epochs, "Epochs")->capture_default_str()->check(at_least(0, INT32_MAX));
  app.add_option("--ranks", o.ranks, "Ranks (0: one per CPU core)")
      ->capture_default_str()
      ->check(at_least(0, 4096));
  app.add_option("--seed", o.seed, "Seed of the data and the shuffles")->capture_default_str()->check(unsigned_integer());
  app.add_flag("--overlap", o.overlap, "Average the gradient in buckets during the backward pass (docs/training.md)");
  app.add_option("--bucket-bytes", o.bucket_bytes, "Bucket size of --overlap (0: the default, 1 MiB)")
      ->capture_default_str()
      ->check(at_least(0));
  app.add_flag("--profile", o.profile, "Time the gradient, all-reduce and update of each step separately");
  app.add_flag("--print-model", o.print_model, "Print the generated .synk model and exit");
  if (std::optional<int> status = synk_examples::parse_command_line(app, argc, argv, "resnet_demo")) return *status;
  try {
    if (o.train < o.batch * std::max(o.ranks, 1))
      throw std::invalid_argument(
          fmt::format("--train {} is less than one step's {} images", o.train, o.batch * std::max(o.ranks, 1)));
    return run(o);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "resnet_demo: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "resnet_demo: error: {}\n", e.what());
    return 1;
  }
}
