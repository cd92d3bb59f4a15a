// The .npy reader and writer (see npy.h). The header is a Python dict literal; we parse just the
// subset NumPy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
#include "runtime/data/npy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/errors.h"
#include "base/npy_format.h"
#include "runtime/data/dtype.h"

namespace synk::rt::npy {

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

struct EmbeddedFile {
  const void* data;
  size_t size;
};
std::mutex& embedded_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::map<std::string, EmbeddedFile>& embedded_files() {
  static auto* files = new std::map<std::string, EmbeddedFile>();   // never destroyed: read at exit too
  return *files;
}

File open_file(const std::string& path, const char* mode) {
  refuse_nul_in_path(path, mode[0] == 'r' ? "reading an .npy file" : "writing an .npy file");
  if (mode[0] == 'r') {
    std::lock_guard lock(embedded_mutex());
    if (auto it = embedded_files().find(path); it != embedded_files().end()) {
      // A FILE over the bytes, so that one reader serves both (fmemopen does not write in "rb").
      File f(fmemopen(const_cast<void*>(it->second.data), it->second.size, "rb"), &std::fclose);
      if (!f) throw UsageError(fmt::format("cannot read the copy of '{}' built into this program: {}", path,
                                           std::strerror(errno)));
      return f;
    }
  }
  // fopen opens a directory for reading on Linux; its first read would fail with a message about
  // the magic string.
  std::error_code ec;
  if (mode[0] == 'r' && std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("'{}' is a directory, not an .npy file", path));
  // A FIFO would block the open until a writer came, and has no size to check the data against.
  if (mode[0] == 'r' && std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw UsageError(fmt::format("'{}' is not a regular file (a FIFO, socket or device), not an .npy file", path));
  File f(std::fopen(path.c_str(), mode), &std::fclose);
  if (!f)
    throw UsageError(fmt::format("cannot open '{}' for {}: {}", path,
                                 mode[0] == 'r' ? "reading" : "writing", std::strerror(errno)));
  return f;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UsageError(fmt::format("'{}' is not a readable .npy file: {}", path, what));
}

DType parse_descr(const std::string& descr, const std::string& path) {
  if (std::optional<DType> t = npy_dtype(descr)) return *t;
  if (descr.size() >= 2 && descr[0] == '>')
    throw UsageError(fmt::format("'{}': big-endian dtype '{}' is not supported (only little-endian)",
                                 path, descr));
  throw UsageError(fmt::format(
      "'{}': unsupported dtype '{}' (supported: <f4, <f8, <i4, <i8, |u1, |b1)", path, descr));
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::F16:
    case DType::BF16: break;   // reserved: never the dtype of a runtime array
  }
  throw InternalError(fmt::format("npy: {} values have no .npy form here", dtype_name(t)));
}

// The header of the file `f` is open on, read from its start; leaves `f` anywhere.
Header read_header_of(FILE* f, const std::string& path) {
  unsigned char pre[10];
  if (std::fread(pre, 1, 8, f) != 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    bad(path, "missing the \\x93NUMPY magic string");
  int major = pre[6];
  size_t header_len = 0, prefix_len = 0;
  if (major == 1) {
    if (std::fread(pre + 8, 1, 2, f) != 2) bad(path, "truncated header");
    header_len = size_t(pre[8]) | size_t(pre[9]) << 8;
    prefix_len = 10;
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (std::fread(len, 1, 4, f) != 4) bad(path, "truncated header");
    header_len = size_t(len[0]) | size_t(len[1]) << 8 | size_t(len[2]) << 16 | size_t(len[3]) << 24;
    prefix_len = 12;
  } else {
    bad(path, fmt::format("unknown format version {}.{}", major, int(pre[7])));
  }
  if (header_len > kNpyMaxHeaderBytes) bad(path, "header too large");
  std::string text(header_len, '\0');
  if (std::fread(text.data(), 1, header_len, f) != header_len) bad(path, "truncated header");

  std::string why;
  std::optional<NpyDict> dict = parse_npy_dict(text, &why);
  if (!dict) bad(path, why);
  if (dict->fortran_order && !npy_order_is_immaterial(dict->shape))
    throw UsageError(fmt::format("'{}': Fortran-order arrays are not supported; save it in C order "
                                 "(numpy.ascontiguousarray)", path));
  Header h;
  h.data_offset = prefix_len + header_len;
  h.dtype = parse_descr(dict->descr, path);
  h.shape = std::move(dict->shape);

  std::optional<int64_t> need = checked_shape_bytes(h.shape, dtype_size(h.dtype));
  if (!need)
    bad(path, fmt::format("impossible shape in header: {} of {} would take {}", shape_string(h.shape),
                          dtype_name(h.dtype), describe_oversize(h.shape, dtype_size(h.dtype))));
  std::fseek(f, 0, SEEK_END);
  const int64_t file_size = std::ftell(f);
  const int64_t have = file_size - int64_t(h.data_offset);   // the header was read: no underflow below 0
  if (file_size < 0 || have < *need)
    bad(path, fmt::format("truncated data: shape {} of {} needs {} bytes, the file has {}",
                          shape_string(h.shape), dtype_name(h.dtype), *need, std::max<int64_t>(have, 0)));
  return h;
}

}  // namespace

Header read_header(const std::string& path) { return Reader(path).header(); }

Reader::Reader(const std::string& path) : path_(path), file_(open_file(path, "rb")) {
  header_ = read_header_of(file_.get(), path_);
}

void Reader::read_data(void* dst) {
  FILE* f = file_.get();
  const size_t need = size_t(checked_shape_bytes(header_.shape, dtype_size(header_.dtype)).value());
  if (std::fseek(f, long(header_.data_offset), SEEK_SET) != 0 || std::fread(dst, 1, need, f) != need)
    bad(path_, "truncated data");
  if (header_.dtype == DType::Bool) {   // any non-zero byte is True, as numpy reads it
    auto* bytes = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < need; ++i) bytes[i] = bytes[i] != 0;
  }
}

Array Reader::read() {
  Array a;
  a.resize(header_.dtype, header_.shape);
  if (!a.bytes.empty()) read_data(a.bytes.data());
  return a;
}

void embed(const std::string& path, const void* data, size_t size) {
  std::lock_guard lock(embedded_mutex());
  embedded_files()[path] = EmbeddedFile{data, size};
}

bool is_embedded(const std::string& path) {
  std::lock_guard lock(embedded_mutex());
  return embedded_files().count(path) > 0;
}

Array read(const std::string& path) { return Reader(path).read(); }

std::string preamble(int major, size_t header_length) {
  std::string pre = "\x93NUMPY";
  pre.push_back(char(major));
  pre.push_back(0);
  pre.push_back(char(header_length & 255));
  pre.push_back(char((header_length >> 8) & 255));
  if (major != 1) {
    pre.push_back(char((header_length >> 16) & 255));
    pre.push_back(char((header_length >> 24) & 255));
  }
  return pre;
}

void write(const std::string& path, const ArrayRef& array) {
  std::string shape;
  for (int64_t d : array.shape) shape += fmt::format("{}, ", d);
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1) shape.resize(shape.size() - 1);
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 descr_of(array.dtype), shape);
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t prefix = 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  int major = 1;
  if (total - prefix > 65535) {
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    major = 2;
  }
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');

  File f = open_file(path, "wb");
  std::string pre = preamble(major, dict.size());
  size_t nbytes = size_t(array.size()) * dtype_size(array.dtype);
  if (std::fwrite(pre.data(), 1, pre.size(), f.get()) != pre.size() ||
      std::fwrite(dict.data(), 1, dict.size(), f.get()) != dict.size() ||
      (nbytes && std::fwrite(array.data, 1, nbytes, f.get()) != nbytes) || std::fflush(f.get()) != 0)
    throw UsageError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
}

}  // namespace synk::rt::npy
