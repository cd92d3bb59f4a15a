// The differential check of one .synk file, for scripts/fuzz-compiler.py --diff: every function of
// the file (training steps expanded, as a program runs them) is compiled for the CPU and run on
// random arguments beside the float64 reference evaluator (cpu_test_util.h's run_differential, the
// check of the differential tests), with every symbolic dimension bound to a random size from 0 to
// 6 (`skip NAME` where the arguments would exceed 10^8 elements); then a gradient probe of the
// function (grad_probe_test_util.h: the gradient of one of its float values with respect to a
// variable or input that value reads), compiled and compared the same way, so that gradient graphs
// the program does not write (second derivatives among them) reach the code generator. Prints one
// line per function and probe: `ok
// NAME`, `both-fail NAME` (both sides reject the data with a user error), `inexact NAME` (integers
// near 2^53 or values past f32's range, where the double reference cannot be matched, or an f32
// difference that the module's f64 twin on the same draws does not show) or `finding
// NAME: ...` (a difference, or only one side failing); a program that does not compile prints `user
// (compile)`. Not a test: mutants are random programs, so a run is a search, not a check (the
// tolerance is looser than the tests', for long f32 sums).
//
//   compiler_cpu_diff_one_fuzz FILE SEED
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "compiler/cpu/cpu_test_util.h"
#include "compiler/grad/grad_probe_test_util.h"

namespace {

using namespace synk::compiler::testing;

// Why a difference is not a finding ("" when it is one): `failure` reads "... is G but the
// reference says W". The reference computes in double, so it rounds integers near 2^53 (2^53 + 1
// is not a double) and never overflows where f32 does (exp(100) is finite there, inf in f32).
std::string no_verdict(const std::string& failure, bool has_f32) {
  const std::string is = " is ", says = " but the reference says ";
  const size_t s = failure.find(says), i = failure.rfind(is, s);
  if (s == std::string::npos || i == std::string::npos) return {};
  const double got = std::strtod(failure.c_str() + i + is.size(), nullptr);
  const double want = std::strtod(failure.c_str() + s + says.size(), nullptr);
  if (std::fabs(want) >= 1125899906842624.0 && std::fabs(got - want) <= 1e-12 * std::fabs(want) + 4)   // 2^50
    return "integers near 2^53, which the reference holds as doubles";
  if (has_f32 && std::fabs(want) >= 1e15)
    return "values past what f32 intermediates hold, where the reference is double";
  return {};
}

// Compares `fn` of `module`, compiled and in the reference, on random arguments; returns its line
// under `label`.
std::string compare(const synk::ir::Module& module, const synk::ir::Function& fn, const std::string& label,
                    const Sizes& sizes, std::mt19937_64& rng) {
  // An f64 result can hold f32 pieces (an f32 input promoted), which the reference computes
  // in double: such a function gets the f32 tolerance throughout.
  const bool has_f32 = std::any_of(fn.nodes.begin(), fn.nodes.end(),
                                   [](const synk::ir::Node& n) { return n.type.dtype == synk::ir::DType::F32; });
  const double f64_tol = has_f32 ? 1e-3 : 1e-9;
  const Tolerance loose{.f32_rel = 1e-3, .f32_abs = 1e-3, .f64_rel = f64_tol, .f64_abs = f64_tol};
  const char* name = label.c_str();
  try {
    // Small non-negative integers half the time, so that many are valid indices and labels.
    // Floats ~ normal(0, 1): the tests' scale 2 makes a three-layer network's logits reach the
    // tens of thousands, where f32's rounding decides near-ties of the softmax.
    ValueStyle style{.scale = 1};
    if (rng() % 2) style.int_low = 0, style.int_high = 3;
    const CaseResult r = run_differential(module, fn.name, sizes, rng(), style, loose);
    const std::string excuse = r.failure.empty() ? std::string() : no_verdict(r.failure, has_f32);
    if (!excuse.empty()) return fmt::format("inexact {}: {}", name, excuse);
    if (!r.failure.empty()) return fmt::format("finding {}: sizes {}: {}", name, sizes, r.failure);
    if (!r.user_error_compiled.empty()) return fmt::format("both-fail {}", name);
    return fmt::format("ok {}", name);
  } catch (const synk::UserError& e) {   // a compile-time rejection of the function itself
    return fmt::format("user {}: {}", name, e.what());
  } catch (const std::exception& e) {
    return fmt::format("finding {}: sizes {}: {}", name, sizes, e.what());
  }
}

// compare(), and for a difference, once more with the module in f64 on the same draws: f32
// rounding of large or cancelling values (a softmax's near-ties, a norm of huge activations) is
// no finding when the f64 twin agrees with the reference.
std::string compare_twice(const synk::ir::Module& module, const std::string& fn_name, const std::string& label,
                          const Sizes& sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string line = compare(module, *module.find_function(fn_name), label, sizes, rng);
  if (!line.starts_with("finding")) return line;
  synk::ir::Module wide = module;
  widen(wide);
  rng.seed(seed);
  if (compare(wide, *wide.find_function(fn_name), label, sizes, rng).starts_with("ok"))
    return "inexact " + label + ": f32 rounding (its f64 twin agrees): " + line;
  return line;
}

void print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int run(const std::string& path, uint64_t seed) {
  const std::optional<synk::ir::Module> loaded = load_fuzz_module(path);
  if (!loaded) return 0;
  const synk::ir::Module& module = *loaded;
  std::mt19937_64 rng(seed);
  for (const synk::ir::Function& fn : module.functions) {
    const Sizes sizes = random_sizes(module, fn, rng, 0, 6);
    const double elements = argument_elements(module, fn, sizes);
    if (elements > 1e8) {
      std::printf("skip %s: %.3g elements of arguments\n", fn.name.c_str(), elements);
      continue;
    }
    print(compare_twice(module, fn.name, fn.name, sizes, rng()));
    // A gradient probe of one of its values, compiled: the generated code of gradient graphs the
    // program does not write itself (second derivatives, backward ops differentiated again).
    const std::vector<synk::ir::NodeId> roots = float_roots(fn);
    if (roots.empty()) continue;
    const synk::ir::NodeId root = roots[rng() % roots.size()];
    const std::set<ProbeVariable> variables = float_variables_read(module, fn, root);
    if (variables.empty()) continue;
    const ProbeVariable v = *std::next(variables.begin(), ptrdiff_t(rng() % variables.size()));
    synk::ir::Module probed = module;
    probed.functions = {probe_of(module, fn, root, v)};
    probed.functions[0].name = "fd_probe";
    probed.train_steps.clear();
    for (synk::ir::Optimizer& o : probed.optimizers) o.parameters.clear(), o.gradient = -1;
    const std::string label = fmt::format("{} probe node {} d/d {}{}", fn.name, root, v.input ? "input " : "", v.index);
    print(compare_twice(probed, "fd_probe", label, sizes, rng()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return synk::compiler::testing::fuzz_helper_main(argc, argv, run); }
