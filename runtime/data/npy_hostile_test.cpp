// Hostile .npy files: shapes whose element or byte counts overflow, dimensions too long for 64
// bits, headers that lie about their length, version or contents, and data cut short. Each of
// the runtime's readers (npy::read_header, npy::read, synk::load_npy) must refuse every one with
// a UsageError that names the file, and the compile-time header reader (base/npy_format.h) must
// answer with a reason rather than throw or crash. A few valid edge cases must still load.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/errors.h"
#include "base/npy_format.h"
#include "runtime/data/data.h"
#include "runtime/data/npy.h"
#include "runtime/testing.h"

using namespace synk;

namespace {

// A version 1 (or 2) file: magic, version, header length, the header text (padded with spaces
// and a newline unless `raw`), then `data`.
std::string npy_file(const std::string& header, const std::string& data, int major = 1, bool raw = false) {
  std::string dict = header;
  if (!raw) {
    size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + dict.size() + 1) % 64) dict.push_back(' ');
    dict.push_back('\n');
  }
  return rt::npy::preamble(major, dict.size()) + dict + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& order = "False") {
  return fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr, order, shape);
}

struct Hostile {
  const char* what;
  std::string bytes;
  const char* expect;   // part of the runtime's message
};

std::vector<Hostile> hostile_files() {
  const std::string d16(16, '\0');
  auto prefix_with_len = [](int major, uint32_t len) {
    std::string out = "\x93NUMPY";
    out.push_back(char(major));
    out.push_back(0);
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(char((len >> (8 * i)) & 255));
    return out;
  };
  return {
      {"overflowing shape, 16 bytes of data", npy_file(dict("<f4", "(4611686018427387905, 4)"), d16), "impossible shape"},
      {"2^62 x 4 elements", npy_file(dict("<f4", "(4611686018427387904, 4)"), d16), "impossible shape"},
      {"element count overflow", npy_file(dict("<f4", "(3037000500, 3037000500)"), d16), "impossible shape"},
      {"byte count overflow (i8)", npy_file(dict("<i8", "(2305843009213693953,)"), d16), "impossible shape"},
      {"byte count overflow (f4)", npy_file(dict("<f4", "(2305843009213693952,)"), d16), "impossible shape"},
      {"2^32 x 2^32 bytes", npy_file(dict("|u1", "(4294967296, 4294967296)"), d16), "impossible shape"},
      {"three large dimensions", npy_file(dict("<f8", "(1048576, 1048576, 1048576)"), d16), "impossible shape"},
      {"20-digit dimension", npy_file(dict("<f4", "(99999999999999999999,)"), d16), "does not fit in 64 bits"},
      {"2^63 dimension", npy_file(dict("<f4", "(9223372036854775808,)"), d16), "does not fit in 64 bits"},
      {"2^64 dimension", npy_file(dict("<f4", "(18446744073709551616, 1)"), d16), "does not fit in 64 bits"},
      {"100-digit dimension", npy_file(dict("<f4", "(" + std::string(100, '9') + ",)"), d16), "does not fit in 64 bits"},
      {"INT64_MAX bytes, none there", npy_file(dict("|u1", "(9223372036854775807,)"), ""), "truncated data"},
      {"1 TB claimed, 1 KB there", npy_file(dict("<f4", "(274877906944,)"), std::string(1024, '\0')), "truncated data"},
      {"honest 400 GB header, no data", npy_file(dict("<f4", "(100000, 1000000)"), ""), "truncated data"},
      {"one byte short", npy_file(dict("<f4", "(3,)"), std::string(11, '\0')), "truncated data"},
      {"half the rows", npy_file(dict("<f8", "(10, 2)"), std::string(80, '\0')), "truncated data"},
      {"negative dimension", npy_file(dict("<f4", "(-1, 3)"), d16), "malformed shape"},
      {"suffixed dimension", npy_file(dict("<f4", "(3x, 4)"), d16), "malformed shape"},
      {"a suffix alone", npy_file(dict("<f4", "(L,)"), d16), "malformed shape"},
      {"text after the dict", npy_file(dict("<f4", "(2,)") + " junk", d16), "text after the dict"},
      {"a second dict", npy_file(dict("<f4", "(2,)") + dict("<f4", "(4,)"), d16), "text after the dict"},
      {"nested tuple", npy_file(dict("<f4", "((2, 3),)"), d16), "malformed shape"},
      {"unterminated tuple", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4", d16), "malformed"},
      {"double comma", npy_file(dict("<f4", "(1, , 2)"), d16), "malformed shape"},
      {"float dimension", npy_file(dict("<f4", "(2.5,)"), d16), "malformed"},
      {"shape is a list", npy_file(dict("<f4", "[2, 2]"), d16), "malformed"},
      {"no dict", npy_file("hello", d16), "malformed"},
      {"unterminated dict", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", d16), "malformed"},
      {"unterminated string", npy_file("{'descr': '<f4", d16), "unterminated string"},
      {"missing shape", npy_file("{'descr': '<f4', 'fortran_order': False, }", d16), "header lacks"},
      {"missing descr", npy_file("{'fortran_order': False, 'shape': (2,), }", d16), "header lacks"},
      {"unknown key", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'evil': 1, }", d16),
       "unexpected header key"},
      {"descr not a string", npy_file("{'descr': 5, 'fortran_order': False, 'shape': (2,), }", d16), "malformed"},
      {"complex dtype", npy_file(dict("<c16", "(1,)"), d16), "unsupported dtype"},
      {"big-endian", npy_file(dict(">f4", "(2,)"), d16), "big-endian"},
      {"structured dtype", npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", d16),
       "structured dtypes"},
      {"Fortran order", npy_file(dict("<f4", "(2, 2)", "True"), d16), "Fortran-order"},
      {"fortran_order maybe", npy_file(dict("<f4", "(2,)", "Maybe"), d16), "malformed fortran_order"},
      {"header length past the end", prefix_with_len(1, 60000) + "{'descr'", "truncated header"},
      {"v2 header length 4 GiB", prefix_with_len(2, 0xFFFFFFFFu) + "{}", "header too large"},
      {"version 4", npy_file(dict("<f4", "(2,)"), d16, 4), "unknown format version"},
      {"version 0", npy_file(dict("<f4", "(2,)"), d16, 0), "unknown format version"},
      {"bad magic", std::string("\x93NUMPZ\x01\x00", 8) + std::string(64, ' '), "magic string"},
      {"three bytes", "\x93NU", "magic string"},
      {"empty file", "", "magic string"},
      {"magic only", std::string("\x93NUMPY\x01\x00", 8), "truncated header"},
      {"NUL in the header", npy_file(std::string("{'descr': '<f4', 'fortran_order': False, 'sha\0pe': (2,), }", 59), d16),
       "unexpected header key"},
      {"shape given twice", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'shape': (2,), }", d16),
       "duplicate header key 'shape'"},
  };
}

std::string write_temp(const std::string& bytes, int index) {
  std::string path = fmt::format("{}/synk-hostile-{}-{}.npy", ::testing::TempDir(), ::getpid(), index);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}


}  // namespace

TEST(NpyHostile, EveryReaderRefusesEveryFileWithAUserError) {
  std::vector<Hostile> files = hostile_files();
  ASSERT_GE(files.size(), 40u);
  for (size_t i = 0; i < files.size(); ++i) {
    const Hostile& h = files[i];
    SCOPED_TRACE(h.what);
    const std::string path = write_temp(h.bytes, int(i));
    try {
      rt::npy::read_header(path);
      ADD_FAILURE() << "read_header accepted it";
    } catch (const UsageError& e) {
      EXPECT_HAS(e.what(), path);
      EXPECT_HAS(e.what(), h.expect);
    }
    EXPECT_THROW(rt::npy::read(path), UsageError);
    EXPECT_THROW(synk::load_npy(path), UsageError);
    EXPECT_THROW(synk::load_npy(path, DType::F64, {.force_cast = true}), UsageError);
    std::string why;
    std::optional<NpyHeader> header;
    EXPECT_NO_THROW(header = read_npy_header(path, &why));
    if (!header) {
      EXPECT_FALSE(why.empty());
    } else {
      // The compile-time reader accepts only what semantic analysis then refuses on its own checks
      // (dtype, order, a size that does not fit, data cut short): both read the header one way.
      const bool refused_later = !header->dtype || header->fortran_order ||
                                 !checked_shape_bytes(header->shape, dtype_size(*header->dtype)) ||
                                 header->data_bytes < uint64_t(*checked_shape_bytes(header->shape, dtype_size(*header->dtype)));
      EXPECT_TRUE(refused_later) << "read_npy_header accepted a file the runtime refuses";
    }
    // What the compile-time reader accepts it reports as it is: a shape it returns always fits.
    if (header && header->dtype) {
      int64_t elements = 1;
      for (int64_t d : header->shape) {
        EXPECT_GE(d, 0);
        EXPECT_FALSE(__builtin_mul_overflow(elements, d, &elements)) << "a shape whose count overflows";
      }
    }
    std::remove(path.c_str());
  }
  EXPECT_TRUE(synk::testing::leftover_segments().empty()) << "no Data segment survives a refused file";
}

TEST(NpyHostile, ImpossibleShapesAreNamedByTheCompileTimeReader) {
  const std::string d16(16, '\0');
  const std::string path = write_temp(npy_file(dict("<f4", "(4611686018427387905, 4)"), d16), 1000);
  std::string why;
  EXPECT_FALSE(read_npy_header(path, &why));
  EXPECT_EQ(why, "has an impossible shape: (4611686018427387905, 4) of f32 would take 73786976294838206480 bytes "
                 "(more than the 9223372036854775807 bytes an array can have)");
  const std::string long_dim = write_temp(npy_file(dict("<f4", "(99999999999999999999,)"), d16), 1001);
  EXPECT_FALSE(read_npy_header(long_dim, &why));
  EXPECT_EQ(why, "is not a readable .npy file: impossible shape in header: dimension 99999999999999999999 does not "
                 "fit in 64 bits");
  std::remove(path.c_str());
  std::remove(long_dim.c_str());
}

TEST(NpyHostile, ValidEdgeCasesStillLoad) {
  // Zero elements whatever the other dimensions: numpy writes such files, and they hold nothing.
  const std::string empty = write_temp(npy_file(dict("<f4", "(0, 4611686018427387904, 4611686018427387904)"), ""), 2000);
  rt::Array a = rt::npy::read(empty);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{0, 4611686018427387904, 4611686018427387904}));
  EXPECT_TRUE(a.bytes.empty());
  // Trailing bytes after the data are ignored, as numpy does.
  const std::string longer = write_temp(npy_file(dict("<i4", "(2,)"), std::string("\1\0\0\0\2\0\0\0extra", 13)), 2001);
  rt::Array b = rt::npy::read(longer);
  ASSERT_EQ(b.size(), 2);
  EXPECT_EQ(b.data<int32_t>()[1], 2);
  // A bool byte other than 0 and 1 is True, as numpy reads it.
  const std::string bools = write_temp(npy_file(dict("|b1", "(4,)"), std::string("\0\1\2\xff", 4)), 2002);
  rt::Array c = rt::npy::read(bools);
  EXPECT_EQ(std::vector<uint8_t>(c.data<uint8_t>(), c.data<uint8_t>() + 4), (std::vector<uint8_t>{0, 1, 1, 1}));
  // A comment after the dict is part of a Python literal's text, which numpy reads.
  const std::string commented = write_temp(npy_file(dict("<i4", "(1,)") + " # a note", std::string(4, '\0')), 2004);
  EXPECT_EQ(rt::npy::read(commented).shape, (std::vector<int64_t>{1}));
  std::remove(commented.c_str());
  // Python 2's numpy wrote `(2L, 2L)`, which numpy still reads.
  const std::string py2 = write_temp(npy_file(dict("<f4", "(2L, 1l)"), std::string(8, '\0')), 2003);
  EXPECT_EQ(rt::npy::read(py2).shape, (std::vector<int64_t>{2, 1}));
  std::remove(py2.c_str());
  std::remove(bools.c_str());
  std::remove(empty.c_str());
  std::remove(longer.c_str());
}

// A 1-D array saved with fortran_order True has the bytes of the C-order one (numpy writes such
// files); both readers take it, and read it as numpy does.
TEST(NpyHostile, FortranOrderOfOneDimensionIsReadAsNumpyReadsIt) {
  const std::string path = write_temp(npy_file(dict("<i4", "(2,)", "True"), std::string("\1\0\0\0\2\0\0\0", 8)), 3000);
  rt::Array a = rt::npy::read(path);
  ASSERT_EQ(a.size(), 2);
  EXPECT_EQ(a.data<int32_t>()[1], 2);
  std::string why;
  std::optional<NpyHeader> header = read_npy_header(path, &why);
  ASSERT_TRUE(header) << why;
  EXPECT_FALSE(header->fortran_order) << "the order does not matter for this shape";
  std::remove(path.c_str());
}

// The header and the data come from one open file: a file renamed over the path between the two
// (an atomic replace) does not pair the old header with the new bytes.
TEST(NpyHostile, AFileReplacedAfterItsHeaderWasReadIsReadWhole) {
  const std::string path = write_temp(npy_file(dict("<i4", "(2,)"), std::string("\1\0\0\0\2\0\0\0", 8)), 3001);
  const std::string other = write_temp(npy_file(dict("<i4", "(2,)") + std::string(200, ' '),
                                                std::string("\7\0\0\0\7\0\0\0", 8)), 3002);
  rt::npy::Reader file(path);
  ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);
  int32_t values[2] = {0, 0};
  file.read_data(values);
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 2);
  EXPECT_EQ(rt::npy::read(path).data<int32_t>()[0], 7) << "a new open reads the new file";
  std::remove(path.c_str());
}

TEST(NpyHostile, APathWithANulByteIsRefused) {
  const std::string path = write_temp(npy_file(dict("<i4", "(2,)"), std::string(8, '\0')), 3003);
  const std::string with_nul = path + std::string("\0junk", 5);
  try {
    rt::npy::read(with_nul);
    ADD_FAILURE() << "a path with a NUL byte was read as the shorter path";
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "holds a NUL byte");
  }
  EXPECT_THROW(rt::npy::write(with_nul, rt::npy::read(path).ref()), UsageError);
  std::remove(path.c_str());
}

// A FIFO is refused before it is opened: the open would wait for a writer forever (in Python with
// the process's threads stopped behind it) and a FIFO has no size to check the data against.
TEST(NpyHostile, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string path = fmt::format("{}/synk-hostile-fifo-{}.npy", ::testing::TempDir(), ::getpid());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  try {
    rt::npy::read(path);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const UsageError& e) {
    EXPECT_HAS(e.what(), "is not a regular file");
  }
  std::string why;
  EXPECT_FALSE(read_npy_header(path, &why));
  EXPECT_HAS(why, "is not a regular file");
  std::remove(path.c_str());
}
