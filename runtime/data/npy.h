// Reading and writing NumPy .npy files (format versions 1, 2 and 3; little-endian; C order).
// Every problem (not an .npy file, Fortran order, big-endian or unsupported dtype, truncated data)
// is a UsageError naming the file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt::npy {

struct Header {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t data_offset = 0;       // where the elements start in the file
};

Header read_header(const std::string& path);
// Reads the elements described by `header` (from read_header(path)) into `dst`.
void read_data(const std::string& path, const Header& header, void* dst);
Array read(const std::string& path);
void write(const std::string& path, const ArrayRef& array);
// The bytes before the header text: the magic string, the format version `major`.0 and the
// header's length (2 bytes in version 1, 4 in versions 2 and 3), little-endian.
std::string preamble(int major, size_t header_length);

// A file built into the program: reading `path` (read_header, read_data, read) reads these bytes
// instead of the file system. synkc's artifacts embed the .npy files their load() initialisers
// name, so that a binary runs without them. `data` must live as long as the program.
void embed(const std::string& path, const void* data, size_t size);
bool is_embedded(const std::string& path);

}  // namespace synk::rt::npy
