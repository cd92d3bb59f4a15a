// ResNet models as .synk text (examples/resnet): a generator parameterised by depth (18/34/50:
// ImageNet style, 7x7 stem and four stages of basic or bottleneck blocks; 20/32/44/56: CIFAR
// style, 3x3 stem and three stages of basic blocks), image size, input channels and classes. A
// model has 19-53 convolutions, each with its own weights and batch-norm variables, so writing
// it by hand would be hundreds of shared declarations; the generated text declares them all and
// composes the network from a few reusable helpers (conv-BN, basic block, bottleneck block), so
// it reads like the layer table of the paper. resnet_gen writes it to a file, resnet_demo
// JIT-compiles it, and resnet20_fashion.synk is the checked-in output for Fashion-MNIST.
#pragma once

#include <string>
#include <vector>

namespace resnet {

struct Config {
  int depth = 50;    // 18, 34, 50 (ImageNet style) or 20, 32, 44, 56 (CIFAR style, 6n+2)
  int image = 224;   // input height = width
  int pad_to = 0;    // > image: the stem sees the image zero-padded to pad_to x pad_to (0: no padding)
  int channels = 3;  // input channels
  int classes = 1000;
  bool fashion = false;  // Fashion-MNIST form: u8[n, 784] images, the trainer's train_device and shared data
  std::string optimizer = "momentum(lr=0.05, momentum=0.9)";
  // Regularisation of the training functions: weight decay (an L2 term weight_decay / 2 * sum(w * w)
  // over the convolution and dense weights in the minimised loss, which is SGD's weight decay) and
  // random horizontal flips of each training image with probability 1/2, and label smoothing: the
  // loss against (1 - e) of the one-hot label plus e spread evenly over the classes (0 / false: none).
  double weight_decay = 0;
  bool flip = false;
  double label_smoothing = 0;
  std::string command;  // the command line that generated it, quoted in the header
};

// True for the depths of the ImageNet-style family (18, 34, 50).
bool imagenet_style(int depth);

// The depths the generator accepts.
std::vector<int> supported_depths();

// The model's .synk text: shared declarations, optimizer `opt`, helpers, and the functions
// `train` (scatter images and labels; minimize ... using opt), `evaluate` (loss, accuracy) and,
// with `fashion`, `train_device` over the sliceable train_images / train_labels (the interface
// of examples/fashion_mnist/model.h). std::invalid_argument for a depth, size or count that
// cannot work (the message says why).
std::string generate(const Config& config);

}  // namespace resnet
