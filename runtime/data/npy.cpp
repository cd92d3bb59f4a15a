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
#include "runtime/data/dtype.h"

namespace synk::rt::npy {

namespace {

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

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
  File f(std::fopen(path.c_str(), mode), &std::fclose);
  if (!f)
    throw UsageError(fmt::format("cannot open '{}' for {}: {}", path,
                                 mode[0] == 'r' ? "reading" : "writing", std::strerror(errno)));
  return f;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UsageError(fmt::format("'{}' is not a readable .npy file: {}", path, what));
}

// A cursor over the header dict text.
struct DictParser {
  const std::string& text;
  const std::string& path;
  size_t pos = 0;

  void skip_ws() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  }
  bool accept(char c) {
    skip_ws();
    if (pos < text.size() && text[pos] == c) return ++pos, true;
    return false;
  }
  void expect(char c) {
    if (!accept(c)) bad(path, fmt::format("malformed header (expected '{}' at offset {})", c, pos));
  }
  std::string quoted() {
    skip_ws();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) bad(path, "malformed header");
    char q = text[pos++];
    size_t end = text.find(q, pos);
    if (end == std::string::npos) bad(path, "malformed header (unterminated string)");
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }
  std::string word() {
    skip_ws();
    size_t start = pos;
    while (pos < text.size() && std::isalnum(static_cast<unsigned char>(text[pos]))) ++pos;
    return text.substr(start, pos - start);
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!accept(')')) {
      std::string w = word();
      if (w.empty() || !std::all_of(w.begin(), w.end(), ::isdigit))
        bad(path, "malformed shape in header");
      std::optional<int64_t> dim = parse_decimal(w);
      if (!dim) bad(path, fmt::format("impossible shape in header: dimension {} does not fit in 64 bits", w));
      dims.push_back(*dim);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
};

DType parse_descr(const std::string& descr, const std::string& path) {
  if (descr.size() >= 2 && descr[0] == '>' && descr.substr(1) != "u1" && descr.substr(1) != "b1")
    throw UsageError(fmt::format("'{}': big-endian dtype '{}' is not supported (only little-endian)",
                                 path, descr));
  std::string body = (descr.size() >= 2 && std::strchr("<|=>", descr[0])) ? descr.substr(1) : descr;
  if (body == "f4") return DType::F32;
  if (body == "f8") return DType::F64;
  if (body == "i4") return DType::I32;
  if (body == "i8") return DType::I64;
  if (body == "u1") return DType::U8;
  if (body == "b1" || body == "?") return DType::Bool;
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

}  // namespace

Header read_header(const std::string& path) {
  File f = open_file(path, "rb");
  unsigned char pre[10];
  if (std::fread(pre, 1, 8, f.get()) != 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    bad(path, "missing the \\x93NUMPY magic string");
  int major = pre[6];
  size_t header_len = 0, prefix_len = 0;
  if (major == 1) {
    if (std::fread(pre + 8, 1, 2, f.get()) != 2) bad(path, "truncated header");
    header_len = size_t(pre[8]) | size_t(pre[9]) << 8;
    prefix_len = 10;
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (std::fread(len, 1, 4, f.get()) != 4) bad(path, "truncated header");
    header_len = size_t(len[0]) | size_t(len[1]) << 8 | size_t(len[2]) << 16 | size_t(len[3]) << 24;
    prefix_len = 12;
  } else {
    bad(path, fmt::format("unknown format version {}.{}", major, int(pre[7])));
  }
  if (header_len > (size_t(1) << 24)) bad(path, "header too large");
  std::string text(header_len, '\0');
  if (std::fread(text.data(), 1, header_len, f.get()) != header_len) bad(path, "truncated header");

  Header h;
  h.data_offset = prefix_len + header_len;
  bool have_descr = false, have_order = false, have_shape = false;
  DictParser p{text, path};
  p.expect('{');
  while (!p.accept('}')) {
    std::string key = p.quoted();
    p.expect(':');
    if (key == "descr") {
      p.skip_ws();
      if (p.pos < text.size() && text[p.pos] == '[')
        throw UsageError(fmt::format("'{}': structured dtypes are not supported", path));
      h.dtype = parse_descr(p.quoted(), path);
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string v = p.word();
      if (v == "True")
        throw UsageError(fmt::format(
            "'{}': Fortran-order arrays are not supported; save it in C order "
            "(numpy.ascontiguousarray)", path));
      if (v != "False") bad(path, "malformed fortran_order");
      have_order = true;
    } else if (key == "shape") {
      h.shape = p.tuple();
      have_shape = true;
    } else {
      bad(path, fmt::format("unexpected header key '{}'", key));
    }
    if (!p.accept(',')) {
      p.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) bad(path, "header lacks descr, fortran_order or shape");

  std::optional<int64_t> need = checked_shape_bytes(h.shape, dtype_size(h.dtype));
  if (!need)
    bad(path, fmt::format("impossible shape in header: {} of {} would take {}", shape_string(h.shape),
                          dtype_name(h.dtype), describe_oversize(h.shape, dtype_size(h.dtype))));
  std::fseek(f.get(), 0, SEEK_END);
  const int64_t file_size = std::ftell(f.get());
  const int64_t have = file_size - int64_t(h.data_offset);   // the header was read: no underflow below 0
  if (file_size < 0 || have < *need)
    bad(path, fmt::format("truncated data: shape {} of {} needs {} bytes, the file has {}",
                          shape_string(h.shape), dtype_name(h.dtype), *need, std::max<int64_t>(have, 0)));
  return h;
}

void read_data(const std::string& path, const Header& header, void* dst) {
  File f = open_file(path, "rb");
  std::optional<int64_t> bytes = checked_shape_bytes(header.shape, dtype_size(header.dtype));
  if (!bytes) bad(path, "impossible shape in header");   // read_header refused it already
  const size_t need = size_t(*bytes);
  if (std::fseek(f.get(), long(header.data_offset), SEEK_SET) != 0 ||
      std::fread(dst, 1, need, f.get()) != need)
    bad(path, "truncated data");
}

void embed(const std::string& path, const void* data, size_t size) {
  std::lock_guard lock(embedded_mutex());
  embedded_files()[path] = EmbeddedFile{data, size};
}

bool is_embedded(const std::string& path) {
  std::lock_guard lock(embedded_mutex());
  return embedded_files().count(path) > 0;
}

Array read(const std::string& path) {
  Header h = read_header(path);
  Array a;
  a.resize(h.dtype, h.shape);
  if (!a.bytes.empty()) read_data(path, h, a.bytes.data());
  return a;
}

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
