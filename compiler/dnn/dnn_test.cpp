// Tests of dnn.h that are not plain f32-vs-oracle comparisons (those are in dnn_test_ops.cpp):
// shape arithmetic and the parameter checks' messages, the float64 reference's gradients against
// central finite differences, the max-pool tie / NaN / -inf rule (and where oneDNN departs from
// it), and the process model: oneDNN used in a parent, then in forked children, on one thread.
#include "compiler/dnn/dnn.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dnn_reference.h"
#include "compiler/dnn/dnn_test_util.h"

namespace synk::compiler::dnn {
namespace {

using testing::conv;
using testing::conv_cases;
using testing::random_floats;
using testing::same_values;
using testing::to_double;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- shapes and checks ----------------------------------------------------------------------

TEST(Shapes, ConvOutputSizeFollowsPyTorch) {
  EXPECT_EQ(conv2d_output_size(conv(1, 1, 28, 28, 1, 3, 1, 1, false)), (Size2d{28, 28}));
  EXPECT_EQ(conv2d_output_size(conv(1, 1, 32, 32, 1, 3, 2, 1, false)), (Size2d{16, 16}));
  EXPECT_EQ(conv2d_output_size(conv(1, 1, 10, 10, 1, 3, 3, 0, false)), (Size2d{3, 3}));  // floor
  EXPECT_EQ(conv2d_output_size(conv(1, 1, 7, 7, 1, 3, 1, 0, false, 1, 2)), (Size2d{3, 3}));
  Conv2dParams p{1, 1, 9, 10, 1, 3, 2, 2, 1, 0, 2, 1, 0, 1, 2, 1, false};
  EXPECT_EQ(conv2d_output_size(p), (Size2d{5, 9}));  // (9+0+2-1*2-1)/2+1, (10+1+0-2*1-1)/1+1
}

TEST(Shapes, SamePaddingPutsTheLargerHalfAfter) {
  auto same = [](int64_t k, int64_t d) {
    Conv2dParams p = conv(1, 1, 9, 9, 1, k, 1, 0, false, 1, d);
    return with_same_padding(p);
  };
  for (auto [k, d, before, after] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 1, 1, 1},
                                     {4, 1, 1, 2},
                                     {5, 1, 2, 2},
                                     {3, 2, 2, 2},
                                     {2, 3, 1, 2},
                                     {1, 1, 0, 0}}) {
    Conv2dParams p = same(k, d);
    EXPECT_EQ(p.pad_top, before) << "k=" << k << " d=" << d;
    EXPECT_EQ(p.pad_bottom, after) << "k=" << k << " d=" << d;
    EXPECT_EQ(p.pad_left, before);
    EXPECT_EQ(p.pad_right, after);
    EXPECT_EQ(conv2d_output_size(p), (Size2d{9, 9}));
  }
  Conv2dParams strided = conv(1, 1, 9, 9, 1, 3, 2, 0, false);
  EXPECT_THROW(with_same_padding(strided), std::invalid_argument);
}

TEST(Shapes, PoolOutputSize) {
  EXPECT_EQ(pool2d_output_size({1, 1, 28, 28, 2, 2, 2, 0, PoolKind::max, true}), (Size2d{14, 14}));
  EXPECT_EQ(pool2d_output_size({1, 1, 7, 9, 3, 3, 2, 1, PoolKind::avg, true}), (Size2d{4, 5}));
}

TEST(Shapes, SuggestedFormatFollowsTheBenchmark) {
  EXPECT_EQ(onednn::suggested_format(conv(128, 1, 28, 28, 32, 3, 1, 1, true)), onednn::ConvFormat::plain);
  EXPECT_EQ(onednn::suggested_format(conv(64, 3, 32, 32, 16, 3, 1, 1, false)), onednn::ConvFormat::blocked);
  EXPECT_EQ(onednn::suggested_format(conv(64, 16, 32, 32, 16, 3, 1, 1, false)), onednn::ConvFormat::blocked);
  EXPECT_EQ(onednn::suggested_format(conv(2, 16, 8, 8, 16, 3, 1, 1, false, 16)), onednn::ConvFormat::blocked);
  EXPECT_THROW(onednn::suggested_format(conv(2, 16, 8, 8, 16, 3, 0, 1, false)), std::invalid_argument);
}

TEST(Shapes, WinogradRuleFollowsTheBenchmark) {
  using onednn::winograd_suits;
  EXPECT_TRUE(winograd_suits(conv(128, 64, 8, 8, 64, 3, 1, 1, false)));    // ResNet-20's third stage
  EXPECT_TRUE(winograd_suits(conv(16, 64, 8, 8, 64, 3, 1, 1, true)));      // 1,024 output pixels
  EXPECT_FALSE(winograd_suits(conv(15, 64, 8, 8, 64, 3, 1, 1, false)));    // 960
  EXPECT_TRUE(winograd_suits(conv(128, 32, 16, 16, 32, 3, 1, 1, false)));  // its second stage
  EXPECT_FALSE(winograd_suits(conv(128, 16, 32, 32, 16, 3, 1, 1, false))); // its first: slower
  EXPECT_TRUE(winograd_suits(conv(64, 32, 14, 14, 64, 3, 1, 1, false)));   // the CNN's conv2: 0.83x
  EXPECT_TRUE(winograd_suits(conv(64, 32, 8, 8, 32, 3, 1, 1, false)));     // 32 channels on 8x8
  EXPECT_FALSE(winograd_suits(conv(128, 32, 4, 4, 32, 3, 1, 1, false)));   // on 4x4 planes: direct
  EXPECT_FALSE(winograd_suits(conv(15, 32, 8, 8, 32, 3, 1, 1, false)));    // 960 output pixels
  EXPECT_FALSE(winograd_suits(conv(128, 64, 16, 16, 64, 3, 2, 1, false))); // strided
  EXPECT_FALSE(winograd_suits(conv(128, 64, 16, 16, 64, 3, 1, 2, false, 1, 2)));  // dilated
  EXPECT_FALSE(winograd_suits(conv(128, 64, 16, 16, 64, 5, 1, 2, false)));  // 5x5
  EXPECT_FALSE(winograd_suits(conv(128, 64, 16, 16, 64, 3, 1, 1, false, 2)));  // grouped
}

// Where the CPU has oneDNN's AVX-512 Winograd kernels, a layer the rule picks runs them in all
// three passes, and the rest run the direct kernels.
TEST(Shapes, WinogradRunsWhereTheRulePicksIt) {
  const Conv2dParams suited = conv(16, 64, 8, 8, 64, 3, 1, 1, false), unsuited = conv(2, 16, 12, 12, 32, 3, 1, 1, true);
  ASSERT_TRUE(onednn::winograd_suits(suited));
  for (const bool picked : {true, false}) {
    const std::vector<std::string> names =
        onednn::conv_implementations(picked ? suited : unsuited, onednn::ConvFormat::blocked);
    ASSERT_EQ(names.size(), 3u);
    for (const std::string& name : names) {
      const bool wino = name.find("wino") != std::string::npos;
      if (!picked) EXPECT_FALSE(wino) << name;
      else if (onednn::has_winograd_kernels()) EXPECT_TRUE(wino) << name;
      else std::cout << "[ NOTE     ] no AVX-512 Winograd kernels on this CPU; " << name << " ran instead\n";
    }
  }
}

// On NHWC, forward passes up to 32 channels at stride 1 or 1x1 run oneDNN's plain JIT kernel and
// one input channel its gemm kernel, where the CPU has them (AVX-512); the rest keep oneDNN's own
// choice.
TEST(Shapes, ChannelsLastForwardKernelsFollowTheMeasuredRule) {
  if (!onednn::has_winograd_kernels()) GTEST_SKIP() << "the rule names AVX-512 kernels, which this CPU lacks";
  const auto forward = [](const Conv2dParams& p) {
    return onednn::conv_implementations(p, onednn::ConvFormat::channels_last).at(0);
  };
  EXPECT_EQ(forward(conv(8, 16, 32, 32, 16, 3, 1, 1, false)), "jit:avx512_core");   // ResNet-20's first stage
  EXPECT_EQ(forward(conv(8, 16, 32, 32, 32, 1, 2, 0, false)), "jit:avx512_core");   // its 1x1 shortcut
  EXPECT_EQ(forward(conv(8, 1, 28, 28, 16, 3, 1, 3, false)), "x64:gemm:jit");       // one input channel
  EXPECT_NE(forward(conv(8, 16, 32, 32, 32, 3, 2, 1, false)), "jit:avx512_core");   // strided 3x3: brgemm's
  EXPECT_NE(forward(conv(8, 64, 8, 8, 64, 3, 1, 1, false)), "jit:avx512_core");     // 64 channels: brgemm's
}

// The message must name the parameter and its value.
void expect_conv_error(const std::function<void(Conv2dParams&)>& edit, const std::string& want) {
  Conv2dParams p = conv(2, 4, 8, 8, 6, 3, 1, 1, true, 2);
  edit(p);
  const std::string e = conv2d_error(p);
  EXPECT_NE(e.find(want), std::string::npos) << "message '" << e << "' lacks '" << want << "'";
  EXPECT_THROW(check_conv2d(p), std::invalid_argument);
  std::vector<float> buf(1 << 16);
  // Every path checks before touching oneDNN or BLAS: a throw, never a crash.
  EXPECT_THROW(onednn::conv2d_forward(p, buf.data(), buf.data(), buf.data(), buf.data()), std::invalid_argument);
  EXPECT_THROW(im2col::conv2d_backward_data(p, buf.data(), buf.data(), buf.data()), std::invalid_argument);
}

TEST(Checks, ConvMessagesNameTheParameter) {
  EXPECT_EQ(conv2d_error(conv(2, 4, 8, 8, 6, 3, 1, 1, true, 2)), "");
  expect_conv_error([](Conv2dParams& p) { p.stride_h = 0; }, "stride_h = 0");
  expect_conv_error([](Conv2dParams& p) { p.stride_w = -2; }, "stride_w = -2");
  expect_conv_error([](Conv2dParams& p) { p.pad_left = -1; }, "pad_left = -1");
  expect_conv_error([](Conv2dParams& p) { p.pad_bottom = -3; }, "pad_bottom = -3");
  expect_conv_error([](Conv2dParams& p) { p.dilation_h = 0; }, "dilation_h = 0");
  expect_conv_error([](Conv2dParams& p) { p.kh = 11; }, "kh = 11");
  expect_conv_error([](Conv2dParams& p) { p.kw = 5, p.dilation_w = 3; },
                    "kw = 5: the dilated kernel (13) is larger than the padded input width (10)");
  expect_conv_error([](Conv2dParams& p) { p.groups = 3; }, "groups = 3: does not divide the input channels c = 4");
  expect_conv_error([](Conv2dParams& p) { p.out_channels = 5; }, "groups = 2: does not divide out_channels = 5");
  expect_conv_error([](Conv2dParams& p) { p.groups = 0; }, "groups = 0");
  expect_conv_error([](Conv2dParams& p) { p.n = 0; }, "n = 0");
  expect_conv_error([](Conv2dParams& p) { p.c = -4; }, "c = -4");
  expect_conv_error([](Conv2dParams& p) { p.out_channels = 0; }, "out_channels = 0");
  expect_conv_error([](Conv2dParams& p) { p.n = p.c = p.h = p.w = 1 << 20; }, "more than 2^31 elements");
}

TEST(Checks, NullPointersAreRejected) {
  Conv2dParams p = conv(1, 2, 5, 5, 2, 3, 1, 1, true);
  std::vector<float> buf(256);
  EXPECT_THROW(onednn::conv2d_forward(p, buf.data(), buf.data(), nullptr, buf.data()), std::invalid_argument);
  EXPECT_THROW(im2col::conv2d_backward_weights(p, buf.data(), buf.data(), buf.data(), nullptr), std::invalid_argument);
  Pool2dParams q{1, 2, 4, 4, 2, 2, 2, 0, PoolKind::max, true};
  EXPECT_THROW(native::max_pool2d_backward(q, buf.data(), nullptr, nullptr, buf.data()), std::invalid_argument);
}

TEST(Checks, PoolMessagesNameTheParameter) {
  auto message = [](const std::function<void(Pool2dParams&)>& edit) {
    Pool2dParams p{2, 3, 8, 8, 3, 3, 2, 1, PoolKind::max, true};
    edit(p);
    return pool2d_error(p);
  };
  EXPECT_EQ(message([](Pool2dParams&) {}), "");
  EXPECT_NE(message([](Pool2dParams& p) { p.stride = 0; }).find("stride = 0"), std::string::npos);
  EXPECT_NE(message([](Pool2dParams& p) { p.padding = -1; }).find("padding = -1"), std::string::npos);
  EXPECT_NE(message([](Pool2dParams& p) { p.padding = 2; }).find("padding = 2: must be at most half the window"),
            std::string::npos);
  EXPECT_NE(message([](Pool2dParams& p) { p.kh = p.kw = 11, p.padding = 0; }).find("kh = 11"), std::string::npos);
  EXPECT_NE(message([](Pool2dParams& p) { p.kw = 0; }).find("kw = 0"), std::string::npos);
  Pool2dParams bad{2, 3, 8, 8, 3, 3, 0, 1, PoolKind::avg, true};
  std::vector<float> buf(1024);
  EXPECT_THROW(onednn::avg_pool2d_forward(bad, buf.data(), buf.data()), std::invalid_argument);
  Pool2dParams max_params{2, 3, 8, 8, 2, 2, 2, 0, PoolKind::max, true};
  EXPECT_THROW(onednn::avg_pool2d_forward(max_params, buf.data(), buf.data()), std::invalid_argument);  // kind
}

TEST(Checks, BatchNormMessages) {
  EXPECT_EQ(batch_norm_error({2, 3, 4, 4, 1e-5}, true), "");
  EXPECT_NE(batch_norm_error({2, 3, 4, 4, -1e-5}, true).find("epsilon"), std::string::npos);
  EXPECT_NE(batch_norm_error({2, 3, 4, 4, std::nan("")}, false).find("epsilon"), std::string::npos);
  EXPECT_NE(batch_norm_error({2, 3, 4, 4, 1e300}, false).find("epsilon"), std::string::npos);  // inf as f32
  EXPECT_NE(batch_norm_error({1, 3, 1, 1, 1e-5}, true).find("n*h*w = 1"), std::string::npos);
  EXPECT_EQ(batch_norm_error({1, 3, 1, 1, 1e-5}, false), "");
  EXPECT_NE(batch_norm_error({2, 0, 4, 4, 1e-5}, false).find("c = 0"), std::string::npos);
  std::vector<float> buf(64);
  EXPECT_THROW(onednn::batch_norm_forward_training({1, 3, 1, 1, 1e-5}, buf.data(), buf.data(), buf.data(), buf.data(),
                                                   buf.data(), buf.data()),
               std::invalid_argument);
}

// ---- the reference's gradients against central differences (float64) ------------------------

// Compares grad with (loss(v + h) - loss(v - h)) / 2h at up to 12 positions of v.
void expect_fd(std::vector<double>& v, const std::vector<double>& grad, const std::function<double()>& loss, double h,
               double tol, const char* what) {
  std::mt19937 gen(42);
  const size_t picks = std::min<size_t>(v.size(), 12);
  for (size_t k = 0; k < picks; ++k) {
    const size_t i = v.size() <= 12 ? k : size_t(gen() % v.size());
    const double saved = v[i];
    v[i] = saved + h;
    const double up = loss();
    v[i] = saved - h;
    const double down = loss();
    v[i] = saved;
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(grad[i], fd, tol * (1 + std::fabs(fd))) << what << "[" << i << "]";
  }
}

// The loss is sum(y * r) for a fixed random r, so its gradient with respect to y is r.
double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(ReferenceGradients, ConvMatchesFiniteDifferences) {
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const Conv2dParams& p = c.p;
    auto x = to_double(random_floats(size_t(conv2d_input_elems(p)), 31));
    auto w = to_double(random_floats(size_t(conv2d_weight_elems(p)), 32));
    auto b = to_double(random_floats(size_t(p.out_channels), 33));
    auto r = to_double(random_floats(size_t(conv2d_output_elems(p)), 34));
    std::vector<double> y(r.size()), dx(x.size()), dw(w.size()), db(b.size());
    auto loss = [&] {
      reference::conv2d_forward(p, x.data(), w.data(), b.data(), y.data());
      return dot(y, r);
    };
    reference::conv2d_backward_data(p, r.data(), w.data(), dx.data());
    reference::conv2d_backward_weights(p, x.data(), r.data(), dw.data(), db.data());
    expect_fd(x, dx, loss, 1e-3, 1e-8, "dx");
    expect_fd(w, dw, loss, 1e-3, 1e-8, "dw");
    if (p.has_bias) {
      expect_fd(b, db, loss, 1e-3, 1e-8, "db");
    }
  }
}

TEST(ReferenceGradients, PoolsMatchFiniteDifferences) {
  for (PoolKind kind : {PoolKind::max, PoolKind::avg})
    for (bool include_pad : {true, false}) {
      const Pool2dParams p{2, 3, 9, 8, 3, 3, 2, 1, kind, include_pad};
      SCOPED_TRACE(std::string(kind == PoolKind::max ? "max" : "avg") + (include_pad ? " incl" : " excl"));
      const Size2d o = pool2d_output_size(p);
      auto x = to_double(random_floats(size_t(p.n * p.c * p.h * p.w), 35));
      auto r = to_double(random_floats(size_t(p.n * p.c * o.h * o.w), 36));
      std::vector<double> y(r.size()), dx(x.size());
      auto loss = [&] {
        if (kind == PoolKind::max)
          reference::max_pool2d_forward(p, x.data(), y.data());
        else
          reference::avg_pool2d_forward(p, x.data(), y.data());
        return dot(y, r);
      };
      if (kind == PoolKind::max)
        reference::max_pool2d_backward(p, x.data(), r.data(), dx.data());
      else
        reference::avg_pool2d_backward(p, r.data(), dx.data());
      expect_fd(x, dx, loss, 1e-6, 1e-7, "dx");  // random inputs: no two window values within h
    }
  auto x = to_double(random_floats(2 * 3 * 5 * 4, 37)), r = to_double(random_floats(6, 38));
  std::vector<double> y(6), dx(x.size());
  reference::global_avg_pool_backward(2, 3, 5, 4, r.data(), dx.data());
  expect_fd(
      x, dx,
      [&] {
        reference::global_avg_pool_forward(2, 3, 5, 4, x.data(), y.data());
        return dot(y, r);
      },
      1e-3, 1e-9, "global dx");
}

TEST(ReferenceGradients, BatchNormMatchesFiniteDifferences) {
  const BatchNormParams p{3, 4, 5, 3, 1e-3};
  const size_t count = size_t(p.n * p.c * p.h * p.w), c = size_t(p.c);
  auto x = to_double(random_floats(count, 39)), r = to_double(random_floats(count, 40));
  auto gamma = to_double(random_floats(c, 41, 0.5f, 1.5f)), beta = to_double(random_floats(c, 42));
  std::vector<double> y(count), mean(c), var(c), dx(count), dg(c), db(c);
  auto loss = [&] {
    reference::batch_norm_forward_training(p, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
    return dot(y, r);
  };
  loss();
  reference::batch_norm_backward(p, x.data(), r.data(), gamma.data(), mean.data(), var.data(), dx.data(), dg.data(),
                                 db.data());
  expect_fd(x, dx, loss, 1e-5, 1e-6, "dx");
  expect_fd(gamma, dg, loss, 1e-5, 1e-6, "dgamma");
  expect_fd(beta, db, loss, 1e-5, 1e-6, "dbeta");
}

// ---- max-pool ties, NaN, -inf ---------------------------------------------------------------

// One 2x2 window per channel over 2x2 planes: each channel a case.
struct TieCase {
  std::vector<float> x;   // 4 values, row-major
  float y;                // PyTorch's output
  std::vector<float> dx;  // PyTorch's gradient for dy = 1
};

const std::vector<TieCase>& tie_cases() {
  static const std::vector<TieCase> cases{
      {{1, 1, 1, 1}, 1, {1, 0, 0, 0}},           // all equal: the first
      {{0, 2, 2, 1}, 2, {0, 1, 0, 0}},           // tie after a smaller one: the first of them
      {{0, kNaN, 5, 1}, kNaN, {0, 1, 0, 0}},     // NaN wins over a larger later value
      {{kNaN, 1, kNaN, 1}, kNaN, {0, 0, 1, 0}},  // several NaNs: the last (PyTorch)
      {{-kInf, -kInf, -kInf, -kInf}, -kInf, {1, 0, 0, 0}},
      {{-kInf, -2, -kInf, -2}, -2, {0, 1, 0, 0}},
  };
  return cases;
}

// Stride 2 takes native's 2x2 fast path, stride 1 (the same single window) its general one.
TEST(MaxPoolTies, ReferenceAndNativeFollowPyTorch) {
  for (int64_t stride : {2, 1}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const auto& cases = tie_cases();
    const Pool2dParams p{1, int64_t(cases.size()), 2, 2, 2, 2, stride, 0, PoolKind::max, true};
    std::vector<float> x, want_y, want_dx, ones(cases.size(), 1.0f);
    for (const auto& c : cases) {
      x.insert(x.end(), c.x.begin(), c.x.end());
      want_y.push_back(c.y);
      want_dx.insert(want_dx.end(), c.dx.begin(), c.dx.end());
    }
    std::vector<float> y(cases.size()), ry(cases.size()), dx(x.size()), rdx(x.size());
    std::vector<int32_t> idx(cases.size());
    reference::max_pool2d_forward(p, x.data(), ry.data());
    reference::max_pool2d_backward(p, x.data(), ones.data(), rdx.data());
    EXPECT_TRUE(same_values(ry, want_y));
    EXPECT_TRUE(same_values(rdx, want_dx));
    native::max_pool2d_forward(p, x.data(), y.data(), idx.data());
    native::max_pool2d_backward(p, ones.data(), idx.data(), nullptr, dx.data());
    EXPECT_TRUE(same_values(y, want_y));
    EXPECT_TRUE(same_values(dx, want_dx));
  }
}

// Random planes salted with NaN, -inf, +inf and ties, over the fast and the general path.
TEST(MaxPoolTies, SaltedInputsMatchTheReferenceBitForBit) {
  for (const Pool2dParams& p : {Pool2dParams{2, 3, 8, 10, 2, 2, 2, 0, PoolKind::max, true},
                                Pool2dParams{2, 3, 9, 7, 3, 3, 2, 1, PoolKind::max, true},
                                Pool2dParams{1, 2, 7, 8, 3, 2, 1, 1, PoolKind::max, true}}) {
    const Size2d o = pool2d_output_size(p);
    std::vector<float> x = random_floats(size_t(p.n * p.c * p.h * p.w), 45, 0.0f, 20.0f);
    for (float& v : x) {
      const int r = int(v);  // 0..19: a few of each special value, the rest ties among 0..2
      v = r == 0 ? kNaN : r == 1 ? -kInf : r == 2 ? kInf : std::floor(v / 6.0f);
    }
    const auto dy = random_floats(size_t(p.n * p.c * o.h * o.w), 46);
    std::vector<float> y(dy.size()), ry(dy.size()), dx(x.size()), rdx(x.size()), dx2(x.size());
    std::vector<int32_t> idx(dy.size());
    native::max_pool2d_forward(p, x.data(), y.data(), idx.data());
    native::max_pool2d_backward(p, dy.data(), idx.data(), nullptr, dx.data());
    native::max_pool2d_backward(p, dy.data(), nullptr, x.data(), dx2.data());
    reference::max_pool2d_forward(p, x.data(), ry.data());
    reference::max_pool2d_backward(p, x.data(), dy.data(), rdx.data());
    EXPECT_TRUE(same_values(y, ry));
    EXPECT_TRUE(same_values(dx, rdx));
    EXPECT_TRUE(same_values(dx2, rdx));
  }
}

// Padding never receives the gradient, even where every real cell is -inf.
TEST(MaxPoolTies, PaddingIsNeverChosen) {
  const Pool2dParams p{1, 1, 2, 2, 3, 3, 1, 1, PoolKind::max, true};
  const std::vector<float> x(4, -kInf), ones(4, 1.0f);
  std::vector<float> y(4), dx(4);
  std::vector<int32_t> idx(4);
  native::max_pool2d_forward(p, x.data(), y.data(), idx.data());
  native::max_pool2d_backward(p, ones.data(), idx.data(), nullptr, dx.data());
  EXPECT_TRUE(same_values(y, std::vector<float>(4, -kInf)));
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 0, 0, 0}));  // PyTorch's return_indices here
  EXPECT_TRUE(same_values(dx, {4, 0, 0, 0}));
}

// Many ties (values from {0, 1, 2}) over overlapping windows: native and reference agree exactly,
// and oneDNN's workspace-based backward keeps the first maximum too. oneDNN sums the overlapping
// windows' gradients in an order of its own that depends on the CPU's instruction set (its AVX-512
// kernel differs from the reference in the last bit on AMD Zen 4), so its sums are compared to
// rounding: a different tie choice would move a whole gradient value (~1) to another cell.
TEST(MaxPoolTies, ManyTiesAgreeEverywhere) {
  const Pool2dParams p{2, 3, 9, 8, 3, 3, 1, 1, PoolKind::max, true};
  const Size2d o = pool2d_output_size(p);
  std::vector<float> x = random_floats(size_t(p.n * p.c * p.h * p.w), 43, 0.0f, 3.0f);
  for (float& v : x) v = std::floor(v);
  const auto dy = random_floats(size_t(p.n * p.c * o.h * o.w), 44);
  std::vector<float> y(dy.size()), ry(dy.size()), oy(dy.size()), dx(x.size()), rdx(x.size()), odx(x.size());
  std::vector<int32_t> idx(dy.size());
  native::max_pool2d_forward(p, x.data(), y.data(), idx.data());
  native::max_pool2d_backward(p, dy.data(), idx.data(), nullptr, dx.data());
  reference::max_pool2d_forward(p, x.data(), ry.data());
  reference::max_pool2d_backward(p, x.data(), dy.data(), rdx.data());
  EXPECT_TRUE(same_values(y, ry));
  EXPECT_TRUE(same_values(dx, rdx));  // same float additions in the same order
  std::vector<unsigned char> ws(onednn::max_pool2d_workspace_bytes(p));
  onednn::max_pool2d_forward(p, x.data(), oy.data(), ws.data());
  onednn::max_pool2d_backward(p, dy.data(), ws.data(), odx.data());
  EXPECT_TRUE(same_values(oy, ry));
  for (size_t i = 0; i < odx.size(); ++i)
    EXPECT_NEAR(odx[i], rdx[i], 1e-6 * (1 + std::fabs(rdx[i]))) << "element " << i;
}

// Where oneDNN 2.6 departs from PyTorch: NaN does not propagate and a window of -inf gives
// -FLT_MAX. Pinned so that a oneDNN upgrade that changes it is noticed (then revisit the README).
TEST(MaxPoolTies, OneDnnDepartsOnNaNAndInfinity) {
  const Pool2dParams p{1, 3, 2, 2, 2, 2, 2, 0, PoolKind::max, true};
  const std::vector<float> x{0, kNaN, 5, 1, kNaN, 3, 4, 1, -kInf, -kInf, -kInf, -kInf};
  std::vector<float> y(3);
  std::vector<unsigned char> ws(onednn::max_pool2d_workspace_bytes(p));
  onednn::max_pool2d_forward(p, x.data(), y.data(), ws.data());
  EXPECT_EQ(y[0], 5.0f);      // PyTorch: NaN
  EXPECT_EQ(y[1], 4.0f);      // PyTorch: NaN
  EXPECT_EQ(y[2], -FLT_MAX);  // PyTorch: -inf
}

}  // namespace
}  // namespace synk::compiler::dnn
