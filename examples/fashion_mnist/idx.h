// Reading Fashion-MNIST (and MNIST): gzipped IDX files, as shipped by the Debian package
// dataset-fashion-mnist in /usr/share/datasets/fashion-mnist/. An IDX file is a big-endian
// header (magic 0x00000803 for images with dimensions N, 28, 28; 0x00000801 for labels with
// dimension N) followed by N*28*28 or N unsigned bytes. Every problem (a missing or unreadable
// file, corrupt gzip data, a wrong magic number or image size, a file shorter or longer than
// its header says, a label outside 0..9, image and label counts that differ) is a DataError
// whose message names the file.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int64_t kImageSide = 28;
constexpr int64_t kPixels = kImageSide * kImageSide;
constexpr int64_t kClasses = 10;

struct Images {
  int64_t count = 0;
  std::vector<uint8_t> pixels;   // count * 784, row-major
};

struct Labels {
  std::vector<uint8_t> values;   // each in 0..9
};

Images read_images(const std::string& path);
Labels read_labels(const std::string& path);

// One split: "train" (60,000 images) or "t10k" (10,000) from `dir`, images and labels checked
// against each other.
struct Split {
  Images images;
  Labels labels;
};
Split read_split(const std::string& dir, const std::string& prefix);

}  // namespace fashion_mnist
