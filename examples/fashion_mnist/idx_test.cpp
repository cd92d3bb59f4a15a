// The IDX reader on the real data set (when installed) and on hand-made files with every kind of
// damage: each error must name the file and say what is wrong.
#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "examples/fashion_mnist/idx.h"

namespace fs = std::filesystem;
using namespace fashion_mnist;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const std::string kDataDir = "/usr/share/datasets/fashion-mnist";

std::vector<uint8_t> be32(uint32_t v) { return {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)}; }

std::vector<uint8_t> header(std::initializer_list<uint32_t> words) {
  std::vector<uint8_t> out;
  for (uint32_t w : words) {
    std::vector<uint8_t> b = be32(w);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("synk-idx-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_gz(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    if (!bytes.empty()) gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
    return path;
  }
  std::string write_raw(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
  }
  static std::vector<uint8_t> images(uint32_t count, uint32_t rows = 28, uint32_t cols = 28, int64_t extra = 0) {
    std::vector<uint8_t> b = header({0x803, count, rows, cols});
    b.resize(b.size() + size_t(int64_t(count) * rows * cols + extra), 7);
    return b;
  }
  static std::vector<uint8_t> labels(std::vector<uint8_t> values) {
    std::vector<uint8_t> b = header({0x801, uint32_t(values.size())});
    b.insert(b.end(), values.begin(), values.end());
    return b;
  }
  template <class F>
  static std::string error_of(F f) {
    try {
      f();
    } catch (const DataError& e) {
      return e.what();
    }
    return "<no DataError>";
  }
  fs::path dir_;
};

TEST_F(IdxFiles, TheInstalledDataSet) {
  if (!fs::exists(kDataDir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << kDataDir << " is not installed";
  Split train = read_split(kDataDir, "train");
  Split test = read_split(kDataDir, "t10k");
  EXPECT_EQ(train.images.count, 60000);
  EXPECT_EQ(test.images.count, 10000);
  std::vector<int> per_class(10, 0);
  for (uint8_t l : train.labels.values) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[size_t(c)], 6000) << "class " << c;
  // Not all zeros or constant: pixel values span the byte range.
  auto [lo, hi] = std::minmax_element(train.images.pixels.begin(), train.images.pixels.end());
  EXPECT_EQ(*lo, 0);
  EXPECT_EQ(*hi, 255);
}

TEST_F(IdxFiles, ReadsGzippedAndPlainFiles) {
  Images a = read_images(write_gz("a.gz", images(3)));
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(a.pixels.size(), 3u * 784);
  Labels l = read_labels(write_raw("l.idx", labels({0, 9, 4})));
  EXPECT_EQ(l.values, (std::vector<uint8_t>{0, 9, 4}));
}

TEST_F(IdxFiles, MissingFileNamesItAndThePackage) {
  std::string e = error_of([&] { read_images((dir_ / "nope.gz").string()); });
  EXPECT_HAS(e, "nope.gz: no such file");
  EXPECT_HAS(e, "dataset-fashion-mnist");
  EXPECT_HAS(error_of([&] { read_split(dir_.string(), "train"); }), "train-images-idx3-ubyte.gz: no such file");
  EXPECT_HAS(error_of([&] { read_labels(dir_.string()); }), "is a directory");
}

TEST_F(IdxFiles, CorruptHeaders) {
  std::string path = write_gz("labels-as-images.gz", labels({1, 2, 3}));
  std::string e = error_of([&] { read_images(path); });
  EXPECT_HAS(e, path);
  EXPECT_HAS(e, "not an IDX image file: magic number 0x00000801, expected 0x00000803");
  EXPECT_HAS(error_of([&] { read_labels(write_gz("i.gz", images(1))); }), "not an IDX label file");
  EXPECT_HAS(error_of([&] { read_images(write_gz("small.gz", images(2, 27, 28))); }), "images are 27x28 pixels, expected 28x28");
  EXPECT_HAS(error_of([&] { read_images(write_gz("zero.gz", images(0))); }), "implausible image count 0");
  EXPECT_HAS(error_of([&] { read_images(write_gz("short-header.gz", header({0x803, 5}))); }),
             "the file ends after 0 bytes of the header");
  EXPECT_HAS(error_of([&] { read_images(write_gz("empty.gz", {})); }), "the file ends after 0 bytes of the header");
}

TEST_F(IdxFiles, WrongSizes) {
  std::string e = error_of([&] { read_images(write_gz("truncated.gz", images(3, 28, 28, -100))); });
  EXPECT_HAS(e, "truncated.gz: the file ends after 2252 bytes of 3 images (2352 expected)");
  EXPECT_HAS(error_of([&] { read_images(write_gz("long.gz", images(3, 28, 28, 5))); }),
             "long.gz: unexpected bytes after the images");
  EXPECT_HAS(error_of([&] { read_labels(write_gz("bad-label.gz", labels({1, 12, 3}))); }),
             "label 12 at position 1 is not a class in 0..9");
  write_gz("x-images-idx3-ubyte.gz", images(3));
  write_gz("x-labels-idx1-ubyte.gz", labels({1, 2}));
  e = error_of([&] { read_split(dir_.string(), "x"); });
  EXPECT_HAS(e, "x-images-idx3-ubyte.gz holds 3 images but ");
  EXPECT_HAS(e, "x-labels-idx1-ubyte.gz holds 2 labels");
}

TEST_F(IdxFiles, CorruptGzipData) {
  // A valid gzip stream with bytes flipped in its compressed body.
  std::string path = write_gz("corrupt.gz", images(20));
  std::vector<char> bytes(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(bytes.data(), std::streamsize(bytes.size()));
  for (size_t i = 12; i < bytes.size() - 8; i += 3) bytes[i] = char(bytes[i] ^ 0x5a);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  std::string e = error_of([&] { read_images(path); });
  EXPECT_HAS(e, "corrupt.gz: ");
  EXPECT_TRUE(e.find("corrupt") != std::string::npos || e.find("ends after") != std::string::npos ||
              e.find("magic") != std::string::npos) << e;
}

}  // namespace
