// The training program of the Fashion-MNIST examples (trainer.h): data-parallel training the
// Synkhronos way (seeds 000 and 003). The data sets live in shared memory (synk::Data) and are
// never copied whole to any rank. Each step: one call of the gradient function with a shuffled
// index `batch` (each rank gathers its own rows), one all_reduce(avg) of the one flat gradient
// vector, one call of the update function (momentum SGD by default), identical on every rank: the
// model declares the step with `minimize`, and each step is one call of the synk::TrainStep that
// runs those three (with --profile, its three parts are called and timed one by one). --optimizer,
// --lr and --momentum replace the optimizer the model declares. --holdout N (default 5,000)
// training images are set aside as the validation set: each epoch ends with a validation of it in
// one call with num_slices; the 10,000 test images are evaluated once, at the end; the parameters
// are saved as .npy files.
//
//   PROGRAM [--ranks N] [--epochs 10] [--batch 256] [--lr 0.05] [--holdout 5000] [--out DIR] ...
//
// With --device-data the training set is instead scattered once into sliceable shared variables
// and each step selects every rank's rows with batch_s (the seeds' device-data pattern). Exit
// status: 0 success; 1 an error (missing or corrupt data, a failed call) or a --require-accuracy
// check that failed; 2 a bad command line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "examples/cli_checks.h"
#include "examples/fashion_mnist/idx.h"
#include "dsl/sema_optimizer.h"
#include "examples/fashion_mnist/model.h"
#include "examples/fashion_mnist/trainer.h"
#include "runtime/group/backend.h"
#include "runtime/data/npy.h"

namespace {

using synk_examples::at_least;
using synk_examples::in_range;
using synk_examples::unsigned_integer;

using Clock = std::chrono::steady_clock;
using fashion_mnist::kPixels;

struct Options {
  int ranks = 0;
  std::string backend = "auto";   // cpu, gpu or auto (the GPU when one is usable)
  int epochs = 10;
  int64_t batch = 256;
  double lr = 0.05;
  double momentum = 0.9;
  std::string optimizer = "momentum";
  // --optimizer given: it replaces the model's rule (with --lr and --momentum); else --lr and
  // --momentum replace those hyper-parameters of the model's own rule.
  bool lr_given = false, momentum_given = false, optimizer_given = false;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string model;       // the program's model unless --model
  std::string out;
  int64_t limit = 0;       // 0: every training image
  int64_t holdout = 5000;  // training images set aside for validation
  uint64_t seed = 1;
  double require_accuracy = -1;
  const fashion_mnist::Program* program = nullptr;
  bool profile = false;    // time the three parts of each step
  bool device_data = false;   // scatter the training set once; select rows with batch_s
  int64_t deterministic = 0;  // micro-shard rows of a deterministic step (0: off)
  bool cosine = false;        // decay lr along a cosine to 0 over all the run's steps
  double warmup = 0;          // epochs (or a fraction of one) of linear learning-rate warm-up first
  int shift = 0;              // move each training image by up to this many pixels, per epoch
  bool overlap = false;       // average the gradient in buckets during the backward pass
  int64_t bucket_bytes = 0;   // --overlap's bucket size (0: the default)
  std::string checkpoint;  // save a checkpoint here after every epoch
  std::string resume;      // start from this checkpoint
  int stop_after = 0;      // end the run after this epoch (0: after --epochs), to --resume it later
};

// A command-line value that cannot work, found after parsing (exit status 2, like CLI11's errors).
struct CommandLineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The progress bar on stderr, redrawn at most every 50 ms, only when stderr is a terminal.
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  void update(int epoch, int epochs, int64_t step, int64_t steps, double loss, int64_t images, Clock::time_point start) {
    if (!enabled_ || (step != steps && seconds_since(last_) < 0.05)) return;
    last_ = Clock::now();
    constexpr int kWidth = 30;
    int filled = int(kWidth * step / std::max<int64_t>(steps, 1));
    double elapsed = std::max(seconds_since(start), 1e-9);
    fmt::print(stderr, "\repoch {}/{} [{}{}] {}/{}  loss {:.4f}  {:.1f}k images/s \033[K", epoch, epochs,
               std::string(size_t(filled), '#'), std::string(size_t(kWidth - filled), '.'), step, steps, loss,
               double(images) / elapsed / 1000);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) fmt::print(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  Clock::time_point last_{};
};

struct DataSet {
  synk::Data images;   // u8[n, 784]
  synk::Data labels;   // i64[n]
  int64_t rows() const { return images.shape()[0]; }
};

DataSet to_data(const fashion_mnist::Split& split, const std::vector<int64_t>& rows, const std::string& name) {
  DataSet d;
  int64_t n = int64_t(rows.size());
  d.images = synk::data(synk::DType::U8, {n, kPixels}, {.name = name + " images"});
  d.labels = synk::data(synk::DType::I64, {n}, {.name = name + " labels"});
  synk::View<uint8_t> pixels = d.images.view<uint8_t>();
  synk::View<int64_t> labels = d.labels.view<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = split.images.pixels.data() + rows[size_t(i)] * kPixels;
    std::copy(src, src + kPixels, pixels.data() + i * kPixels);
    labels.data()[i] = split.labels.values[size_t(rows[size_t(i)])];
  }
  return d;
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// The whole set in one call; each rank computes its share in slices of at most 2,000 rows.
Evaluation evaluate(const fashion_mnist::Model& model, const DataSet& set, int ranks) {
  int64_t per_rank = (set.rows() + ranks - 1) / ranks;
  int64_t slices = std::max<int64_t>(1, (per_rank + 1999) / 2000);
  synk::Outputs r = model.evaluate({set.images, set.labels}, {.num_slices = slices});
  return {synk::to_vector<float>(r.get("loss"))[0], synk::to_vector<float>(r.get("accuracy"))[0]};
}

// The optimizer from the command line: --optimizer replaces the model's (with --lr, --momentum or
// their defaults); --lr or --momentum alone change that hyper-parameter of the model's own rule;
// none of them: the model's own (std::nullopt).
std::optional<fashion_mnist::OptimizerChoice> optimizer_choice(const Options& o) {
  if (o.optimizer_given) {
    fashion_mnist::OptimizerChoice choice{o.optimizer, {{"lr", o.lr}}};
    if (o.optimizer == "momentum" || o.optimizer == "nesterov") choice.hyper_parameters.emplace_back("momentum", o.momentum);
    return choice;
  }
  if (!o.lr_given && !o.momentum_given) return std::nullopt;
  fashion_mnist::OptimizerChoice keep;   // the model's rule
  if (o.lr_given) keep.hyper_parameters.emplace_back("lr", o.lr);
  if (o.momentum_given) keep.hyper_parameters.emplace_back("momentum", o.momentum);
  return keep;
}

// Which training images train and which validate (--holdout, --limit), and the test images.
struct RowChoice {
  std::vector<int64_t> train, held_out, test;
};

RowChoice choose_rows(const Options& o, const fashion_mnist::Split& train_split,
                      const fashion_mnist::Split& test_split) {
  std::vector<int64_t> pool(size_t(train_split.images.count));
  std::iota(pool.begin(), pool.end(), 0);
  std::vector<int64_t> held_out;
  if (o.holdout >= int64_t(pool.size()))
    throw CommandLineError(fmt::format("--holdout {} leaves no training images (there are {})", o.holdout, pool.size()));
  // The same split for every seed, so that runs with different seeds validate on the same images.
  std::mt19937_64 split_rng(0x5eed);
  std::shuffle(pool.begin(), pool.end(), split_rng);
  held_out.assign(pool.end() - o.holdout, pool.end());
  pool.resize(pool.size() - size_t(o.holdout));
  std::sort(pool.begin(), pool.end());
  std::sort(held_out.begin(), held_out.end());
  if (o.limit > int64_t(pool.size()))
    throw CommandLineError(fmt::format("--limit {} asks for more training images than the {} there are{}", o.limit,
                                       pool.size(), fmt::format(" after --holdout {}", o.holdout)));
  if (o.limit > 0) pool.resize(size_t(o.limit));
  std::vector<int64_t> test_rows(size_t(test_split.images.count));
  std::iota(test_rows.begin(), test_rows.end(), 0);
  return {std::move(pool), std::move(held_out), std::move(test_rows)};
}

// Forks the ranks on the backend --backend asks for; returns how many there are.
int start_ranks(const Options& o) {
  const synk::Backend requested = o.backend == "cpu" ? synk::Backend::Cpu
                                 : o.backend == "gpu" ? synk::Backend::Gpu
                                                      : synk::Backend::Auto;
  int wanted_ranks = o.ranks;
  if (wanted_ranks == 0 && requested != synk::Backend::Cpu) {
    // One rank per GPU when the GPU backend will be used, one per core otherwise.
    synk::rt::GpuProbe probe = synk::rt::probe_gpus();
    if (probe.usable) wanted_ranks = probe.device_count;
  }
  return synk::fork(wanted_ranks, requested);
}

// The rows the steps of an epoch take. Host-data pattern: one order over the whole set.
// Device-data pattern: the set is scattered once (rank r holds rows [floor(r*L/N),
// floor((r+1)*L/N))) and each rank's own rows are shuffled; a step takes the next share(batch)
// rows of every rank's order.
struct Schedule {
  std::vector<std::vector<int64_t>> orders;
  std::vector<int64_t> batch_share;
  int64_t steps = 0;
};

Schedule make_schedule(const Options& o, const fashion_mnist::Model& model, const DataSet& train, int ranks) {
  Schedule s;
  std::vector<std::vector<int64_t>>& orders = s.orders;
  std::vector<int64_t>& batch_share = s.batch_share;
  batch_share.resize(static_cast<size_t>(ranks));
  if (o.device_data) {
    synk::scatter({model.train_images, model.train_labels}, {synk::Value(train.images), synk::Value(train.labels)});
    for (int r = 0; r < ranks; ++r) {
      int64_t rows = (r + 1) * train.rows() / ranks - r * train.rows() / ranks;
      orders.emplace_back(size_t(rows));
      std::iota(orders.back().begin(), orders.back().end(), 0);
      batch_share[size_t(r)] = (r + 1) * o.batch / ranks - r * o.batch / ranks;
    }
  } else {
    orders.emplace_back(size_t(train.rows()));
    std::iota(orders[0].begin(), orders[0].end(), 0);
  }
  // Device data: an epoch ends when some rank has no rows left for a full share (a rank with no
  // rows would keep its last gradient), so up to `batch` rows per epoch may go unused.
  int64_t steps = (train.rows() + o.batch - 1) / o.batch;
  if (o.device_data) {
    steps = INT64_MAX;
    for (int r = 0; r < ranks; ++r)
      if (batch_share[size_t(r)] > 0)
        steps = std::min(steps, int64_t(orders[size_t(r)].size()) / batch_share[size_t(r)]);
    if (steps == INT64_MAX || steps == 0)
      throw synk::UsageError(fmt::format("--device-data: {} training images do not give every one of {} ranks a "
                                         "share of a batch of {}", train.rows(), ranks, o.batch));
  }
  s.steps = steps;
  return s;
}

struct EpochStats {
  double train_time = 0;
  double loss = 0;                 // mean over the epoch's rows
  double phase[3] = {0, 0, 0};     // gradient, all_reduce, update (with --profile)
};

// The training loop's state from epoch to epoch.
class Trainer {
 public:
  Trainer(const Options& o, const fashion_mnist::Model& model, const DataSet& train, int ranks, Schedule schedule)
      : o_(o), model_(model), train_(train), ranks_(ranks), schedule_(std::move(schedule)) {
    if (o.shift > 0) {
      const uint8_t* pixels = train.images.view<uint8_t>().data();
      original_.assign(pixels, pixels + train.rows() * kPixels);
    }
  }

  // Each epoch's shuffle depends on (seed, epoch) alone, so a run resumed from a checkpoint
  // shuffles as the uninterrupted run did.
  EpochStats run_epoch(int epoch) {
    std::mt19937_64 rng(o_.seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch));
    for (std::vector<int64_t>& order : schedule_.orders) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
    }
    if (o_.shift > 0) shift_images(epoch);
    Clock::time_point start = Clock::now();
    EpochStats stats;
    double loss_sum = 0;
    int64_t rows_done = 0;
    for (int64_t step = 0; step < schedule_.steps; ++step) {
      int64_t rows = 0;
      synk::Outputs out = run_step(step, &rows, stats.phase);
      loss_sum += synk::to_vector<float>(out[0])[0];
      rows_done += rows;
      progress_.update(epoch, o_.epochs, step + 1, schedule_.steps, loss_sum / double(rows_done), rows_done, start);
    }
    stats.train_time = seconds_since(start);
    stats.loss = loss_sum / double(rows_done);
    progress_.clear();
    return stats;
  }

  int64_t steps() const { return schedule_.steps; }

 private:
  // --shift: this epoch's training images are the untouched ones, each moved by its own random
  // (dx, dy) in [-shift, shift] with black filling in (data augmentation, as random crops of a
  // padded image). Depends on (seed, epoch) alone, like the shuffle, so a resumed run sees the same.
  void shift_images(int epoch) {
    std::mt19937_64 rng(o_.seed * 0xD1B54A32D192ED03ull + uint64_t(epoch));
    std::uniform_int_distribution<int> offset(-o_.shift, o_.shift);
    uint8_t* out = train_.images.view<uint8_t>().data();
    constexpr int kSide = int(fashion_mnist::kImageSide);
    for (int64_t i = 0; i < train_.rows(); ++i) {
      const int dx = offset(rng), dy = offset(rng);
      const uint8_t* src = original_.data() + i * kPixels;
      uint8_t* dst = out + i * kPixels;
      for (int y = 0; y < kSide; ++y)
        for (int x = 0; x < kSide; ++x) {
          const int sy = y - dy, sx = x - dx;
          dst[y * kSide + x] = sy >= 0 && sy < kSide && sx >= 0 && sx < kSide ? src[sy * kSide + sx] : 0;
        }
    }
  }

  // Step `step` of the epoch; `rows` is set to the number of rows it trains on.
  synk::Outputs run_step(int64_t step, int64_t* rows_out, double phase[3]) {
    int64_t rows = 0;
    synk::Outputs out;
    if (o_.device_data) {
      std::vector<synk::Rows> per_rank;
      for (int r = 0; r < ranks_; ++r) {
        int64_t share = schedule_.batch_share[size_t(r)];
        const std::vector<int64_t>& order = schedule_.orders[size_t(r)];
        per_rank.emplace_back(std::vector<int64_t>(order.begin() + step * share, order.begin() + (step + 1) * share));
        rows += share;
      }
      out = call(model_.train_device, {}, {.batch_s = synk::BatchS::per_rank(std::move(per_rank))}, phase);
    } else {
      int64_t begin = step * o_.batch, end = std::min(train_.rows(), begin + o_.batch);
      rows = end - begin;
      std::vector<int64_t> batch(schedule_.orders[0].begin() + begin, schedule_.orders[0].begin() + end);
      out = call(model_.train, {train_.images, train_.labels}, {.batch = std::move(batch)}, phase);
    }
    *rows_out = rows;
    return out;
  }

  // One call of the step, or (with --profile) its three parts one by one, timed.
  synk::Outputs call(const synk::TrainStep& step, const std::vector<synk::Data>& inputs,
                     const synk::CallOptions& options, double phase[3]) {
    if (!o_.profile) return step(inputs, options);
    Clock::time_point t0 = Clock::now();
    synk::Outputs out = step.gradient_call(inputs, options);
    Clock::time_point t1 = Clock::now();
    const bool any_rows = step.reduce_gradient(out);
    Clock::time_point t2 = Clock::now();
    if (any_rows) step.update()({});
    phase[0] += std::chrono::duration<double>(t1 - t0).count();
    phase[1] += std::chrono::duration<double>(t2 - t1).count();
    phase[2] += seconds_since(t2);
    return out;
  }

  const Options& o_;
  const fashion_mnist::Model& model_;
  const DataSet& train_;
  std::vector<uint8_t> original_;   // the training images before --shift
  const int ranks_;
  Schedule schedule_;
  Progress progress_;
};

// --require-accuracy: the validation loss must have decreased and the test accuracy reached the
// bar. Returns the exit status.
int check_required_accuracy(const Options& o, const Evaluation& initial, const Evaluation& last,
                            const Evaluation& final_test) {
  if (o.require_accuracy < 0) return 0;
  if (!(last.loss < initial.loss)) {
    fmt::print(stderr, "{}: check failed: the validation loss did not decrease ({:.4f} -> {:.4f})\n",
               o.program->name, initial.loss, last.loss);
    return 1;
  }
  if (!(final_test.accuracy >= o.require_accuracy)) {
    fmt::print(stderr, "{}: check failed: test accuracy {:.2f}% < required {:.2f}%\n", o.program->name,
               100 * final_test.accuracy, 100 * o.require_accuracy);
    return 1;
  }
  fmt::print("check passed: validation loss {:.4f} -> {:.4f}, test accuracy {:.2f}% >= {:.2f}%\n", initial.loss,
             last.loss, 100 * final_test.accuracy, 100 * o.require_accuracy);
  return 0;
}

// The learning-rate schedule for the first line: ", warm-up over 2 epochs, then a cosine to 0".
std::string describe_schedule(const Options& o) {
  std::string warmup = o.warmup > 0 ? fmt::format("warm-up over {:.3g} epoch{}", o.warmup, o.warmup == 1 ? "" : "s") : "";
  if (o.cosine) return warmup.empty() ? ", cosine to 0" : ", " + warmup + ", then a cosine to 0";
  return warmup.empty() ? "" : ", " + warmup;
}

// What a checkpoint of the examples records besides the model's state: enough to refuse a resume
// that could not continue the same run.
synk::CheckpointMetadata checkpoint_metadata(const Options& o, int epoch) {
  return {{"epoch", std::to_string(epoch)}, {"seed", std::to_string(o.seed)}, {"batch", std::to_string(o.batch)},
          {"device_data", o.device_data ? "1" : "0"}, {"limit", std::to_string(o.limit)},
          {"holdout", std::to_string(o.holdout)}, {"shift", std::to_string(o.shift)},
          {"warmup", fmt::format("{:g}", o.warmup)}, {"cosine", o.cosine ? "1" : "0"},
          // A cosine's length is the run's: another --epochs is another schedule.
          {"cosine_epochs", o.cosine ? std::to_string(o.epochs) : "0"}};
}

// Loads --resume (on every rank) and returns the epoch it ended; 0 without --resume.
int resume_from_checkpoint(const Options& o, fashion_mnist::Model& model, int ranks) {
  if (o.resume.empty()) return 0;
  synk::CheckpointMetadata saved = synk::checkpoint_metadata(o.resume);
  const synk::CheckpointMetadata now = checkpoint_metadata(o, 0);
  // Options added since older checkpoints were written: their value then.
  for (const auto& [key, before] : {std::pair<std::string, std::string>{"shift", "0"}, {"warmup", "0"},
                                    {"cosine", "0"}, {"cosine_epochs", "0"}})
    if (!saved.count(key)) saved[key] = before;
  for (const auto& [key, value] : now)
    if (key != "epoch" && saved[key] != value)
      throw CommandLineError(fmt::format("--resume {}: the checkpoint was saved with {} {}, this run has {} (give "
                                         "the same options to continue that run)", o.resume, key, saved[key], value));
  model.module.load_checkpoint(o.resume);   // the step's index too: the schedule continues
  const int epoch = std::stoi(saved.at("epoch"));
  fmt::print("resumed from {} after epoch {} on {} rank{}\n", o.resume, epoch, ranks, ranks == 1 ? "" : "s");
  return epoch;
}

int train(const Options& o) {
  // Data first: a missing data set fails before anything is compiled or forked.
  fashion_mnist::Split train_split = fashion_mnist::read_split(o.data_dir, "train");
  fashion_mnist::Split test_split = fashion_mnist::read_split(o.data_dir, "t10k");
  const RowChoice chosen = choose_rows(o, train_split, test_split);

  Clock::time_point compile_start = Clock::now();
  fashion_mnist::Model model = fashion_mnist::build_model(o.model, optimizer_choice(o));   // before the fork: inherited
  model.train.set_deterministic(o.deterministic);
  model.train_device.set_deterministic(o.deterministic);
  model.train.set_overlap(o.overlap, o.bucket_bytes);
  model.train_device.set_overlap(o.overlap, o.bucket_bytes);
  double compile_time = seconds_since(compile_start);
  int ranks = start_ranks(o);
  // Under mpirun every node's leader runs this program (docs/multinode.md): node 0 prints and
  // saves, the others compute their ranks' share silently (their errors still reach stderr).
  const bool speaker = synk::node() == 0;
  if (!speaker && !std::freopen("/dev/null", "w", stdout))
    throw std::runtime_error("could not silence the standard output of node " + std::to_string(synk::node()));
  const char* backend_label = synk::backend() == synk::Backend::Gpu ? "GPU" : "CPU";

  DataSet train = to_data(train_split, chosen.train, "training");
  DataSet test = to_data(test_split, chosen.test, "test");
  DataSet validation = to_data(train_split, chosen.held_out, "validation");
  const std::string validation_name = fmt::format("{} training images held out", chosen.held_out.size());

  fmt::print("{}: {}, {}{}, global batch {}, {} rank{}{} ({}){}\n", o.program->name, o.program->summary, model.optimizer,
             describe_schedule(o), o.batch, ranks, ranks == 1 ? "" : "s",
             synk::nodes() > 1 ? fmt::format(" on {} nodes", synk::nodes()) : "", backend_label,
             o.deterministic > 0 ? fmt::format(", deterministic over {}-row micro-shards", o.deterministic) : "");
  fmt::print("data: {} training images shuffled each epoch{}{}, validation on {} ({}); compiled in {:.2f} s\n",
             train.rows(),
             o.shift > 0 ? fmt::format(", each moved by up to {} pixel{}", o.shift, o.shift == 1 ? "" : "s") : "",
             o.device_data ? " (scattered once into sliceable shared variables; batch_s)" : "",
             validation_name, o.data_dir, compile_time);
  // The schedule starts from the learning rate the model declares (or --lr), not the one a
  // checkpoint holds, which the schedule had already moved.
  const double base_lr = (o.device_data ? model.train_device : model.train).lr();
  const int first_epoch = resume_from_checkpoint(o, model, ranks) + 1;
  Evaluation initial = evaluate(model, validation, ranks);
  fmt::print("epoch {:>2}  {:>18}  val loss {:.4f}  val acc {:5.2f}%  ({})\n", first_epoch - 1, "", initial.loss,
             100 * initial.accuracy, first_epoch == 1 ? "before training" : "resumed");
  std::fflush(stdout);

  Trainer trainer(o, model, train, ranks, make_schedule(o, model, train, ranks));
  if ((o.cosine || o.warmup > 0) && o.epochs > 0) {   // --epochs 0 takes no step: no schedule
    // The schedule's step is the step's call count: on a resume, the checkpoint restored it.
    synk::TrainStep& step = o.device_data ? model.train_device : model.train;
    const int64_t warmup_steps = int64_t(o.warmup * double(trainer.steps()));
    synk::Schedule schedule = o.cosine ? synk::Schedule::cosine(base_lr, int64_t(o.epochs) * trainer.steps() - warmup_steps)
                                       : synk::Schedule::constant(base_lr);
    step.set_schedule(warmup_steps > 0 ? schedule.with_warmup(warmup_steps) : schedule);
  }
  Evaluation last = initial;
  double total_train_time = 0;
  const int last_epoch = o.stop_after > 0 ? std::min(o.stop_after, o.epochs) : o.epochs;
  for (int epoch = first_epoch; epoch <= last_epoch; ++epoch) {
    const EpochStats stats = trainer.run_epoch(epoch);
    total_train_time += stats.train_time;
    Clock::time_point validate_start = Clock::now();
    last = evaluate(model, validation, ranks);
    fmt::print("epoch {:>2}  train {:7.3f} s  loss {:.4f}  val loss {:.4f}  val acc {:5.2f}%  (validation {:.2f} s)\n",
               epoch, stats.train_time, stats.loss, last.loss, 100 * last.accuracy, seconds_since(validate_start));
    if (o.profile) {
      const double steps = double(trainer.steps());
      fmt::print("          per step: gradient {:.2f} ms, all_reduce {:.2f} ms, update {:.2f} ms\n",
                 1e3 * stats.phase[0] / steps, 1e3 * stats.phase[1] / steps, 1e3 * stats.phase[2] / steps);
    }
    if (!o.checkpoint.empty() && speaker) {
      model.module.save_checkpoint(o.checkpoint, checkpoint_metadata(o, epoch));
      fmt::print("          checkpoint of epoch {} saved to {}\n", epoch, o.checkpoint);
    }
    std::fflush(stdout);
  }

  Evaluation final_test = evaluate(model, test, ranks);
  const int trained = std::max(0, last_epoch - first_epoch + 1);   // in this run (after a --resume: the rest)
  fmt::print("test loss {:.4f}  test accuracy {:.2f}%  ({} epoch{}, {:.2f} s of training, {:.3f} s per epoch)\n",
             final_test.loss, 100 * final_test.accuracy, trained, trained == 1 ? "" : "s", total_train_time,
             trained > 0 ? total_train_time / trained : 0.0);
  if (!o.out.empty() && speaker) {   // the directory was created and checked before training
    // Rank 0's values: the parameters are the same on every rank, running statistics are per rank.
    std::vector<std::string> saved = model.parameters;
    saved.insert(saved.end(), model.statistics.begin(), model.statistics.end());
    for (const std::string& p : saved)
      synk::rt::npy::write((std::filesystem::path(o.out) / (p + ".npy")).string(), model.module.shared(p).get_value().ref());
    fmt::print("parameters saved to {}/{{{}}}.npy\n", o.out, fmt::join(saved, ","));
  }
  synk::close();
  return check_required_accuracy(o, initial, last, final_test);
}

// Creates the --out directory now, so that a path that cannot hold the parameters fails before
// training instead of after it.
void prepare_out_dir(const std::string& out) {
  if (out.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
    throw CommandLineError(fmt::format("--out '{}' exists and is not a directory", out));
  std::filesystem::create_directories(out, ec);
  if (ec) throw CommandLineError(fmt::format("--out '{}': cannot create the directory: {}", out, ec.message()));
  if (access(out.c_str(), W_OK | X_OK) != 0)
    throw CommandLineError(fmt::format("--out '{}': the directory is not writable", out));
}

// The options before the command line: the program's defaults.
Options defaults_of(const fashion_mnist::Program& program) {
  Options o;
  o.program = &program;
  o.model = program.model_path;
  o.out = program.out;
  o.lr = program.lr;
  o.batch = program.batch;
  o.epochs = program.epochs;
  o.shift = program.shift;
  o.cosine = program.cosine;
  return o;
}

}  // namespace

namespace fashion_mnist {

int run_program(const Program& program, int argc, char** argv) {
  Options o = defaults_of(program);
  const char* name = program.name.c_str();
  CLI::App app{fmt::format("Data-parallel training of a {} on Fashion-MNIST with synk: per step one gradient call "
                           "over a shuffled index batch, one all_reduce(avg) of the flat gradient, one update call.",
                           program.summary),
               program.name};
  app.add_option("--ranks", o.ranks, "Processes (ranks); 0: one per GPU on the GPU backend, else one per CPU core")
      ->capture_default_str()
      ->check(at_least(0));
  app.add_option("--backend", o.backend, "cpu, gpu, or auto (the GPU when one is usable, else the CPU cores)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  app.add_option("--epochs", o.epochs, "Passes over the training set")->capture_default_str()->check(at_least(0));
  app.add_option("--batch", o.batch, "Global batch size (split over the ranks)")->capture_default_str()->check(at_least(1));
  CLI::Option* lr = app.add_option("--lr", o.lr, "Learning rate")
                        ->capture_default_str()
                        ->check(in_range(0, true, std::numeric_limits<double>::max(), false, "a number > 0"));
  CLI::Option* momentum = app.add_option("--momentum", o.momentum, "Momentum (momentum and nesterov optimizers)")
                              ->capture_default_str()
                              ->check(in_range(0, false, 1, true, "a number in [0, 1)"));
  CLI::Option* optimizer =
      app.add_option("--optimizer", o.optimizer,
                     "An update rule (one of the list above): replaces the model's "
                     "optimizer (with --lr and --momentum); without it, --lr and --momentum change only those "
                     "hyper-parameters of the model's own")
          ->check(CLI::IsMember(synk::dsl::update_rule_names()));
  app.add_option("--out", o.out, "Directory for the trained parameters (.npy); empty: do not save")->capture_default_str();
  app.add_option("--data", o.data_dir, "Directory of the gzipped IDX files")->capture_default_str();
  app.add_option("--model", o.model, "The model's .synk file")->capture_default_str();
  app.add_option("--limit", o.limit, "Train on the first N training images only (0: all)")->check(at_least(0));
  app.add_option("--holdout", o.holdout,
                 "Training images set aside (the same ones for every seed) to validate on after each epoch; the test "
                 "images are evaluated once, at the end")
      ->capture_default_str()
      ->check(at_least(1));
  app.add_option("--seed", o.seed, "Seed of the shuffles")->capture_default_str()->check(unsigned_integer());
  app.add_option("--require-accuracy", o.require_accuracy,
                 "Exit with status 1 unless the validation loss decreased and the test accuracy is at least this "
                 "fraction (0.86: 86%)")
      ->check(in_range(0, true, 1, false, "a fraction in (0, 1], e.g. 0.86 for 86%"));
  app.add_flag("--device-data", o.device_data,
               "Scatter the training set once into sliceable shared variables and select each step's rows with "
               "batch_s (the seeds' device-data pattern) instead of an index batch over shared-memory inputs");
  app.add_option("--deterministic", o.deterministic,
                 "Deterministic steps over micro-shards of ROWS rows: the same parameters, bit for bit, on any "
                 "number of ranks (docs/training.md); 0: off")
      ->type_name("ROWS")
      ->check(at_least(0));
  app.add_flag("--cosine,!--no-cosine", o.cosine,
               fmt::format("Decay the learning rate along a cosine from its value to 0 over all the run's steps "
                           "(synk::Schedule::cosine); default: {}", program.cosine ? "on" : "off"));
  CLI::Option* warmup =
      app.add_option("--warmup", o.warmup,
                     fmt::format("Raise the learning rate linearly from lr/steps to lr over the first N epochs (a "
                                 "fraction counts), then "
                                 "keep it (or follow --cosine over the remaining epochs): Schedule::with_warmup; 0: off; "
                                 "default: {}",
                                 program.warmup_fraction > 0
                                     ? fmt::format("{:.3g}% of --epochs", 100 * program.warmup_fraction)
                                     : std::string("0")))
          ->type_name("EPOCHS")
          ->check(in_range(0, false, std::numeric_limits<double>::max(), false, "a number >= 0"));
  CLI::Option* shift =
      app.add_option("--shift", o.shift,
                     "Move each training image by a random offset of up to N pixels in x and y, anew every epoch "
                     "(data augmentation of the index-batch mode; 0: off; a default above 0 does not apply to "
                     "--device-data)")
          ->capture_default_str()
          ->check(at_least(0, 8));
  app.add_flag("--overlap", o.overlap,
               "Average the gradient in buckets during the backward pass, same bits (docs/training.md, \"Overlap\")");
  app.add_option("--bucket-bytes", o.bucket_bytes, "Bucket size of --overlap in bytes (0: the default, 1 MiB)")
      ->capture_default_str()
      ->check(at_least(0));
  app.add_flag("--profile", o.profile, "Print the mean time of each part of a step after every epoch");
  app.add_option("--checkpoint", o.checkpoint,
                 "Save a checkpoint (parameters, optimizer state, epoch) to this directory after every epoch")
      ->type_name("DIR");
  app.add_option("--resume", o.resume, "Continue the run whose checkpoint is in DIR (same options; --epochs is the total)")
      ->type_name("DIR");
  app.add_option("--stop-after", o.stop_after,
                 "End the run after this epoch, as if interrupted there (with --checkpoint: --resume continues it; "
                 "0: after --epochs)")
      ->capture_default_str()
      ->check(at_least(0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << name << ": error: " << e.what() << "\nrun '" << name << " --help' for usage\n";
    return 2;
  }
  std::tie(o.lr_given, o.momentum_given, o.optimizer_given) = std::tuple(lr->count(), momentum->count(), optimizer->count());
  if (warmup->count() == 0) o.warmup = program.warmup_fraction * o.epochs;
  if (shift->count() == 0 && o.device_data) o.shift = 0;   // the program's default is for index batches
  try {
    if (o.warmup > 0 && o.warmup >= o.epochs)
      throw CommandLineError(fmt::format("--warmup {:g} must be fewer epochs than --epochs {}", o.warmup, o.epochs));
    if (o.shift > 0 && o.device_data)
      throw CommandLineError("--shift moves the images of the index-batch mode; it cannot be combined with --device-data");
    prepare_out_dir(o.out);
    return train(o);
  } catch (const CommandLineError& e) {
    std::cerr << name << ": error: " << e.what() << "\nrun '" << name << " --help' for usage\n";
    return 2;
  } catch (const fashion_mnist::DataError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
  } catch (const synk::UserError& e) {
    // A diagnostic from the model's source reads "FILE:LINE:COL: error: ..." already.
    const std::string what = e.what();
    std::cerr << name << ": " << (what.find(": error: ") == std::string::npos ? "error: " : "") << what << "\n";
  } catch (const synk::Error& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << name << ": internal error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace fashion_mnist
