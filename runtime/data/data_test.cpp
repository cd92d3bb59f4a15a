// Tests of synk::Data (SEMANTICS section 8) and the .npy reader/writer: the safe-cast rule,
// rank checks, oversize and re-allocation, views, and every .npy error form.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/data/data.h"
#include "base/errors.h"
#include "runtime/data/npy.h"
#include "runtime/testing.h"

using namespace synk;
using synk::testing::usage_error_of;
using synk::testing::leftover_segments;

namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "synk_data_test_" + std::to_string(getpid()) + "_" + name;
}

// Writes an .npy file by hand: `dict` is the header text (padded here), then `data`.
void write_raw_npy(const std::string& path, const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += char(major);
  bytes += char(0);
  size_t n = header.size();
  bytes += char(n & 255);
  bytes += char(n >> 8);
  if (major != 1) bytes += std::string{char(n >> 16), char(n >> 24)};
  std::ofstream(path, std::ios::binary) << bytes << header << data;
}

}  // namespace

TEST(Data, FixedDtypeAndRankSafeCasts) {
  Data d(DType::I32, 2, {.name = "counts"});
  EXPECT_EQ(d.shape(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(d.alloc_size(), 0);
  std::vector<uint8_t> u8 = {1, 2, 3, 250, 5, 6};
  d.set_value(u8, {2, 3});   // u8 -> i32 is safe
  EXPECT_EQ(d.dtype(), DType::I32);
  EXPECT_EQ(d.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(d.at<int32_t>(1, 0), 250);

  std::vector<double> f64 = {1.5, 2.5, 3.5, 4.5, 5.5, 6.5};
  std::string msg = usage_error_of([&] { d.set_value(f64, {2, 3}); });
  EXPECT_NE(msg.find("Data 'counts'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected dtype i32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("received f64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("force_cast"), std::string::npos) << msg;
  d.set_value(f64, {2, 3}, /*force_cast=*/true);
  EXPECT_EQ(d.at<int32_t>(0, 1), 2);

  msg = usage_error_of([&] { d.set_value(std::vector<int32_t>{1, 2, 3}, {3}); });
  EXPECT_NE(msg.find("expected a value with 2 dimensions, received 1"), std::string::npos) << msg;
  msg = usage_error_of([&] { d.set_value(std::vector<int32_t>{1, 2, 3}, {3}, true); });
  EXPECT_NE(msg.find("2 dimensions"), std::string::npos) << "force_cast never allows a rank change: " << msg;

  Data f(DType::F32, 1);
  f.set_value(std::vector<int32_t>{1}, {1}, true);
  EXPECT_NE(usage_error_of([&] { f.set_value(std::vector<int32_t>{1}, {1}); }).find("received i32"), std::string::npos)
      << "i32 -> f32 is not a safe cast (numpy rules)";
  Data g(DType::F64, 1);
  g.set_value(std::vector<int32_t>{7, 8}, {2});   // i32 -> f64 is safe
  EXPECT_EQ(g.at<double>(1), 8.0);
  EXPECT_NE(usage_error_of([&] { g.at<float>(0); }).find("typed access as f32 but the dtype is f64"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { g.at<double>(2); }).find("index 2 out of range for axis 0 of length 2"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { g.at<double>(0, 0); }).find("2 indices given for an array of 1 dimension"), std::string::npos);
}

TEST(Data, OversizeGrowShrinkAndFree) {
  Data d(DType::F32, 2, {.name = "x"});
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[size_t(i)] = float(i);
  d.set_value(v, {4, 3}, false, 1.5);
  EXPECT_EQ(d.alloc_size(), 18);   // ceil(12 * 1.5)
  std::string first_segment = d.segment_name();
  d.set_length(6);                 // 18 items fit: same allocation, contents kept
  EXPECT_EQ(d.alloc_size(), 18);
  EXPECT_EQ(d.segment_name(), first_segment);
  EXPECT_EQ(d.at<float>(3, 2), 11.0f);
  d.set_length(2);
  EXPECT_EQ(d.size(), 6);
  EXPECT_EQ(d.alloc_size(), 18) << "shrinking re-views the same allocation";
  d.set_length(7, 2.0);            // 21 > 18: re-allocate ceil(21 * 2) = 42, keep the prefix
  EXPECT_EQ(d.alloc_size(), 42);
  EXPECT_NE(d.segment_name(), first_segment);
  EXPECT_EQ(d.at<float>(1, 2), 5.0f) << "re-allocation keeps the old contents as a prefix";
  EXPECT_TRUE(rt::shm::list(first_segment).empty()) << "the old allocation is removed";
  for (double bad : {0.5, 2.5, -1.0}) {
    std::string msg = usage_error_of([&] { d.set_length(100, bad); });
    EXPECT_NE(msg.find("oversize must be in [1, 2]"), std::string::npos) << msg;
  }
  EXPECT_NE(usage_error_of([&] { d.set_value(v, {4, 3}, false, 3.0); }).find("oversize"), std::string::npos);
  EXPECT_NE(usage_error_of([] { synk::data(DType::F32, {2}, {.oversize = 0.9}); }).find("oversize"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { d.set_shape({2, 2, 2}); }).find("expected 2 dimensions, received 3"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { d.set_length(-1); }).find("length must be >= 0"), std::string::npos);
  d.set_shape({3, 2});
  EXPECT_EQ(d.shape(), (std::vector<int64_t>{3, 2}));
  d.free_memory();
  EXPECT_EQ(d.alloc_size(), 0);
  EXPECT_EQ(d.size(), 0);
  EXPECT_EQ(d.ndim(), 2);
  EXPECT_EQ(d.segment_name(), "");
}

TEST(Data, ViewsAndHandlesShareMemory) {
  Data d = synk::data<double>({1, 2, 3, 4, 5, 6}, {3, 2}, {.name = "m"});
  Data alias = d;
  auto view = alias.view<double>();
  view(2, 1) = 60;
  view[0] = 10;
  EXPECT_EQ(d.at<double>(2, 1), 60);
  EXPECT_EQ(d.to_array().data<double>()[0], 10);
  double sum = 0;
  for (double x : d.view<double>()) sum += x;
  EXPECT_EQ(sum, 10 + 2 + 3 + 4 + 5 + 60);
  EXPECT_EQ(d.length(), 3);
  Data scalar = synk::data<float>({2.5f}, {});
  EXPECT_EQ(scalar.at<float>(), 2.5f);
  EXPECT_NE(usage_error_of([&] { scalar.length(); }).find("0-dimensional"), std::string::npos);
  Data empty;
  EXPECT_NE(usage_error_of([&] { empty.shape(); }).find("empty synk::Data handle"), std::string::npos);
  EXPECT_NE(usage_error_of([] { synk::data<float>({1, 2, 3}, {2, 2}); }).find("3 values given for shape [2, 2]"),
            std::string::npos);
  d.set_minibatch(true);
  EXPECT_TRUE(alias.minibatch());
}

TEST(Npy, RoundTripEveryDtype) {
  auto check = [](auto sample, DType dt, std::vector<int64_t> shape) {
    using T = decltype(sample);
    std::vector<T> values(size_t(rt::shape_size(shape)));
    for (size_t i = 0; i < values.size(); ++i) values[i] = T(i % 7 + 1);
    Data d = synk::data<T>(values, shape);
    std::string path = temp_path(std::string("rt_") + rt::dtype_name(dt) + ".npy");
    d.save_npy(path);
    Data back = synk::load_npy(path);
    EXPECT_EQ(back.dtype(), dt);
    EXPECT_EQ(back.shape(), shape);
    EXPECT_EQ(std::vector<T>(back.view<T>().begin(), back.view<T>().end()), values);
    std::remove(path.c_str());
  };
  check(float{}, DType::F32, {3, 4});
  check(double{}, DType::F64, {5});
  check(int32_t{}, DType::I32, {2, 3, 2});
  check(int64_t{}, DType::I64, {1, 1});
  check(uint8_t{}, DType::U8, {0, 4});
  check(float{}, DType::F32, {});
}

TEST(Npy, ReadsHandWrittenFilesAndConverts) {
  std::string path = temp_path("v2.npy");
  int32_t vals[3] = {4, 5, 6};
  write_raw_npy(path, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }",
                std::string(reinterpret_cast<char*>(vals), sizeof vals), 2);
  Data d = synk::load_npy(path, DType::F64);   // i32 -> f64 safe
  EXPECT_EQ(d.dtype(), DType::F64);
  EXPECT_EQ(d.at<double>(2), 6.0);
  EXPECT_NE(usage_error_of([&] { synk::load_npy(path, DType::F32); }).find("force_cast"), std::string::npos);
  Data forced = synk::load_npy(path, DType::F32, {.force_cast = true});
  EXPECT_EQ(forced.at<float>(0), 4.0f);
  bool flags[2] = {true, false};
  write_raw_npy(path, "{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (2,)}",
                std::string(reinterpret_cast<char*>(flags), 2));
  rt::Array a = rt::npy::read(path);
  EXPECT_EQ(a.dtype, DType::Bool);
  EXPECT_EQ(a.data<bool>()[0], true);
  std::remove(path.c_str());
}

TEST(Npy, ErrorsNameTheFile) {
  std::string path = temp_path("bad.npy");
  auto expect_error = [&](const std::string& dict, const std::string& data, const std::string& needle) {
    write_raw_npy(path, dict, data);
    std::string msg = usage_error_of([&] { synk::load_npy(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  expect_error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'), "Fortran-order");
  expect_error("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'), "big-endian");
  expect_error("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0'), "unsupported dtype '<i2'");
  expect_error("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0'), "unsupported dtype");
  expect_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", std::string(16, '\0'), "truncated data");
  expect_error("{'descr': '<f8', 'shape': (4,), }", std::string(32, '\0'), "lacks");
  std::ofstream(path) << "not an npy file at all";
  EXPECT_NE(usage_error_of([&] { synk::load_npy(path); }).find("magic"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(usage_error_of([&] { synk::load_npy(path); }).find("cannot open"), std::string::npos);
}

TEST(Npy, ADirectoryIsNamedAsOne) {
  // fopen opens a directory for reading; the message must not be about the magic string.
  std::string dir = temp_path("npy_dir");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(usage_error_of([&] { synk::load_npy(dir); }), "'" + dir + "' is a directory, not an .npy file");
  EXPECT_EQ(usage_error_of([&] { rt::npy::read(dir); }), "'" + dir + "' is a directory, not an .npy file");
  std::filesystem::remove(dir);
}

TEST(Npy, EmbeddedFilesAreReadInsteadOfTheFileSystem) {
  // What a synkc artifact does for load("w.npy"): the file's bytes, built into the program.
  std::string path = temp_path("embedded.npy");
  std::vector<double> values = {1.5, -2.0, 3.25};
  synk::data<double>(values, {3}).save_npy(path);
  std::ifstream in(path, std::ios::binary);
  static const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::remove(path.c_str());
  EXPECT_NE(usage_error_of([&] { rt::npy::read(path); }).find("cannot open"), std::string::npos) << "gone from disk";
  EXPECT_FALSE(rt::npy::is_embedded(path));
  rt::npy::embed(path, bytes.data(), bytes.size());
  EXPECT_TRUE(rt::npy::is_embedded(path));
  rt::Array a = rt::npy::read(path);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(std::vector<double>(a.data<double>(), a.data<double>() + 3), values);
  // A truncated copy is reported like a truncated file, naming the path.
  static const std::string cut = bytes.substr(0, bytes.size() - 8);
  rt::npy::embed(path, cut.data(), cut.size());
  std::string msg = usage_error_of([&] { rt::npy::read(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated data"), std::string::npos) << msg;
}

TEST(Data, NothingLeftInDevShm) {
  {
    Data a = synk::data<float>({1, 2}, {2});
    Data b(DType::I64, 1);
    b.set_length(1000);
  }
  EXPECT_TRUE(leftover_segments().empty());
}
