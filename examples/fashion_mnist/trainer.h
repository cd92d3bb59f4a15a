// The Fashion-MNIST training program shared by examples/fashion_mnist (the MLP) and
// examples/fashion_cnn (the CNN): the command line, data, the data-parallel training loop (one
// synk::TrainStep per step: gradient call over a shuffled index batch, one all_reduce(avg) of the
// flat gradient, update call), validation on images held out of the training set, the test set
// once at the end, progress bar, per-epoch lines, saved parameters. Each program's main() names
// its model; the model file must declare the functions model.h lists.
#pragma once

#include <string>

namespace fashion_mnist {

struct Program {
  std::string name;          // "fashion_mnist": the prefix of messages and --help
  std::string model_path;    // the default --model (.synk)
  std::string summary;       // what the model is, for the first line and --help ("MLP 784-256-256-10 ...")
  std::string out;           // the default --out directory
  double lr = 0.05;          // the default --lr (the model's own optimizer is used unless a flag replaces it)
  int batch = 256;           // the default --batch
  int epochs = 10;           // the default --epochs
  int shift = 0;             // the default --shift
  bool cosine = false;       // the default of --cosine / --no-cosine
  double warmup_fraction = 0;   // the default --warmup: this fraction of --epochs
};

// Parses the command line and trains; returns the exit status (0 success, 1 an error or a failed
// --require-accuracy check, 2 a bad command line).
int run_program(const Program& program, int argc, char** argv);

}  // namespace fashion_mnist
