// libFuzzer target for both .npy readers: any byte string is read as an .npy file by the runtime's
// reader (npy::read_header, npy::read) and by the compile-time header reader (read_npy_header),
// from memory (the readers' embedded-file tables), so no file is written. A UsageError is the
// expected answer to a bad file; anything else that escapes (std::out_of_range, bad_alloc, an
// internal error), a crash, a sanitizer report or a broken invariant is a finding: the array read
// must have exactly the bytes its shape needs, and a shape either reader accepts must fit in int64.
// Built and run by scripts/fuzz-npy.sh SECONDS (clang-14, -fsanitize=fuzzer,address,undefined).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/checked_math.h"
#include "base/errors.h"
#include "base/npy_format.h"
#include "runtime/data/npy.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "synk fuzz finding: %s\n", what);
  std::abort();
}

void check_shape(const std::vector<int64_t>& shape, size_t element_size, const char* reader) {
  if (!synk::checked_shape_bytes(shape, element_size)) {
    std::fprintf(stderr, "%s: ", reader);
    finding("accepted a shape whose size does not fit");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/synk-fuzz/input.npy";
  synk::rt::npy::embed(path, data, size);
  synk::embed_npy(path, data, size);
  try {
    synk::rt::npy::Header h = synk::rt::npy::read_header(path);
    check_shape(h.shape, synk::dtype_size(h.dtype), "npy::read_header");
    synk::rt::Array a = synk::rt::npy::read(path);
    std::optional<int64_t> bytes = synk::checked_shape_bytes(a.shape, synk::dtype_size(a.dtype));
    if (!bytes || a.bytes.size() != size_t(*bytes)) finding("npy::read returned bytes that do not match its shape");
  } catch (const synk::UsageError&) {
  }
  std::string why;
  std::optional<synk::NpyHeader> header = synk::read_npy_header(path, &why);
  if (!header && why.empty()) finding("read_npy_header failed without a reason");
  if (header && header->dtype) check_shape(header->shape, synk::dtype_size(*header->dtype), "read_npy_header");
  return 0;
}
