// Sizes a Data cannot have: shapes whose element or byte count overflows (a UsageError naming
// the shape and the size, never a wrapped allocation), and allocations larger than /dev/shm has
// free: an honest 400 GB array, and a 100 MiB one under a 64 MiB /dev/shm (SYNK_SHM_LIMIT_BYTES),
// refused before any segment exists, naming the bytes asked and the bytes free; the same through
// load_npy; and a malformed limit. Nothing is left in /dev/shm by a refused Data.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "runtime/data/data.h"
#include "runtime/data/npy.h"
#include "runtime/group/shm.h"
#include "runtime/testing.h"

using namespace synk;

namespace {


class ScopedLimit {
 public:
  explicit ScopedLimit(const char* value) {
    if (value) setenv("SYNK_SHM_LIMIT_BYTES", value, 1);
    else unsetenv("SYNK_SHM_LIMIT_BYTES");
  }
  ~ScopedLimit() { unsetenv("SYNK_SHM_LIMIT_BYTES"); }
};

template <class F>
std::string usage_error_of(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UsageError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(DataLimits, OverflowingShapesAreUsageErrors) {
  std::string e = usage_error_of([] { synk::data(DType::I64, {(int64_t(1) << 61) + 1}); });
  EXPECT_HAS(e, "shape [2305843009213693953] of i64 needs 18446744073709551624 bytes (more than the "
                "9223372036854775807 bytes an array can have)");
  e = usage_error_of([] { synk::data(DType::F32, {3037000500, 3037000500}); });
  EXPECT_HAS(e, "shape [3037000500, 3037000500] of f32 needs 36893488148001000000 bytes");
  e = usage_error_of([] { synk::data(DType::F32, {int64_t(1) << 62, int64_t(1) << 62, 4}); });
  EXPECT_HAS(e, "more than 2^128 bytes");
  Data d(DType::U8, 2, {.name = "grow"});
  e = usage_error_of([&] { d.set_shape({INT64_MAX, 2}); });
  EXPECT_HAS(e, "Data 'grow': set_shape: shape [9223372036854775807, 2] of u8 needs 18446744073709551614 bytes");
  e = usage_error_of([&] { d.set_value(rt::ArrayRef{nullptr, DType::U8, {4611686018427387905, 4}}); });
  EXPECT_HAS(e, "Data 'grow': set_value: shape [4611686018427387905, 4] of u8 needs");
  // Zero elements is fine whatever the other dimensions are.
  Data empty = synk::data(DType::F32, {0, int64_t(1) << 62});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(synk::testing::leftover_segments().empty());
}

TEST(DataLimits, MoreThanSharedMemoryHasIsRefusedAtCreation) {
  ScopedLimit limit("67108864");   // a 64 MiB /dev/shm
  std::string e = usage_error_of([] { synk::data(DType::F32, {26214400}, {.name = "big"}); });
  EXPECT_EQ(e, "Data 'big': set_shape: shape [26214400] of f32 needs 104857600 bytes of shared memory, but /dev/shm "
               "has 67108864 bytes free (limited by SYNK_SHM_LIMIT_BYTES=67108864)");
  EXPECT_TRUE(synk::testing::leftover_segments().empty()) << "no segment was created for it";
  // What fits is created as before.
  Data fits = synk::data(DType::F32, {1 << 20});
  EXPECT_EQ(fits.alloc_size(), 1 << 20);
  // Growing past the limit fails the same way and keeps the Data as it was.
  std::vector<float> v(16, 1.0f);
  Data grows = synk::data<float>(v, {16}, {.name = "grows"});
  e = usage_error_of([&] { grows.set_length(int64_t(40) << 20); });
  EXPECT_HAS(e, "Data 'grows': set_shape: shape [41943040] of f32 needs 167772160 bytes of shared memory");
  EXPECT_EQ(grows.shape(), std::vector<int64_t>{16});
  EXPECT_EQ(grows.view<float>()[15], 1.0f);
}

TEST(DataLimits, LoadNpyOverTheLimit) {
  const std::string path = fmt::format("{}/synk-limits-{}.npy", ::testing::TempDir(), ::getpid());
  rt::Array a;
  a.resize(DType::F64, {1 << 20});   // 8 MiB
  rt::npy::write(path, a.ref());
  ScopedLimit limit("4194304");
  std::string e = usage_error_of([&] { synk::load_npy(path); });
  EXPECT_HAS(e, fmt::format("Data '{}': set_shape: shape [1048576] of f64 needs 8388608 bytes of shared memory, but "
                            "/dev/shm has 4194304 bytes free", path));
  std::remove(path.c_str());
  EXPECT_TRUE(synk::testing::leftover_segments().empty());
}

TEST(DataLimits, AnHonest400GBArrayNamesTheSize) {
  rt::shm::Space space = rt::shm::free_space();
  if (space.free_bytes >= int64_t(400'000'000'000)) GTEST_SKIP() << "this /dev/shm has 400 GB free";
  std::string e = usage_error_of([] { synk::data(DType::F32, {100'000, 1'000'000}, {.name = "w"}); });
  // (The free space itself moves with whatever else runs.)
  EXPECT_HAS(e, "Data 'w': set_shape: shape [100000, 1000000] of f32 needs 400000000000 bytes of shared memory, but "
                "/dev/shm has ");
  EXPECT_HAS(e, " bytes free");
}

TEST(DataLimits, MalformedLimitIsAUsageError) {
  ScopedLimit limit("64MiB");
  std::string e = usage_error_of([] { synk::data(DType::F32, {4}); });
  EXPECT_EQ(e, "SYNK_SHM_LIMIT_BYTES must be a whole number of bytes (0 or more), got '64MiB'");
}
