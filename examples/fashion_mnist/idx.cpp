// The IDX reader (idx.h), on zlib's gz* functions (which also read uncompressed files as they
// are, so an unpacked IDX file works too).
#include "examples/fashion_mnist/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

namespace fashion_mnist {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

class IdxFile {
 public:
  explicit IdxFile(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec))
      fail("no such file (install the Debian package dataset-fashion-mnist, or pass --data DIR)");
    if (std::filesystem::is_directory(path_, ec)) fail("is a directory");
    errno = 0;
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_) fail(fmt::format("cannot open: {}", errno ? std::strerror(errno) : "out of memory"));
    gzbuffer(file_.get(), 1 << 20);
  }

  [[noreturn]] void fail(const std::string& what) const { throw DataError(fmt::format("{}: {}", path_, what)); }

  // Reads exactly n bytes, or fails saying what was being read and how much was there.
  void read(void* dst, size_t n, const char* what) {
    size_t got = 0;
    while (got < n) {
      unsigned chunk = unsigned(std::min<size_t>(n - got, 1u << 30));
      int r = gzread(file_.get(), static_cast<char*>(dst) + got, chunk);
      if (r < 0) fail(fmt::format("corrupt or unreadable data while reading {}: {}", what, gz_message()));
      if (r == 0) fail(fmt::format("the file ends after {} bytes of {} ({} expected)", got, what, n));
      got += size_t(r);
    }
  }

  uint32_t read_u32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
  }

  // The header's first word, which says what the file holds ("image" or "label" for `kind`).
  void expect_magic(uint32_t expected, const char* kind) {
    uint32_t magic = read_u32("the header");
    if (magic != expected)
      fail(fmt::format("not an IDX {} file: magic number 0x{:08x}, expected 0x{:08x}", kind, magic, expected));
  }

  void expect_end(const char* what) {
    char extra[64];
    int r = gzread(file_.get(), extra, sizeof extra);
    if (r < 0) fail(fmt::format("corrupt data after the {}: {}", what, gz_message()));
    if (r > 0) fail(fmt::format("unexpected bytes after the {} (the file is longer than its header says)", what));
  }

 private:
  std::string gz_message() const {
    int code = 0;
    const char* message = gzerror(file_.get(), &code);
    return code == Z_ERRNO ? std::strerror(errno) : message;
  }
  std::string path_;
  GzFile file_;
};

constexpr uint32_t kImagesMagic = 0x00000803;   // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;   // unsigned bytes, 1 dimension
constexpr uint32_t kMaxCount = 10'000'000;

}  // namespace

Images read_images(const std::string& path) {
  IdxFile file(path);
  file.expect_magic(kImagesMagic, "image");
  uint32_t count = file.read_u32("the header");
  uint32_t rows = file.read_u32("the header"), cols = file.read_u32("the header");
  if (rows != kImageSide || cols != kImageSide)
    file.fail(fmt::format("images are {}x{} pixels, expected {}x{}", rows, cols, kImageSide, kImageSide));
  if (count == 0 || count > kMaxCount) file.fail(fmt::format("implausible image count {} in the header", count));
  Images images;
  images.count = count;
  images.pixels.resize(size_t(count) * kPixels);
  file.read(images.pixels.data(), images.pixels.size(), fmt::format("{} images", count).c_str());
  file.expect_end("images");
  return images;
}

Labels read_labels(const std::string& path) {
  IdxFile file(path);
  file.expect_magic(kLabelsMagic, "label");
  uint32_t count = file.read_u32("the header");
  if (count == 0 || count > kMaxCount) file.fail(fmt::format("implausible label count {} in the header", count));
  Labels labels;
  labels.values.resize(count);
  file.read(labels.values.data(), count, fmt::format("{} labels", count).c_str());
  file.expect_end("labels");
  for (size_t i = 0; i < labels.values.size(); ++i)
    if (labels.values[i] >= kClasses)
      file.fail(fmt::format("label {} at position {} is not a class in 0..{}", labels.values[i], i, kClasses - 1));
  return labels;
}

Split read_split(const std::string& dir, const std::string& prefix) {
  std::string images_path = (std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte.gz")).string();
  std::string labels_path = (std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte.gz")).string();
  Split split{read_images(images_path), read_labels(labels_path)};
  if (int64_t(split.labels.values.size()) != split.images.count)
    throw DataError(fmt::format("{} holds {} images but {} holds {} labels", images_path, split.images.count,
                                labels_path, split.labels.values.size()));
  return split;
}

}  // namespace fashion_mnist
