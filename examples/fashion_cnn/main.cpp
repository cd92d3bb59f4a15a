// fashion_cnn: data-parallel training of a convolutional network (cnn.synk: two conv-BN-ReLU-pool
// blocks and a dense head, written with helpers) on Fashion-MNIST with synk. The program is the
// MLP example's (examples/fashion_mnist/trainer.cpp): the same command line, shuffled index
// batches, one flat gradient all-reduce per step, validation on held-out training images with
// num_slices, the test set once at the end, progress bar, per-epoch lines, saved parameters.
//
//   fashion_cnn [--ranks N] [--epochs 10] [--batch 256] [--lr 0.05] [--out DIR] ... (--help)
#include "examples/fashion_mnist/trainer.h"

int main(int argc, char** argv) {
  return fashion_mnist::run_program({.name = "fashion_cnn",
                                     .model_path = SYNK_FASHION_CNN_MODEL,
                                     .summary = "CNN conv32-conv64-128-10 (3x3 conv, batch norm, ReLU, 2x2 max pool; f32)",
                                     .out = "fashion_cnn_params"},
                                    argc, argv);
}
