// .npy header reader for compile-time checks of load() initializers (see npy_header.h). The
// header is a Python dict literal; we read the subset NumPy writes:
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
#include "base/npy_format.h"

#include "base/checked_math.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace synk {

namespace {

std::optional<DType> dtype_of_descr(const std::string& d) {
  if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '=')) return std::nullopt;
  std::string kind = d.substr(1);
  if (kind == "f4") return DType::F32;
  if (kind == "f8") return DType::F64;
  if (kind == "i4") return DType::I32;
  if (kind == "i8") return DType::I64;
  if (kind == "u1") return DType::U8;
  if (kind == "b1") return DType::Bool;
  return std::nullopt;
}

// The value text after `'key':` in the header dict, up to the next top-level comma.
std::optional<std::string> dict_value(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  if (at == std::string::npos) return std::nullopt;
  size_t colon = header.find(':', at);
  if (colon == std::string::npos) return std::nullopt;
  size_t start = colon + 1;
  int depth = 0;
  size_t end = start;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if ((c == ',' || c == '}') && depth == 0) break;
  }
  std::string v = header.substr(start, end - start);
  size_t b = v.find_first_not_of(" \t");
  size_t e = v.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
}

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
    // The header is at most 12 + 1 MiB bytes (checked below); the data is not read here.
    copy.str(std::string(e->data, std::min(e->size, size_t(12 + (1u << 20)))));
  } else {
    file.open(path, std::ios::binary);
    if (!file) return fail("cannot be opened");
    std::error_code ec;
    file_size = std::filesystem::file_size(path, ec);
    if (ec) return fail("cannot be opened");
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
  if (header_len > (1u << 20)) return fail("has an implausibly large header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return fail("has a truncated header");

  NpyHeader out;
  uint64_t header_end = 8 + uint64_t(len_size) + header_len;
  out.data_bytes = file_size > header_end ? file_size - header_end : 0;
  auto descr = dict_value(header, "descr");
  auto order = dict_value(header, "fortran_order");
  auto shape = dict_value(header, "shape");
  if (!descr || !order || !shape || descr->size() < 2 || shape->empty() || (*shape)[0] != '(')
    return fail("has a malformed header");
  out.descr = descr->substr(1, descr->size() - 2);
  out.dtype = dtype_of_descr(out.descr);
  out.fortran_order = *order == "True";
  std::string dims = shape->substr(1, shape->size() >= 2 ? shape->size() - 2 : 0);
  size_t pos = 0;
  while (pos < dims.size()) {
    while (pos < dims.size() && (std::isspace(static_cast<unsigned char>(dims[pos])) || dims[pos] == ',')) ++pos;
    if (pos >= dims.size()) break;
    size_t start = pos;
    while (pos < dims.size() && std::isdigit(static_cast<unsigned char>(dims[pos]))) ++pos;
    if (start == pos) return fail("has a malformed shape");
    std::optional<int64_t> dim = parse_decimal(std::string_view(dims).substr(start, pos - start));
    if (!dim)
      return fail("has an impossible shape: dimension " + dims.substr(start, pos - start) +
                  " does not fit in 64 bits");
    out.shape.push_back(*dim);
  }
  if (out.dtype && !checked_shape_bytes(out.shape, dtype_size(*out.dtype)))
    return fail("has an impossible shape: (" + dims + ") of " + dtype_name(*out.dtype) + " would take " +
                describe_oversize(out.shape, dtype_size(*out.dtype)));
  return out;
}

}  // namespace synk
