// Driver for test/aot/train.test: five training steps of examples/fashion_mnist/mlp.synk on
// random bytes, either through the generated one-call accessor mlp::train_step() ("step") or as
// the three calls it stands for ("calls": train, all_reduce(avg) of opt_grads, opt_update). Prints
// each step's loss and a checksum of w3 as exact hex floats, so the two modes can be diffed.
// Before step 3 the learning rate drops to 0.02: through the step's set_lr ("step") or a
// broadcast of the optimizer's variable opt_lr ("calls"), which must give the same bits.
// Usage: app RANKS step|calls
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "mlp.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int ranks = std::atoi(argv[1]);
  const std::string mode = argv[2];
  synk::fork(ranks);
  std::mt19937 gen(7);
  const int64_t rows = 96;
  std::vector<uint8_t> img(static_cast<size_t>(rows) * 784);
  std::vector<int64_t> lab(static_cast<size_t>(rows));
  for (auto& v : img) v = uint8_t(gen() % 256);
  for (auto& v : lab) v = int64_t(gen() % 10);
  synk::Data images = synk::data<uint8_t>(img, {rows, 784});
  synk::Data labels = synk::data<int64_t>(lab, {rows});
  synk::Data scale = synk::data<float>(std::vector<float>{float(ranks) / float(rows)}, {});
  synk::TrainStep step = mlp::train_step();
  float first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    synk::Outputs out;
    if (i == 3) {
      const double lr = 0.02;
      if (mode == "step") step.set_lr(lr);
      else synk::broadcast(mlp::shared("opt_lr").var(), synk::ArrayRef{&lr, synk::rt::DType::F64, {}});
      std::printf("lr %a\n", mlp::shared("opt_lr").values<double>(ranks - 1)[0]);
    }
    if (mode == "step") {
      out = step({images, labels, scale});
    } else {
      out = mlp::train()({images, labels, scale});
      synk::all_reduce(mlp::shared("opt_grads").var(), "avg");
      mlp::opt_update()({});
    }
    float loss = synk::to_vector<float>(out[0])[0];
    if (i == 0) first = loss;
    last = loss;
    std::printf("step %d loss_sum %a\n", i, double(loss));
  }
  double checksum = 0;
  for (float v : mlp::shared("w3").values<float>()) checksum += double(v);
  std::printf("w3 checksum %a\n", checksum);
  std::printf("loss decreased: %s\n", last < first ? "yes" : "no");
  return 0;
}
