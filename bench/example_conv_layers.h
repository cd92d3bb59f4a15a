// The 3x3 stride-1 convolutions of the examples (fashion_cnn, ResNet-20, the reduced ResNet-50) at
// the images per rank of their usual runs, by name: the layers that the convolution benchmarks
// (conv_algorithms, conv_passes_nhwc) time beside their grids, so that both judge the rules on the
// same shapes.
#pragma once

#include <cstdint>
#include <vector>

namespace synk::bench {

struct ExampleConvLayer {
  int64_t n, c, hw, o;   // images, input channels, plane side, output channels
  const char* name;
};

// 64 images per rank is the examples' default global batch of 128 on 2 ranks; 128 images is batch
// 256 on 2 ranks or 128 on one.
inline std::vector<ExampleConvLayer> example_conv_layers() {
  return {
      {64, 32, 14, 64, "fashion_cnn conv2"},
      {128, 32, 14, 64, "fashion_cnn conv2 (128 images)"},
      {64, 16, 32, 16, "resnet20 stage 1"},
      {64, 32, 16, 32, "resnet20 stage 2"},
      {64, 64, 8, 64, "resnet20 stage 3"},
      {128, 32, 16, 32, "resnet20 stage 2 (128 images)"},
      {128, 64, 8, 64, "resnet20 stage 3 (128 images)"},
      {16, 64, 16, 64, "resnet50 (64x64 images) stage 1"},
      {16, 128, 8, 128, "resnet50 (64x64 images) stage 2"},
      {16, 256, 4, 256, "resnet50 (64x64 images) stage 3"},
  };
}

}  // namespace synk::bench
