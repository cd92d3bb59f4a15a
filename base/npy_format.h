// Reads just the header of a NumPy .npy file (dtype and shape), so that semantic analysis can
// check a `load("w.npy")` initializer against the declared type when the program is compiled,
// with the error at the initializer. The runtime reads the data itself (runtime/data/npy.h); this
// copy keeps dsl/ free of runtime dependencies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace synk {

struct NpyHeader {
  std::string descr;              // as written, e.g. "<f4"
  std::optional<DType> dtype; // null when synk has no such dtype
  bool fortran_order = false;
  std::vector<int64_t> shape;
  uint64_t data_bytes = 0;        // the bytes after the header (what the elements have to fill)
};

// nullopt with a reason ("not a .npy file", "malformed header") when the header is unreadable.
// An embedded file (below) is read from memory.
std::optional<NpyHeader> read_npy_header(const std::string& path, std::string* error);

// A .npy file built into the program (synkc artifacts embed the files of load() initialisers):
// semantic analysis finds `path` (compared after lexical normalisation) here instead of on disk.
// `data` must live as long as the program. The runtime keeps its own table (runtime/data/npy.h).
void embed_npy(const std::string& path, const void* data, size_t size);
bool is_embedded_npy(const std::string& path);


}  // namespace synk
