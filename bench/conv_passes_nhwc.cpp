// The benchmark behind onednn::winograd_suits_pass (compiler/dnn): on NHWC activations, as synk's
// CPU plans call every f32 convolution, each pass of a 3x3 stride-1 "same" conv (forward,
// backward-data, backward-weights) with oneDNN's direct kernels, which read and write NHWC as it
// is, against its Winograd F(4x4, 3x3) kernels, which need the blocked layout: their time includes
// the reorders of the activations they read from NHWC and write back to it. Timed through synk's
// own calls, one thread, as a rank runs oneDNN. Each round times every
// shape and pass with both algorithms (direct first in odd rounds); the table gives per shape and
// pass the median time over rounds, the Winograd / direct ratio's range across rounds, and what
// the rule picks. Writes conv_passes_nhwc.csv.
//
// usage: conv_passes_nhwc [--rounds N] [--reps N] [--csv FILE]
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_timing.h"
#include "bench/example_conv_layers.h"
#include "compiler/dnn/dnn.h"

namespace {

namespace onednn = synk::compiler::dnn::onednn;

struct Shape {
  int64_t n, c, hw, o;
  const char* name = "";
};

constexpr std::array<const char*, 3> kPasses = {"forward", "backward_data", "backward_weights"};

// The three passes' times in ms through synk's own calls (ConvFormat::channels_last, so exactly
// the primitives, reorders and weight conversions a plan's step runs) with `algorithm` forced. The
// calls rotate over kSets sets of arrays, as a step's layers touch their own activations, so that
// no set is still in the core's cache when its turn comes.
constexpr int kSets = 6;

std::array<double, 3> time_passes(const Shape& s, onednn::ConvAlgorithm algorithm, int reps) {
  onednn::set_conv_algorithm(algorithm);
  onednn::clear_primitive_cache();
  const synk::compiler::dnn::Conv2dParams p{s.n, s.c, s.hw, s.hw, s.o, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false};
  const size_t xs = size_t(s.n * s.c * s.hw * s.hw), ys = size_t(s.n * s.o * s.hw * s.hw), ws = size_t(s.o * s.c * 9);
  std::vector<std::vector<float>> x(kSets, std::vector<float>(xs, 0.5f)), y(kSets, std::vector<float>(ys, 0.25f)),
      w(kSets, std::vector<float>(ws, 0.01f));
  using F = onednn::ConvFormat;
  int k = 0;
  auto next = [&] { return size_t(k++ % kSets); };
  std::array<double, 3> t{};
  t[0] = synk::bench::median_ms(reps * kSets, [&] {
    const size_t i = next();
    onednn::conv2d_forward(p, x[i].data(), w[i].data(), nullptr, y[i].data(), F::channels_last);
  });
  t[1] = synk::bench::median_ms(reps * kSets, [&] {
    const size_t i = next();
    onednn::conv2d_backward_data(p, y[i].data(), w[i].data(), x[i].data(), F::channels_last);
  });
  t[2] = synk::bench::median_ms(reps * kSets, [&] {
    const size_t i = next();
    onednn::conv2d_backward_weights(p, x[i].data(), y[i].data(), w[i].data(), nullptr, F::channels_last);
  });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, reps = 5;
  std::string csv = std::string(SYNK_BENCH_OUT_DIR) + "/conv_passes_nhwc.csv";
  for (int i = 1; i < argc; ++i) {
    const bool valued = i + 1 < argc;
    if (valued && !std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[++i]));
    else if (valued && !std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[++i]));
    else if (valued && !std::strcmp(argv[i], "--csv")) csv = argv[++i];
    else {
      std::fprintf(stderr, "usage: conv_passes_nhwc [--rounds N] [--reps N] [--csv FILE]\n");
      return 2;
    }
  }
  omp_set_num_threads(1);   // as a rank runs oneDNN (compiler/dnn/dnn.cpp's OneThread)
  std::vector<Shape> shapes;
  for (int64_t n : {16, 64, 128})
    for (int64_t c : {32, 64, 128, 256})
      for (int64_t hw : {4, 8, 14, 16, 28}) {
        const double flops = 2.0 * double(n * c * c * hw * hw * 9);
        if (flops >= 2e6 && flops <= 4e9 && onednn::winograd_suits({n, c, hw, hw, c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}))
          shapes.push_back({n, c, hw, c});
      }
  for (const synk::bench::ExampleConvLayer& l : synk::bench::example_conv_layers())
    shapes.push_back({l.n, l.c, l.hw, l.o, l.name});
  std::map<size_t, std::array<std::vector<double>, 3>> direct, wino;
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < shapes.size(); ++k)
      for (int order = 0; order < 2; ++order) {
        const bool w = (order == 0) != (r % 2 == 0);
        const std::array<double, 3> t =
            time_passes(shapes[k], w ? onednn::ConvAlgorithm::winograd : onednn::ConvAlgorithm::direct, reps);
        for (size_t p = 0; p < 3; ++p) (w ? wino : direct)[k][p].push_back(t[p]);
      }
  onednn::set_conv_algorithm(onednn::ConvAlgorithm::rule);
  std::ofstream out(csv);
  out << "n,c,o,hw,layer,pass,rule_picks_winograd,direct_ms,winograd_ms,ratio,ratio_min,ratio_max\n";
  std::printf("%5s %5s %5s %4s  %-16s %10s %12s  %6s  %-13s  %s\n", "n", "c", "o", "hw", "pass", "direct ms",
              "winograd ms", "ratio", "ratio range", "rule");
  int right = 0, judged = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    const synk::compiler::dnn::Conv2dParams p{s.n, s.c, s.hw, s.hw, s.o, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false};
    for (size_t pass = 0; pass < 3; ++pass) {
      const double dm = synk::bench::median_of(direct[k][pass]), wm = synk::bench::median_of(wino[k][pass]);
      std::vector<double> ratios;
      for (int r = 0; r < rounds; ++r) ratios.push_back(wino[k][pass][size_t(r)] / direct[k][pass][size_t(r)]);
      std::sort(ratios.begin(), ratios.end());
      const bool picks = onednn::winograd_suits_pass(p, onednn::ConvPass(pass));
      const double ratio = wm / dm;
      ++judged;
      right += (ratio < 1) == picks;
      std::printf("%5lld %5lld %5lld %4lld  %-16s %10.3f %12.3f  %6.2f  %5.2f - %5.2f  %s%s%s%s\n", (long long)s.n,
                  (long long)s.c, (long long)s.o, (long long)s.hw, kPasses[pass], dm, wm, ratio, ratios.front(),
                  ratios.back(), picks ? "winograd" : "direct", (ratio < 1) == picks ? "" : "   <- the other was faster",
                  *s.name ? "   " : "", s.name);
      out << s.n << ',' << s.c << ',' << s.o << ',' << s.hw << ',' << s.name << ',' << kPasses[pass] << ','
          << (picks ? 1 : 0) << ',' << dm << ',' << wm << ',' << ratio << ',' << ratios.front() << ','
          << ratios.back() << '\n';
    }
  }
  std::printf("\nthe rule picks the faster algorithm for %d of %d passes (%d rounds of %d reps); wrote %s\n", right,
              judged, rounds, reps, csv.c_str());
  return 0;
}
