// synk's DNN benchmark: times the layers of a small Fashion-MNIST CNN (batch 128) and of
// ResNet-20 on 32x32 (batch 64) on ONE thread — conv forward, backward-data and backward-weights
// for oneDNN on plain NCHW, oneDNN on its blocked layouts (reorders included) and im2col + sgemm;
// max pool and batch norm (synk's native loops and oneDNN's) — and PyTorch 1.13 on the
// same layers through dnn_torch.py, alternating rounds (C++, then PyTorch) so that a change in
// machine load hits both. Prints the table with ratios to PyTorch, writes a CSV and a PNG.
//
// usage: dnn_bench [--rounds N] [--reps N] [--csv FILE] [--png FILE] [--script dnn_torch.py]
//                  [--python /usr/bin/python3]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/dnn/dnn.h"

namespace dnn = synk::compiler::dnn;

namespace {

struct Layer {
  std::string name;
  std::string kind;  // conv | maxpool | bnorm, as dnn_torch.py reads it
  dnn::Conv2dParams conv;
  dnn::Pool2dParams pool;
  dnn::BatchNormParams bn;
};

dnn::Conv2dParams conv3x3(int64_t n, int64_t c, int64_t hw, int64_t o, int64_t stride, bool bias) {
  return {n, c, hw, hw, o, 3, 3, stride, stride, 1, 1, 1, 1, 1, 1, 1, bias};
}

std::vector<Layer> layers() {
  std::vector<Layer> l;
  auto conv = [&](std::string name, dnn::Conv2dParams p) { l.push_back({std::move(name), "conv", p, {}, {}}); };
  auto pool = [&](std::string name, int64_t n, int64_t c, int64_t hw) {
    l.push_back({std::move(name), "maxpool", {}, {n, c, hw, hw, 2, 2, 2, 0, dnn::PoolKind::max, true}, {}});
  };
  auto bn = [&](std::string name, int64_t n, int64_t c, int64_t hw) {
    l.push_back({std::move(name), "bnorm", {}, {}, {n, c, hw, hw, 1e-5}});
  };
  conv("cnn.conv1 1->32 28x28", conv3x3(128, 1, 28, 32, 1, true));
  conv("cnn.conv2 32->64 14x14", conv3x3(128, 32, 14, 64, 1, true));
  pool("cnn.maxpool 128x32x28x28", 128, 32, 28);
  pool("cnn.maxpool 128x64x14x14", 128, 64, 14);
  bn("cnn.bn 128x32x28x28", 128, 32, 28);
  bn("cnn.bn 128x64x14x14", 128, 64, 14);
  conv("rn20 stem 3->16 32x32", conv3x3(64, 3, 32, 16, 1, false));
  conv("rn20 16->16 32x32", conv3x3(64, 16, 32, 16, 1, false));
  conv("rn20 32->32 16x16", conv3x3(64, 32, 16, 32, 1, false));
  conv("rn20 64->64 8x8", conv3x3(64, 64, 8, 64, 1, false));
  conv("rn20 16->32 s2 32x32", conv3x3(64, 16, 32, 32, 2, false));
  conv("rn20 32->64 s2 16x16", conv3x3(64, 32, 16, 64, 2, false));
  return l;
}

std::string spec_line(const Layer& l) {
  std::ostringstream s;
  std::string name = l.name;
  std::replace(name.begin(), name.end(), ' ', '_');
  s << l.kind << ' ' << name;
  if (l.kind == "conv") {
    const auto& p = l.conv;
    for (int64_t v : {p.n, p.c, p.h, p.w, p.out_channels, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_top, p.pad_bottom,
                      p.pad_left, p.pad_right, p.dilation_h, p.dilation_w, p.groups, int64_t(p.has_bias)})
      s << ' ' << v;
  } else if (l.kind == "maxpool") {
    const auto& p = l.pool;
    for (int64_t v : {p.n, p.c, p.h, p.w, p.kh, p.kw, p.stride, p.padding}) s << ' ' << v;
  } else {
    s << ' ' << l.bn.n << ' ' << l.bn.c << ' ' << l.bn.h << ' ' << l.bn.w << ' ' << l.bn.epsilon;
  }
  return s.str();
}

struct Timing {
  double best = 0, median = 0;  // ms
};

Timing time_ms(const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), reps % 2 ? t[size_t(reps / 2)] : (t[size_t(reps / 2 - 1)] + t[size_t(reps / 2)]) / 2};
}

std::vector<float> randoms(int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = d(gen);
  return v;
}

// key: layer name, op, impl -> one Timing per round
using Results = std::map<std::tuple<std::string, std::string, std::string>, std::vector<Timing>>;

void time_conv(const Layer& l, int reps, Results& out) {
  const dnn::Conv2dParams& p = l.conv;
  auto x = randoms(dnn::conv2d_input_elems(p), 1), w = randoms(dnn::conv2d_weight_elems(p), 2);
  auto b = randoms(p.out_channels, 3), dy = randoms(dnn::conv2d_output_elems(p), 4);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
  const float* bias = p.has_bias ? b.data() : nullptr;
  float* dbias = p.has_bias ? db.data() : nullptr;
  using F = dnn::onednn::ConvFormat;
  for (auto [impl, format] : {std::pair<const char*, F>{"onednn_nchw", F::plain}, {"onednn_blocked", F::blocked}}) {
    out[{l.name, "fwd", impl}].push_back(
        time_ms([&] { dnn::onednn::conv2d_forward(p, x.data(), w.data(), bias, y.data(), format); }, 3, reps));
    out[{l.name, "bwd_data", impl}].push_back(
        time_ms([&] { dnn::onednn::conv2d_backward_data(p, dy.data(), w.data(), dx.data(), format); }, 3, reps));
    out[{l.name, "bwd_weights", impl}].push_back(time_ms(
        [&] { dnn::onednn::conv2d_backward_weights(p, x.data(), dy.data(), dw.data(), dbias, format); }, 3, reps));
  }
  out[{l.name, "fwd", "im2col"}].push_back(
      time_ms([&] { dnn::im2col::conv2d_forward(p, x.data(), w.data(), bias, y.data()); }, 3, reps));
  out[{l.name, "bwd_data", "im2col"}].push_back(
      time_ms([&] { dnn::im2col::conv2d_backward_data(p, dy.data(), w.data(), dx.data()); }, 3, reps));
  out[{l.name, "bwd_weights", "im2col"}].push_back(
      time_ms([&] { dnn::im2col::conv2d_backward_weights(p, x.data(), dy.data(), dw.data(), dbias); }, 3, reps));
}

void time_pool(const Layer& l, int reps, Results& out) {
  const dnn::Pool2dParams& p = l.pool;
  const dnn::Size2d o = dnn::pool2d_output_size(p);
  auto x = randoms(p.n * p.c * p.h * p.w, 5), dy = randoms(p.n * p.c * o.h * o.w, 6);
  std::vector<float> y(dy.size()), dx(x.size());
  std::vector<int32_t> idx(dy.size());
  std::vector<unsigned char> ws(dnn::onednn::max_pool2d_workspace_bytes(p));
  out[{l.name, "fwd", "native"}].push_back(
      time_ms([&] { dnn::native::max_pool2d_forward(p, x.data(), y.data(), idx.data()); }, 3, reps));
  out[{l.name, "bwd", "native"}].push_back(
      time_ms([&] { dnn::native::max_pool2d_backward(p, dy.data(), idx.data(), nullptr, dx.data()); }, 3, reps));
  out[{l.name, "fwd", "onednn_nchw"}].push_back(
      time_ms([&] { dnn::onednn::max_pool2d_forward(p, x.data(), y.data(), ws.data()); }, 3, reps));
  out[{l.name, "bwd", "onednn_nchw"}].push_back(
      time_ms([&] { dnn::onednn::max_pool2d_backward(p, dy.data(), ws.data(), dx.data()); }, 3, reps));
}

void time_bnorm(const Layer& l, int reps, Results& out) {
  const dnn::BatchNormParams& p = l.bn;
  const int64_t count = p.n * p.c * p.h * p.w;
  auto x = randoms(count, 7), dy = randoms(count, 8), g = randoms(p.c, 9), b = randoms(p.c, 10);
  const size_t cn = static_cast<size_t>(count), cc = static_cast<size_t>(p.c);
  std::vector<float> y(cn), dx(cn), mean(cc), var(cc), dg(g.size()), dbeta(b.size());
  struct Impl {
    const char* name;
    decltype(&dnn::onednn::batch_norm_forward_training) forward;
    decltype(&dnn::onednn::batch_norm_backward) backward;
  };
  for (const Impl& impl :
       {Impl{"onednn_nchw", dnn::onednn::batch_norm_forward_training, dnn::onednn::batch_norm_backward},
        Impl{"native", dnn::native::batch_norm_forward_training, dnn::native::batch_norm_backward}}) {
    out[{l.name, "fwd", impl.name}].push_back(
        time_ms([&] { impl.forward(p, x.data(), g.data(), b.data(), y.data(), mean.data(), var.data()); }, 3, reps));
    out[{l.name, "bwd", impl.name}].push_back(time_ms(
        [&] {
          impl.backward(p, x.data(), dy.data(), g.data(), mean.data(), var.data(), dx.data(), dg.data(), dbeta.data());
        },
        3, reps));
  }
}

// Runs the PyTorch side once over every layer and adds its timings as impl "torch".
void time_torch(const std::string& python, const std::string& script, const std::string& spec,
                const std::vector<Layer>& ls, int reps, Results& out) {
  const std::string cmd = "OMP_NUM_THREADS=1 " + python + " " + script + " " + spec + " 3 " + std::to_string(reps);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  char buf[512];
  std::map<std::string, std::string> names;
  for (const Layer& l : ls) {
    std::string n = l.name;
    std::replace(n.begin(), n.end(), ' ', '_');
    names[n] = l.name;
  }
  while (fgets(buf, sizeof buf, pipe)) {
    std::istringstream line(buf);
    std::string layer, op, best, median;
    if (!std::getline(line, layer, ',') || !std::getline(line, op, ',') || !std::getline(line, best, ',') ||
        !std::getline(line, median))
      continue;
    out[{names.at(layer), op, "torch"}].push_back({std::stod(best), std::stod(median)});
  }
  if (pclose(pipe) != 0) throw std::runtime_error("failed: " + cmd);
}

// Over the rounds: the best of the bests and the median of the medians.
Timing combine(const std::vector<Timing>& rounds) {
  Timing t{rounds.at(0).best, 0};
  std::vector<double> medians;
  for (const Timing& r : rounds) {
    t.best = std::min(t.best, r.best);
    medians.push_back(r.median);
  }
  std::sort(medians.begin(), medians.end());
  const size_t k = medians.size();
  t.median = k % 2 ? medians[k / 2] : (medians[k / 2 - 1] + medians[k / 2]) / 2;
  return t;
}

void report(const std::vector<Layer>& ls, const Results& res, const std::string& csv_path) {
  std::ofstream csv(csv_path);
  csv << "layer,op,impl,best_ms,median_ms,torch_median_ms,ratio_to_torch,round_medians_ms\n";
  std::printf("\n%-28s %-15s %9s %9s %9s %9s %9s\n", "layer", "impl", "fwd", "bwd_data", "bwd_wts", "total",
              "vs torch");
  for (const Layer& l : ls) {
    const std::vector<std::string> ops = l.kind == "conv" ? std::vector<std::string>{"fwd", "bwd_data", "bwd_weights"}
                                                          : std::vector<std::string>{"fwd", "bwd"};
    std::vector<std::string> impls;
    for (const auto& [key, v] : res)
      if (std::get<0>(key) == l.name && std::find(impls.begin(), impls.end(), std::get<2>(key)) == impls.end())
        impls.push_back(std::get<2>(key));
    double torch_total = 0;
    for (const std::string& op : ops) torch_total += combine(res.at({l.name, op, "torch"})).median;
    for (const std::string& impl : impls) {
      double total = 0;
      std::printf("%-28s %-15s", l.name.c_str(), impl.c_str());
      for (const std::string& op : ops) {
        const Timing t = combine(res.at({l.name, op, impl}));
        const double tm = combine(res.at({l.name, op, "torch"})).median;
        total += t.median;
        std::printf(" %9.3f", t.median);
        csv << '"' << l.name << "\"," << op << ',' << impl << ',' << t.best << ',' << t.median << ',' << tm << ','
            << t.median / tm << ',';
        for (const Timing& r : res.at({l.name, op, impl})) csv << r.median << ' ';
        csv << '\n';
      }
      if (ops.size() == 2) std::printf(" %9s", "");
      std::printf(" %9.3f %8.2fx\n", total, total / torch_total);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, reps = 20;
  std::string csv = std::string(SYNK_BENCH_OUT_DIR) + "/dnn_bench.csv", png = std::string(SYNK_BENCH_OUT_DIR) + "/dnn_bench.png", python = "/usr/bin/python3";
  std::string script = std::string(SYNK_SOURCE_DIR) + "/bench/dnn_torch.py";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--rounds")
      rounds = std::stoi(v);
    else if (a == "--reps")
      reps = std::stoi(v);
    else if (a == "--csv")
      csv = v;
    else if (a == "--png")
      png = v;
    else if (a == "--script")
      script = v;
    else if (a == "--python")
      python = v;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  const std::vector<Layer> ls = layers();
  const std::string spec = "/tmp/dnn_bench_spec." + std::to_string(getpid());
  {
    std::ofstream s(spec);
    for (const Layer& l : ls) s << spec_line(l) << '\n';
  }
  std::printf("oneDNN %s, one thread; %d rounds x %d reps (median per round, median over rounds)\n",
              dnn::onednn::version_text().c_str(), rounds, reps);
  Results res;
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "round %d: C++...\n", r + 1);
    for (const Layer& l : ls) {
      if (l.kind == "conv")
        time_conv(l, reps, res);
      else if (l.kind == "maxpool")
        time_pool(l, reps, res);
      else
        time_bnorm(l, reps, res);
    }
    std::fprintf(stderr, "round %d: PyTorch...\n", r + 1);
    time_torch(python, script, spec, ls, reps, res);
  }
  std::remove(spec.c_str());
  report(ls, res, csv);
  const std::string plot = python + " " + script + " --plot " + csv + " " + png;
  if (std::system(plot.c_str()) != 0) std::fprintf(stderr, "plotting failed: %s\n", plot.c_str());
  std::printf("\nwrote %s and %s\n", csv.c_str(), png.c_str());
  return 0;
}
