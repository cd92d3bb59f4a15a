// fashion_mnist: data-parallel training of a 784-256-256-10 ReLU MLP (mlp.synk) on Fashion-MNIST
// with synk; the program itself (command line, training loop, validation, saving) is trainer.cpp,
// shared with examples/fashion_cnn.
//
//   fashion_mnist [--ranks N] [--epochs 10] [--batch 256] [--lr 0.05] [--out DIR] ... (--help)
#include "examples/fashion_mnist/trainer.h"

int main(int argc, char** argv) {
  return fashion_mnist::run_program({.name = "fashion_mnist",
                                     .model_path = SYNK_FASHION_MNIST_MODEL,
                                     .summary = "MLP 784-256-256-10 (ReLU, f32)",
                                     .out = "fashion_mnist_params"},
                                    argc, argv);
}
