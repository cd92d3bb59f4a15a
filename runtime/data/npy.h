// Reading and writing NumPy .npy files (format versions 1, 2 and 3; little-endian; C order).
// Every problem (not an .npy file, Fortran order, big-endian or unsupported dtype, truncated data)
// is a UsageError naming the file.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt::npy {

struct Header {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t data_offset = 0;       // where the elements start in the file
};

// One open .npy file: its header is read when it is opened, and its elements from the same open
// file, so a file replaced meanwhile (a rename over it) is read whole, old or new, never the
// header of one with the bytes of the other.
class Reader {
 public:
  explicit Reader(const std::string& path);
  const Header& header() const { return header_; }
  // The elements, into `dst` (the header's shape and dtype).
  void read_data(void* dst);
  Array read();

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
  Header header_;
};

Header read_header(const std::string& path);
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
