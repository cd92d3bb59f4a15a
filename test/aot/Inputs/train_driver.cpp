// Driver for test/aot/train.test: five training steps of examples/fashion_mnist/mlp.synk on
// random bytes, either through the generated one-call accessor mlp::train_step() ("step") or as
// the three calls it stands for ("calls": train, all_reduce(avg) of opt_grads, opt_update; the 96
// rows split evenly, so the step's reduction is that plain average). Prints each step's loss and
// a checksum of w3 as exact hex floats, so the two modes can be diffed. Before step 3 the
// learning rate drops to 0.02: through the step's set_lr ("step", "resume") or a broadcast of the
// optimizer's variable opt_lr ("calls"), which must give the same bits. "resume DIR" runs the
// steps through the accessor with mlp::save_checkpoint(DIR) after step 1, then loads it, runs
// steps 2-4 again, and says whether w3 came out the same bits and the step index came back.
// Usage: app RANKS step|calls|resume [DIR]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "mlp.h"

namespace {

// Step i of the run (the learning-rate drop included); returns its loss_sum.
float run_step(int i, const std::string& mode, synk::TrainStep& step, const synk::Data& images,
               const synk::Data& labels, int ranks) {
  if (i == 3) {
    const double lr = 0.02;
    if (mode == "calls") synk::broadcast(mlp::shared("opt_lr").var(), synk::ArrayRef{&lr, synk::rt::DType::F64, {}});
    else step.set_lr(lr);
    std::printf("lr %a\n", mlp::shared("opt_lr").values<double>(ranks - 1)[0]);
  }
  synk::Outputs out;
  if (mode == "calls") {
    out = mlp::train()({images, labels});
    synk::all_reduce(mlp::shared("opt_grads").var(), "avg");
    mlp::opt_update()({});
  } else {
    out = step({images, labels});
  }
  return synk::to_vector<float>(out[0])[0];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int ranks = std::atoi(argv[1]);
  const std::string mode = argv[2];
  if (mode == "resume" && argc != 4) return 2;
  synk::fork(ranks);
  std::mt19937 gen(7);
  const int64_t rows = 96;
  std::vector<uint8_t> img(static_cast<size_t>(rows) * 784);
  std::vector<int64_t> lab(static_cast<size_t>(rows));
  for (auto& v : img) v = uint8_t(gen() % 256);
  for (auto& v : lab) v = int64_t(gen() % 10);
  synk::Data images = synk::data<uint8_t>(img, {rows, 784});
  synk::Data labels = synk::data<int64_t>(lab, {rows});
  synk::TrainStep step = mlp::train_step();
  float first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    const float loss = run_step(i, mode, step, images, labels, ranks);
    if (i == 0) first = loss;
    last = loss;
    std::printf("step %d loss_sum %a\n", i, double(loss));
    if (mode == "resume" && i == 1) mlp::save_checkpoint(argv[3], {{"step", "2"}});
  }
  double checksum = 0;
  for (float v : mlp::shared("w3").values<float>()) checksum += double(v);
  std::printf("w3 checksum %a\n", checksum);
  std::printf("loss decreased: %s\n", last < first ? "yes" : "no");
  if (mode == "resume") {
    const std::vector<float> straight = mlp::shared("w3").values<float>(ranks - 1);
    std::printf("resumed after step %s\n", mlp::load_checkpoint(argv[3]).at("step").c_str());
    // The checkpoint holds the step index too: the step made before the load counts from it, and
    // so does one made after it (every step of the module's `train` shares one count).
    std::printf("step index %lld, a new step's %lld\n", (long long)step.step_index(),
                (long long)mlp::train_step().step_index());
    for (int i = 2; i < 5; ++i) run_step(i, mode, step, images, labels, ranks);
    const std::vector<float> again = mlp::shared("w3").values<float>(ranks - 1);
    std::printf("resumed run identical: %s\n",
                straight.size() == again.size() && std::memcmp(straight.data(), again.data(), 4 * straight.size()) == 0
                    ? "yes" : "no");
  }
  return 0;
}
