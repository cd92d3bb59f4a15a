// The benchmark behind onednn::winograd_suits (compiler/dnn): oneDNN's direct and Winograd
// F(4x4, 3x3) kernels on one thread, forward + backward-data + backward-weights of a 3x3, stride 1,
// "same" conv on blocked layouts (reorders excluded: synk pays the same ones either way), over a
// grid of batch sizes, channel counts and image sizes, then the 3x3 stride-1 layers of the examples
// (fashion_cnn, ResNet-20, the reduced ResNet-50) by name. Each round times every shape with both
// algorithms (direct first in odd rounds, Winograd first in even ones); the table gives, per
// shape, the median over rounds and the Winograd / direct ratio's range across rounds, and what
// the rule picks. Writes conv_algorithms.csv (draw it with bench/plot_conv_algorithms.py).
//
// usage: conv_algorithms [--rounds N] [--reps N] [--csv FILE] [--layers-only]
// (--layers-only: the widening layers and the examples' layers, without the grid)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "bench/bench_timing.h"
#include "bench/example_conv_layers.h"
#include "compiler/dnn/dnn.h"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

struct Shape {
  int64_t n, c, hw;
  int64_t o = 0;             // output channels (0: c)
  const char* name = "";     // a layer of the examples, or "" for the grid
  int64_t out() const { return o ? o : c; }
};

// fwd + bwd-data + bwd-weights of one shape with one algorithm, in ms; < 0 when oneDNN has no
// kernel for it on this CPU.
double time_layer(const Shape& s, dnnl::algorithm algo, int reps) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const memory::dims x{s.n, s.c, s.hw, s.hw}, w{s.out(), s.c, 3, 3}, y{s.n, s.out(), s.hw, s.hw};
  const memory::dims st{1, 1}, pad{1, 1};
  const memory::desc ax(x, Type::f32, Tag::any), aw(w, Type::f32, Tag::any), ay(y, Type::f32, Tag::any);
  try {
    dnnl::convolution_forward::primitive_desc fpd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, ax, aw, ay, st, pad, pad), eng);
    dnnl::convolution_backward_data::primitive_desc bpd(
        dnnl::convolution_backward_data::desc(algo, ax, aw, ay, st, pad, pad), eng, fpd);
    dnnl::convolution_backward_weights::primitive_desc wpd(
        dnnl::convolution_backward_weights::desc(algo, ax, aw, ay, st, pad, pad), eng, fpd);
    memory X(fpd.src_desc(), eng), W(fpd.weights_desc(), eng), Y(fpd.dst_desc(), eng);
    memory DX(bpd.diff_src_desc(), eng), DY(bpd.diff_dst_desc(), eng), DW(wpd.diff_weights_desc(), eng);
    for (memory* m : {&X, &W, &Y, &DX, &DY, &DW})
      std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
    dnnl::convolution_forward fwd(fpd);
    dnnl::convolution_backward_data bwd(bpd);
    dnnl::convolution_backward_weights bww(wpd);
    return synk::bench::median_ms(reps, [&] {
      fwd.execute(strm, {{DNNL_ARG_SRC, X}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_DST, Y}});
      bwd.execute(strm, {{DNNL_ARG_DIFF_DST, DY}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_DIFF_SRC, DX}});
      bww.execute(strm, {{DNNL_ARG_SRC, X}, {DNNL_ARG_DIFF_DST, DY}, {DNNL_ARG_DIFF_WEIGHTS, DW}});
      strm.wait();
    });
  } catch (const dnnl::error&) {
    return -1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, reps = 5;
  bool grid = true;
  std::string csv = std::string(SYNK_BENCH_OUT_DIR) + "/conv_algorithms.csv";
  for (int i = 1; i < argc; ++i) {
    const bool valued = i + 1 < argc;
    if (!std::strcmp(argv[i], "--layers-only")) grid = false;
    else if (valued && !std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[++i]));
    else if (valued && !std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[++i]));
    else if (valued && !std::strcmp(argv[i], "--csv")) csv = argv[++i];
    else {
      std::fprintf(stderr, "usage: conv_algorithms [--rounds N] [--reps N] [--csv FILE] [--layers-only]\n");
      return 2;
    }
  }
  // One thread, as a rank runs oneDNN (compiler/dnn/dnn.cpp's OneThread): left to itself,
  // libgomp would use every core, and Winograd's relative speed changes with the thread count
  // (ResNet-20's 16-channel 32x32 layer: 0.92x of direct on two threads, 1.6-1.7x on one).
  omp_set_num_threads(1);
  dnnl::set_max_cpu_isa(dnnl::cpu_isa::all);
  std::vector<Shape> shapes;
  for (int64_t n : {16, 64, 128})
    for (int64_t c : {16, 32, 64, 128, 256})
      for (int64_t hw : {4, 8, 14, 16, 28, 32}) {
        const double flops = 2.0 * double(n * c * c * hw * hw * 9);
        if (grid && flops >= 2e6 && flops <= 4e9) shapes.push_back({n, c, hw});
      }
  // Widening 3x3 stride-1 layers (twice the channels out), as the CNN's conv2.
  for (int64_t n : {16, 64, 128})
    for (int64_t c : {16, 32, 64})
      for (int64_t hw : {8, 14, 16, 28}) {
        const double flops = 2.0 * double(n * c * 2 * c * hw * hw * 9);
        if (flops >= 2e6 && flops <= 4e9) shapes.push_back({n, c, hw, 2 * c});
      }
  // The 3x3 stride-1 layers of the examples, by name.
  for (const synk::bench::ExampleConvLayer& l : synk::bench::example_conv_layers())
    shapes.push_back({l.n, l.c, l.hw, l.o, l.name});
  std::map<size_t, std::vector<double>> direct, wino;
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < shapes.size(); ++k) {
      const bool direct_first = r % 2 == 0;
      for (int pass = 0; pass < 2; ++pass) {
        const bool d = (pass == 0) == direct_first;
        const double t = time_layer(shapes[k], d ? dnnl::algorithm::convolution_direct
                                                 : dnnl::algorithm::convolution_winograd, reps);
        (d ? direct : wino)[k].push_back(t);
      }
    }
  std::ofstream out(csv);
  out << "n,c,o,hw,layer,rule_picks_winograd,direct_ms,winograd_ms,ratio,ratio_min,ratio_max\n";
  std::printf("%5s %5s %5s %4s  %10s %12s  %6s  %-13s  %s\n", "n", "c", "o", "hw", "direct ms", "winograd ms",
              "ratio", "ratio range", "rule");
  int right = 0, judged = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    std::vector<double> d = direct[k], w = wino[k], ratios;
    for (int r = 0; r < rounds; ++r) ratios.push_back(w[size_t(r)] / d[size_t(r)]);
    std::sort(d.begin(), d.end());
    std::sort(w.begin(), w.end());
    std::sort(ratios.begin(), ratios.end());
    const double dm = d[d.size() / 2], wm = w[w.size() / 2];
    const bool picks = synk::compiler::dnn::onednn::winograd_suits(
        {s.n, s.c, s.hw, s.hw, s.out(), 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false});
    if (wm < 0) {
      std::printf("%5lld %5lld %5lld %4lld  %10.3f %12s  %6s  %-13s  %s\n", (long long)s.n, (long long)s.c,
                  (long long)s.out(), (long long)s.hw, dm, "none", "-", "-",
                  picks ? "winograd (falls back)" : "direct");
      continue;
    }
    const double ratio = wm / dm;
    ++judged;
    right += (ratio < 1) == picks;
    std::printf("%5lld %5lld %5lld %4lld  %10.3f %12.3f  %6.2f  %5.2f - %5.2f  %s%s%s%s\n", (long long)s.n,
                (long long)s.c, (long long)s.out(), (long long)s.hw, dm, wm, ratio, ratios.front(), ratios.back(),
                picks ? "winograd" : "direct", (ratio < 1) == picks ? "" : "   <- the other was faster",
                *s.name ? "   " : "", s.name);
    out << s.n << ',' << s.c << ',' << s.out() << ',' << s.hw << ',' << s.name << ',' << (picks ? 1 : 0) << ',' << dm
        << ',' << wm << ',' << ratio << ',' << ratios.front() << ',' << ratios.back() << '\n';
  }
  std::printf("\nthe rule picks the faster algorithm for %d of %d shapes (%d rounds of %d reps); wrote %s\n", right,
              judged, rounds, reps, csv.c_str());
  return 0;
}
