// The .npy header dict parser and dtype table shared by every reader, and the header-only reader
// for compile-time checks of load() initializers (see npy_format.h). The header is a Python dict
// literal; we read the subset NumPy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
#include "base/npy_format.h"

#include "base/checked_math.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace synk {

namespace {

// A cursor over the header dict text; a problem is thrown as DictError and returned by
// parse_npy_dict as its reason.
struct DictError {
  std::string why;
};

struct DictParser {
  std::string_view text;
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
    if (!accept(c)) throw DictError{fmt::format("malformed header (expected '{}' at offset {})", c, pos)};
  }
  std::string quoted() {
    skip_ws();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) throw DictError{"malformed header"};
    const char q = text[pos++];
    const size_t end = text.find(q, pos);
    if (end == std::string_view::npos) throw DictError{"malformed header (unterminated string)"};
    std::string s(text.substr(pos, end - pos));
    pos = end + 1;
    return s;
  }
  std::string word() {
    skip_ws();
    const size_t start = pos;
    while (pos < text.size() && std::isalnum(static_cast<unsigned char>(text[pos]))) ++pos;
    return std::string(text.substr(start, pos - start));
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!accept(')')) {
      std::string w = word();
      // Python 2's numpy wrote long dimensions as `3L`; numpy still reads them (_filter_header).
      if (w.size() > 1 && (w.back() == 'L' || w.back() == 'l')) w.pop_back();
      if (w.empty() || !std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw DictError{"malformed shape in header"};
      std::optional<int64_t> dim = parse_decimal(w);
      if (!dim) throw DictError{fmt::format("impossible shape in header: dimension {} does not fit in 64 bits", w)};
      dims.push_back(*dim);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  NpyDict dict() {
    NpyDict d;
    std::set<std::string> seen;
    expect('{');
    while (!accept('}')) {
      const std::string key = quoted();
      expect(':');
      if (key != "descr" && key != "fortran_order" && key != "shape")
        throw DictError{fmt::format("unexpected header key '{}'", key)};
      if (!seen.insert(key).second) throw DictError{fmt::format("duplicate header key '{}'", key)};
      if (key == "descr") {
        skip_ws();
        if (pos < text.size() && text[pos] == '[') throw DictError{"structured dtypes are not supported"};
        d.descr = quoted();
      } else if (key == "fortran_order") {
        const std::string v = word();
        if (v != "True" && v != "False") throw DictError{"malformed fortran_order"};
        d.fortran_order = v == "True";
      } else {
        d.shape = tuple();
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (seen.size() != 3) throw DictError{"header lacks descr, fortran_order or shape"};
    // numpy pads the dict with spaces and a newline, and reads it as a Python literal, so a
    // comment may follow it too; any other text is not its header.
    for (skip_ws(); pos < text.size() && text[pos] == '#'; skip_ws())
      while (pos < text.size() && text[pos] != '\n') ++pos;
    if (pos != text.size()) throw DictError{fmt::format("malformed header (text after the dict at offset {})", pos)};
    return d;
  }
};

struct EmbeddedNpy {
  const char* data;
  size_t size;
};
std::mutex& embedded_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<std::string, EmbeddedNpy>& embedded() {
  static auto* files = new std::map<std::string, EmbeddedNpy>();
  return *files;
}
std::string normalized(const std::string& path) { return std::filesystem::path(path).lexically_normal().string(); }

std::optional<EmbeddedNpy> find_embedded(const std::string& path) {
  std::lock_guard lock(embedded_mutex());
  auto it = embedded().find(normalized(path));
  if (it == embedded().end()) return std::nullopt;
  return it->second;
}

}  // namespace

void embed_npy(const std::string& path, const void* data, size_t size) {
  std::lock_guard lock(embedded_mutex());
  embedded()[normalized(path)] = EmbeddedNpy{static_cast<const char*>(data), size};
}

bool is_embedded_npy(const std::string& path) { return find_embedded(path).has_value(); }

std::optional<NpyDict> parse_npy_dict(std::string_view text, std::string* error) {
  try {
    return DictParser{text}.dict();
  } catch (const DictError& e) {
    if (error) *error = e.why;
    return std::nullopt;
  }
}

std::optional<DType> npy_dtype(std::string_view descr) {
  std::string_view body = descr;
  if (!descr.empty() && std::strchr("<|=>", descr[0]) && descr.size() >= 2) body = descr.substr(1);
  if (descr.starts_with('>') && body != "u1" && body != "b1") return std::nullopt;
  if (body == "f4") return DType::F32;
  if (body == "f8") return DType::F64;
  if (body == "i4") return DType::I32;
  if (body == "i8") return DType::I64;
  if (body == "u1") return DType::U8;
  if (body == "b1" || body == "?") return DType::Bool;
  return std::nullopt;
}

bool npy_order_is_immaterial(const std::vector<int64_t>& shape) {
  return std::count_if(shape.begin(), shape.end(), [](int64_t d) { return d > 1; }) <= 1;
}

std::optional<NpyHeader> read_npy_header(const std::string& path, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<NpyHeader> {
    if (error) *error = why;
    return std::nullopt;
  };
  std::ifstream file;
  std::istringstream copy;
  uint64_t file_size = 0;
  if (std::optional<EmbeddedNpy> e = find_embedded(path)) {
    file_size = e->size;
    // The header is at most 12 + kNpyMaxHeaderBytes bytes (checked below); the data is not read here.
    copy.str(std::string(e->data, std::min(e->size, 12 + kNpyMaxHeaderBytes)));
  } else {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
      return fail("is not a regular file (a FIFO, socket or device)");   // a FIFO would block the open
    file.open(path, std::ios::binary);
    if (!file) return fail("cannot be opened");
    // The size of the file that is open, not of whatever the path names by now (a rename over it).
    file.seekg(0, std::ios::end);
    const std::streamoff end = file.tellg();
    file.seekg(0, std::ios::beg);
    if (end < 0 || !file) return fail("cannot be opened");
    file_size = uint64_t(end);
  }
  std::istream& in = file.is_open() ? static_cast<std::istream&>(file) : copy;
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) return fail("is not a .npy file");
  uint32_t header_len = 0;
  unsigned char len_bytes[4] = {0, 0, 0, 0};
  int major = static_cast<unsigned char>(magic[6]);
  int len_size = major == 1 ? 2 : 4;
  if (major < 1 || major > 3) return fail("has an unknown .npy format version");
  if (!in.read(reinterpret_cast<char*>(len_bytes), len_size)) return fail("has a truncated header");
  for (int i = len_size - 1; i >= 0; --i) header_len = header_len * 256 + len_bytes[i];
  if (header_len > kNpyMaxHeaderBytes) return fail("has an implausibly large header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return fail("has a truncated header");

  NpyHeader out;
  uint64_t header_end = 8 + uint64_t(len_size) + header_len;
  out.data_bytes = file_size > header_end ? file_size - header_end : 0;
  std::string why;
  std::optional<NpyDict> dict = parse_npy_dict(header, &why);
  if (!dict) return fail("is not a readable .npy file: " + why);
  out.descr = dict->descr;
  out.dtype = npy_dtype(out.descr);
  out.fortran_order = dict->fortran_order && !npy_order_is_immaterial(dict->shape);
  out.shape = dict->shape;
  const std::string dims = fmt::format("{}", fmt::join(out.shape, ", "));
  if (out.dtype && !checked_shape_bytes(out.shape, dtype_size(*out.dtype)))
    return fail("has an impossible shape: (" + dims + ") of " + dtype_name(*out.dtype) + " would take " +
                describe_oversize(out.shape, dtype_size(*out.dtype)));
  return out;
}

}  // namespace synk
