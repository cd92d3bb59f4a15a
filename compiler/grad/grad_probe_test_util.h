// What the fuzzers' helpers (compiler_grad_fd_one_fuzz, compiler_cpu_diff_one_fuzz) share: loading
// a mutant, binding its sizes, and gradient probes, a copy of a function whose outputs become
// `loss = sum(o * (o + 1.37))` of one of its values `o` and `grad(loss, v)` for a variable `v` that
// `o` reads (a shared variable or an input). The fd helper checks such probes against central
// differences; the diff helper compiles them and compares the generated gradient code with the
// reference evaluator.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "compiler/cpu/cpu_test_util.h"
#include "compiler/grad/grad.h"
#include "compiler/pipeline.h"
#include "ir/ir.h"

namespace synk::compiler::testing {

// The module of a mutant, prepared, with every gradient expandable (a gradient the program cannot
// have rejects the whole program, as `synkc check` does); nullopt after printing `user (compile)`
// or `usage: ...`.
inline std::optional<ir::Module> load_fuzz_module(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::printf("usage: cannot read %s\n", path.c_str());
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    ir::Module module = prepare_module(path, text.str(), std::filesystem::path(path).parent_path().string());
    if (has_gradients(module)) (void)expand_gradients(module);
    return module;
  } catch (const synk::UserError&) {
    std::printf("user (compile)\n");
    return std::nullopt;
  }
}

// A helper's main: `HELPER FILE SEED`, running `run(FILE, SEED)`.
inline int fuzz_helper_main(int argc, char** argv, int (*run)(const std::string& path, uint64_t seed)) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE SEED\n", argv[0]);
    return 2;
  }
  return run(argv[1], std::strtoull(argv[2], nullptr, 10));
}

// Every symbolic dimension of `fn`'s inputs and of the shared variables, bound at random in
// [low, high].
inline std::map<std::string, int64_t> random_sizes(const ir::Module& m, const ir::Function& fn, std::mt19937_64& rng,
                                                   int64_t low, int64_t high) {
  std::set<std::string> symbols;
  auto collect = [&](const ir::Shape& shape) {
    for (const ir::Dim& d : shape)
      if (d.is_symbolic()) symbols.insert(d.symbol);
  };
  for (const ir::Param& p : fn.params) collect(p.type.shape);
  for (const ir::SharedVar& s : m.shareds) collect(s.type.shape);
  std::map<std::string, int64_t> sizes;
  for (const std::string& s : symbols) sizes[s] = low + int64_t(rng() % uint64_t(high - low + 1));
  return sizes;
}

// How many elements `fn`'s arguments (inputs and shared variables) hold with `sizes`: a mutant may
// declare f32[1000000, 1000000], and the arguments are the harness's to allocate.
inline double argument_elements(const ir::Module& m, const ir::Function& fn, const std::map<std::string, int64_t>& sizes) {
  double elements = 0;
  auto count = [&](const ir::Shape& shape) {
    double n = 1;
    for (int64_t d : concrete_shape(shape, sizes)) n *= double(d);
    elements += n;
  };
  for (const ir::Param& p : fn.params) count(p.type.shape);
  for (const ir::SharedVar& v : m.shareds) count(v.type.shape);
  return elements;
}

// `m` in f64: every f32, f16 and bf16 type (of variables, inputs and values) widened.
inline void widen(ir::Module& m) {
  auto widen_type = [](ir::TensorType& t) {
    if (ir::is_float(t.dtype)) t.dtype = ir::DType::F64;
  };
  for (ir::SharedVar& s : m.shareds) widen_type(s.type);
  for (ir::Function& fn : m.functions) {
    for (ir::Param& p : fn.params) widen_type(p.type);
    for (ir::Node& n : fn.nodes) widen_type(n.type);
  }
}

// A variable of a probe: an index into Module::shareds, or into Function::params when `input`.
struct ProbeVariable {
  bool input = false;
  int64_t index = -1;
  friend auto operator<=>(const ProbeVariable&, const ProbeVariable&) = default;
};

// The float shared variables and inputs node `root` reads, directly or through its operands.
inline std::set<ProbeVariable> float_variables_read(const ir::Module& m, const ir::Function& fn, ir::NodeId root) {
  std::set<ProbeVariable> out;
  std::vector<bool> seen(fn.nodes.size());
  std::vector<ir::NodeId> stack{root};
  while (!stack.empty()) {
    const ir::NodeId id = stack.back();
    stack.pop_back();
    if (seen[size_t(id)]) continue;
    seen[size_t(id)] = true;
    const ir::Node& n = fn.node(id);
    if (n.op == ir::Op::SharedRead && ir::is_float(m.shareds.at(size_t(n.attrs.index)).type.dtype))
      out.insert({false, n.attrs.index});
    if (n.op == ir::Op::Input && ir::is_float(n.type.dtype)) out.insert({true, n.attrs.index});
    for (ir::NodeId o : n.operands) stack.push_back(o);
  }
  return out;
}

// `fn`'s outputs and updates as probe roots: the float ones.
inline std::vector<ir::NodeId> float_roots(const ir::Function& fn) {
  std::vector<ir::NodeId> roots;
  for (const ir::Output& o : fn.outputs) roots.push_back(o.node);
  for (const ir::Update& u : fn.updates) roots.push_back(u.node);
  std::erase_if(roots, [&](ir::NodeId r) { return !ir::is_float(fn.node(r).type.dtype); });
  return roots;
}

// `fn` with its outputs replaced by the probe's, `fd_loss` and `fd_grad`, and no updates.
inline ir::Function probe_of(const ir::Module& m, const ir::Function& fn, ir::NodeId o, ProbeVariable v) {
  ir::Function p = fn;
  p.outputs.clear();
  p.updates.clear();
  const ir::TensorType of_o = fn.node(o).type;
  const ir::TensorType scalar{of_o.dtype, {}};
  ir::Node c{.op = ir::Op::Constant, .type = scalar};
  c.attrs.value = 1.37;
  const ir::NodeId ci = p.add(c);
  const ir::NodeId shifted = p.add(ir::Node{.op = ir::Op::Add, .type = of_o, .operands = {o, ci}});
  ir::NodeId loss = p.add(ir::Node{.op = ir::Op::Mul, .type = of_o, .operands = {o, shifted}});
  if (!of_o.shape.empty()) {
    ir::Node sum{.op = ir::Op::ReduceSum, .type = scalar, .operands = {loss}};
    for (int64_t a = 0; a < int64_t(of_o.shape.size()); ++a) sum.attrs.axes.push_back(a);
    loss = p.add(sum);
  }
  const ir::TensorType var_type = v.input ? fn.params.at(size_t(v.index)).type : m.shareds.at(size_t(v.index)).type;
  ir::Node read{.op = v.input ? ir::Op::Input : ir::Op::SharedRead, .type = var_type};
  read.attrs.index = v.index;
  const ir::NodeId ri = p.add(read);
  const ir::NodeId g = p.add(ir::Node{.op = ir::Op::Grad, .type = var_type, .operands = {loss, ri}});
  p.outputs.push_back({.name = "fd_loss", .node = loss});
  p.outputs.push_back({.name = "fd_grad", .node = g});
  return p;
}

}  // namespace synk::compiler::testing
