// The .npy header, read one way for the whole project: the dict parser and the dtype table below
// serve the runtime's reader (runtime/data/npy.h) and the compile-time check of a `load("w.npy")`
// initializer (read_npy_header, which reads just the header so that semantic analysis can report
// a file that does not fit its declaration at the initializer), so the two accept the same files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"

namespace synk {

// The longest header either reader accepts (numpy writes a few hundred bytes).
inline constexpr size_t kNpyMaxHeaderBytes = size_t(1) << 24;

// The three fields of the header dict, parsed strictly: the dict numpy writes,
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, each key exactly once and no other.
struct NpyDict {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};
// nullopt with the reason in `error` ("malformed header (expected ':' at offset 9)", "duplicate
// header key 'shape'", "structured dtypes are not supported", ...).
std::optional<NpyDict> parse_npy_dict(std::string_view text, std::string* error);

// synk's dtype for a descr ('<f4', '|u1', '=i8', '?', ...; big-endian only for one-byte kinds);
// nullopt for any other.
std::optional<DType> npy_dtype(std::string_view descr);

// Whether a Fortran-order array of this shape has the bytes of the C-order one (at most one
// dimension larger than 1), so that it can be read as if it were in C order.
bool npy_order_is_immaterial(const std::vector<int64_t>& shape);

struct NpyHeader {
  std::string descr;              // as written, e.g. "<f4"
  std::optional<DType> dtype; // null when synk has no such dtype
  bool fortran_order = false;     // and the order matters (npy_order_is_immaterial is false)
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
