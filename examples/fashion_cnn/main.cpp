// fashion_cnn: data-parallel training of a convolutional network (cnn.synk: two conv-BN-ReLU-pool
// blocks and a dense head, written with helpers) on Fashion-MNIST with synk. The program is the
// MLP example's (examples/fashion_mnist/trainer.cpp): the same command line, shuffled index
// batches, one flat gradient all-reduce per step, validation on held-out training images with
// num_slices, the test set once at the end, progress bar, per-epoch lines, saved parameters.
//
//   fashion_cnn [--ranks N] [--epochs 10] [--batch 128] [--lr 0.1] [--out DIR] ... (--help)
#include "examples/fashion_mnist/trainer.h"

int main(int argc, char** argv) {
  return fashion_mnist::run_program({.name = "fashion_cnn",
                                     .model_path = SYNK_FASHION_CNN_MODEL,
                                     .summary = "CNN conv32-conv64-128-10 (3x3 conv, batch norm, ReLU, 2x2 max pool; f32)",
                                     .out = "fashion_cnn_params",
                                     // The recipe that reaches 92.5% in 10 epochs (docs/performance/models.md,
                                     // "Fashion-MNIST CNN"): with cnn.synk's nesterov(lr=0.1), batch 128,
                                     // a warm-up over the first 30% of the epochs, then a cosine to 0.
                                     .lr = 0.1,
                                     .batch = 128,
                                     .cosine = true,
                                     .warmup_fraction = 0.3},
                                    argc, argv);
}
