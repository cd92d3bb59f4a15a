// The gradient check of one .synk file, for scripts/fuzz-compiler.py --grad: the gradient pass's
// rules against float64 central differences on mutated programs. The differential checks
// (--diff) cannot see a wrong rule, since the compiled code and the reference evaluator both run
// the expanded gradient; this compares that expansion with the numbers themselves.
//
// The module is widened to f64 (every f32, f16 and bf16 type), so that differences of 1e-6 mean
// something, and each function's float inputs become shared variables (sizes bound at random,
// 1 to 5). For each float output or update `o` (a grad's result included, so second derivatives
// are checked too) and each float variable `v` that `o` reads, the function gets a probe
// (grad_probe_test_util.h): loss = sum(o * (o + 1.37)) (zero only where `o` is), grad(loss, v).
// A few random elements of `v` are moved by +-h for two steps h. No verdict for an element whose
// one-sided differences disagree (a kink, a tie of max, a step of floor) or whose two central
// differences disagree, for a loss past 1e12, or for a NaN gradient where the function selects
// between values (an untaken branch still passes 0 * inf = NaN, as in PyTorch and JAX) or has an
// op whose derivative can be infinite (sqrt, log, pow, a division). Prints one line per probe:
// `ok F o v`, `kink F o v`, `zero-times-inf F o v`, `skip F ...`, or `finding F: ...` (the
// analytic and numeric derivatives, the element and the sizes). A program that does not compile
// prints `user (compile)`. Not a test: a search over random programs.
//
//   compiler_grad_fd_one_fuzz FILE SEED
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "compiler/cpu/cpu_test_util.h"
#include "compiler/grad/grad_probe_test_util.h"

namespace {

using namespace synk::compiler::testing;
using synk::dsl::HostTensor;
namespace dsl = synk::dsl;
using synk::ir::Node;
using synk::ir::NodeId;
using synk::ir::Op;

constexpr int kElementsPerProbe = 6;
constexpr double kSecondsPerFile = 20;

// `t` with the symbolic dimensions that `sizes` binds made static.
void bind(synk::ir::TensorType& t, const Sizes& sizes) {
  for (synk::ir::Dim& d : t.shape)
    if (auto it = sizes.find(d.symbol); d.is_symbolic() && it != sizes.end()) d = synk::ir::Dim::fixed(it->second);
}

// Every float input of `fn` becomes a shared variable too (the inputs' sizes bound to `sizes`), so
// that a probe can differentiate with respect to it: most programs have more inputs than variables.
// The input stays declared, unread.
synk::ir::Function inputs_as_variables(synk::ir::Module& m, const synk::ir::Function& fn, const Sizes& sizes) {
  synk::ir::Function out = fn;
  for (synk::ir::SharedVar& s : m.shareds) bind(s.type, sizes);   // sliceable ones have a symbolic size
  for (synk::ir::Param& p : out.params) bind(p.type, sizes);
  for (Node& n : out.nodes) bind(n.type, sizes);
  for (Node& n : out.nodes) {
    if (n.op != Op::Input) continue;
    const synk::ir::Param& p = out.params.at(size_t(n.attrs.index));
    const bool static_shape = std::none_of(p.type.shape.begin(), p.type.shape.end(),
                                           [](const synk::ir::Dim& d) { return d.is_symbolic(); });
    if (!synk::ir::is_float(p.type.dtype) || !static_shape) continue;
    const std::string name = "input_" + p.name;
    int64_t v = m.find_shared(name);
    if (v < 0) {
      m.shareds.push_back({.name = name, .type = p.type});
      v = int64_t(m.shareds.size()) - 1;
    }
    n.op = Op::SharedRead;
    n.attrs.index = v;
  }
  return out;
}

struct Probe {
  const synk::ir::Module& module;
  synk::ir::Function expanded;
  // The function selects between values or has ops with infinite derivatives: a NaN gradient
  // may be a zero adjoint times inf.
  bool may_be_zero_times_inf = false;
  std::vector<HostTensor> inputs, shareds;
  double loss_at(int64_t v, int64_t j, double x) const {
    std::vector<HostTensor> moved = shareds;
    moved[size_t(v)].data[size_t(j)] = x;
    return dsl::evaluate(module, expanded, inputs, moved).outputs.at(0).data.at(0);
  }
};

// One element's verdict: "" when the derivatives agree, "kink" when the numbers cannot tell, or
// the finding's text.
std::string check_element(const Probe& probe, int64_t v, int64_t j, double analytic, double loss) {
  const double x = probe.shareds[size_t(v)].data[size_t(j)];
  const double scale = std::max(1.0, std::fabs(x));
  const double h1 = 1e-6 * scale, h2 = 1e-5 * scale;
  const double up1 = probe.loss_at(v, j, x + h1), down1 = probe.loss_at(v, j, x - h1);
  const double up2 = probe.loss_at(v, j, x + h2), down2 = probe.loss_at(v, j, x - h2);
  const double forward = (up1 - loss) / h1, backward = (loss - down1) / h1;
  const double central1 = (up1 - down1) / (2 * h1), central2 = (up2 - down2) / (2 * h2);
  for (double d : {up1, down1, up2, down2})
    if (!std::isfinite(d)) return "kink";
  const double tol = 1e-4 * (1 + std::fabs(central1)) + 1e-8 * std::fabs(loss) / h1;
  if (std::fabs(forward - backward) > 2 * tol || std::fabs(central1 - central2) > tol) return "kink";
  if (std::isfinite(analytic) && std::fabs(analytic - central1) <= tol) return "";
  // A branch that where/maximum/relu did not select still passes its zero adjoint through its own
  // rules, and 0 * inf is NaN (as in PyTorch and JAX; docs/training.md); so does a zero adjoint
  // meeting sqrt's, log's, pow's or a division's infinite derivative (sqrt(abs(g)) where g is 0
  // whatever the variable): not a finding there.
  if (!std::isfinite(analytic) && probe.may_be_zero_times_inf) return "zero-times-inf";
  return fmt::format("element {}: grad {} but central differences {} (h {}) and {} (h {}), loss {}", j, analytic,
                     central1, h1, central2, h2, loss);
}

// Runs the probe of output/update node `o` against variable `v`; prints its line.
void run_probe(const synk::ir::Module& m, const synk::ir::Function& fn, NodeId o, int64_t v, const Sizes& sizes,
               std::mt19937_64& rng) {
  const std::string what = fmt::format("{} node {} ({}) d/d {}", fn.name, o, synk::ir::op_name(fn.node(o).op),
                                       m.shareds[size_t(v)].name);
  Probe probe{m, synk::compiler::expand_gradients(m, probe_of(m, fn, o, {false, v}))};
  probe.may_be_zero_times_inf = std::any_of(fn.nodes.begin(), fn.nodes.end(), [](const Node& n) {
    switch (n.op) {
      case Op::Where: case Op::Maximum: case Op::Minimum: case Op::Relu:   // an untaken branch
      case Op::Sqrt: case Op::Log: case Op::Pow: case Op::Div:            // an infinite local derivative
        return true;
      default:
        return false;
    }
  });
  const ValueStyle style{.scale = 1, .int_low = 0, .int_high = 1};   // valid labels and indices, mostly
  for (const synk::ir::Param& p : fn.params) probe.inputs.push_back(random_tensor(p.type, sizes, rng, style));
  for (const synk::ir::SharedVar& s : m.shareds) probe.shareds.push_back(random_tensor(s.type, sizes, rng, style));
  dsl::EvalResult base;
  try {
    base = dsl::evaluate(m, probe.expanded, probe.inputs, probe.shareds);
  } catch (const synk::UserError& e) {   // the random data broke a rule (an index out of range)
    std::printf("skip %s: %s\n", what.c_str(), e.what());
    return;
  }
  const double loss = base.outputs.at(0).data.at(0);
  const HostTensor& gradient = base.outputs.at(1);
  // A loss past 1e12 comes from dividing by a cancellation's residue (x / sum(x - mean(x))), where
  // neither side's digits mean anything.
  if (!std::isfinite(loss) || std::fabs(loss) > 1e12 || gradient.size() == 0) {
    std::printf("skip %s: loss %g over %lld elements\n", what.c_str(), loss, (long long)gradient.size());
    return;
  }
  int kinks = 0, zero_times_inf = 0;
  for (int k = 0; k < kElementsPerProbe; ++k) {
    const int64_t j = int64_t(rng() % uint64_t(gradient.size()));
    const std::string verdict = check_element(probe, v, j, gradient.data[size_t(j)], loss);
    if (verdict == "kink") {
      ++kinks;
    } else if (verdict == "zero-times-inf") {
      ++zero_times_inf;
    } else if (!verdict.empty()) {
      std::printf("finding %s: sizes %s: %s\n", what.c_str(), fmt::format("{}", sizes).c_str(), verdict.c_str());
      return;
    }
  }
  std::printf("%s %s\n", zero_times_inf ? "zero-times-inf" : kinks == kElementsPerProbe ? "kink" : "ok", what.c_str());
}

// Probes every float output and update of `fn` against each float variable it reads; false when
// the file's time is up.
bool probe_function(const synk::ir::Module& module, const synk::ir::Function& fn, const Sizes& sizes,
                    std::mt19937_64& rng, std::chrono::steady_clock::time_point start) {
  for (NodeId o : float_roots(fn)) {
    for (const ProbeVariable& variable : float_variables_read(module, fn, o)) {
      if (variable.input) continue;   // one inputs_as_variables left (a symbolic size it could not bind)
      const int64_t v = variable.index;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kSecondsPerFile) {
        std::printf("skip the rest: over %g s\n", kSecondsPerFile);
        return false;
      }
      try {
        run_probe(module, fn, o, v, sizes, rng);
      } catch (const synk::UserError& e) {
        std::printf("user %s: %s\n", fn.name.c_str(), e.what());
      } catch (const std::exception& e) {
        std::printf("finding %s: sizes %s: %s\n", fn.name.c_str(), fmt::format("{}", sizes).c_str(), e.what());
      }
      std::fflush(stdout);
    }
  }
  return true;
}

int run(const std::string& path, uint64_t seed) {
  std::optional<synk::ir::Module> loaded = load_fuzz_module(path);
  if (!loaded) return 0;
  synk::ir::Module& module = *loaded;
  widen(module);
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  for (const synk::ir::Function& fn : module.functions) {
    const Sizes sizes = random_sizes(module, fn, rng, 1, 5);
    if (argument_elements(module, fn, sizes) > 1e7) {
      std::printf("skip %s: over 10^7 elements of arguments\n", fn.name.c_str());
      continue;
    }
    synk::ir::Module with_inputs = module;
    const synk::ir::Function probed = inputs_as_variables(with_inputs, fn, sizes);
    if (!probe_function(with_inputs, probed, sizes, rng, start)) return 0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return synk::compiler::testing::fuzz_helper_main(argc, argv, run); }
