// Distributing a sum over the terms of its operand (passes.h): sum(a*s + b*t - c) over axes where
// s and t are constant becomes s*sum(a) + t*sum(b) - sum(c), when the operand is in memory for
// another reader anyway and the term sums are already computed (or one new one is). Batch norm's
// backward is the case it is for: the gradient of its centred input, dxc = g*k + xc*v + xc*v, is
// read by the input's gradient and summed for the mean's; distributed, that sum is
// k*sum(g) + v*sum(xc) + v*sum(xc), sum(g) is beta's gradient already, sum(xc) joins the forward
// pass that sums xc*xc for the variance, and dxc is no longer written and read back twice: three
// of the eleven passes over the activation that the backward made. It is a reassociation, like
// PyTorch's closed-form batch-norm gradient, so the last bits of the sum differ from the sum of
// the materialised terms (and with an infinite factor, inf and NaN can trade places).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "compiler/passes/passes.h"

namespace synk::compiler {
namespace {

using ir::Node;
using ir::NodeId;
using ir::Op;

constexpr size_t kMaxTerms = 8;         // leaves of one distributed sum
constexpr size_t kMaxNewSums = 1;       // term sums that do not exist yet (each is a pass)

using SumKey = std::tuple<NodeId, std::vector<int64_t>, bool>;   // operand, axes, keepdims

// The node a term is scaled by, seen through a broadcast, when it is constant along every reduced
// axis (size 1 there, right-aligned as numpy broadcasts) and its shape is static: what may move
// out of the sum.
std::optional<NodeId> factor_source(const ir::Function& fn, NodeId id, const ir::TensorType& full,
                                    const std::vector<int64_t>& axes) {
  const Node* n = &fn.node(id);
  if (n->op == Op::BroadcastTo) id = n->operands[0], n = &fn.node(id);
  if (n->type.dtype != full.dtype || n->type.rank() > full.rank()) return std::nullopt;
  const size_t lead = full.rank() - n->type.rank();
  for (const ir::Dim& d : n->type.shape)
    if (d.is_symbolic()) return std::nullopt;
  for (int64_t a : axes)
    if (size_t(a) >= lead && n->type.shape[size_t(a) - lead].size != 1) return std::nullopt;
  return id;
}

// How one sum distributes: the chain of add/sub/neg/mul-by-factor nodes under it, in an order in
// which operands come first, and the leaves it ends in.
struct Distribution {
  std::vector<NodeId> chain;
  std::vector<NodeId> leaves;
  struct Product {
    NodeId scaled;   // the full-size operand
    NodeId factor;   // the factor's source
  };
  std::map<NodeId, Product> products;   // the mul nodes of the chain
  std::set<NodeId> seen;             // each node once, however often the tree reaches it
};

class Planner {
 public:
  explicit Planner(const ir::Function& fn) : fn_(fn), uses_(fn.nodes.size(), 0) {
    for (const Node& n : fn.nodes)
      for (NodeId o : n.operands) ++uses_[size_t(o)];
    for (const ir::Output& o : fn.outputs) ++uses_[size_t(o.node)];
    for (const ir::Update& u : fn.updates) ++uses_[size_t(u.node)];
    for (const Node& n : fn.nodes)
      if (n.op == Op::ReduceSum) sums_.insert(SumKey{n.operands[0], n.attrs.axes, n.attrs.keepdims});
  }

  // The distribution of sum node `id`, when it saves passes.
  std::optional<Distribution> plan(NodeId id) {
    const Node& sum = fn_.node(id);
    if (sum.op != Op::ReduceSum || !ir::is_float(sum.type.dtype)) return std::nullopt;
    const NodeId top = sum.operands[0];
    full_ = fn_.node(top).type;
    axes_ = sum.attrs.axes;
    Distribution d;
    if (!collect(top, d) || d.chain.empty() || d.leaves.size() > kMaxTerms) return std::nullopt;
    size_t fresh = 0;
    for (NodeId leaf : d.leaves) {
      if (sums_.count(SumKey{leaf, sum.attrs.axes, sum.attrs.keepdims})) continue;
      // A new sum must not make its leaf a value in memory that was not: an argument or a
      // non-pointwise result (in memory anyway: fusion's rule 1), or arithmetic on one array and small
      // constants (batch norm's x - mean), which fusion recomputes where it is read.
      if (++fresh > kMaxNewSums || !(in_memory(leaf) || cheap(leaf))) return std::nullopt;
    }
    if (!read_elsewhere(d, id)) return std::nullopt;
    return d;
  }

 private:
  bool collect(NodeId id, Distribution& d) {
    const Node& n = fn_.node(id);
    if (n.type != full_) return false;
    if (!d.seen.insert(id).second) return true;
    if (d.chain.size() + d.leaves.size() > 4 * kMaxTerms) return false;
    auto full = [&](size_t i) { return fn_.node(n.operands[i]).type == full_; };
    switch (n.op) {
      case Op::Add:
      case Op::Sub:
        if (!full(0) || !full(1)) break;
        if (!collect(n.operands[0], d) || !collect(n.operands[1], d)) return false;
        d.chain.push_back(id);
        return true;
      case Op::Neg:
        if (!collect(n.operands[0], d)) return false;
        d.chain.push_back(id);
        return true;
      case Op::Mul:
        for (size_t i : {1, 0}) {
          if (!full(1 - i)) continue;
          std::optional<NodeId> f = factor_source(fn_, n.operands[i], full_, axes_);
          if (!f || fn_.node(*f).type == full_) continue;
          if (!collect(n.operands[1 - i], d)) return false;
          d.products[id] = {n.operands[1 - i], *f};
          d.chain.push_back(id);
          return true;
        }
        break;
      default:
        break;
    }
    d.leaves.push_back(id);
    return true;
  }

  bool in_memory(NodeId id) const {
    const NodeClass c = classify(fn_.node(id).op);
    return c == NodeClass::Leaf || c == NodeClass::Opaque;
  }

  // Add, sub or mul of one array of the operand's size and small static values (fusion's rule 3,
  // docs/compiler.md).
  bool cheap(NodeId id) const {
    const Node& n = fn_.node(id);
    if (n.op != Op::Add && n.op != Op::Sub && n.op != Op::Mul) return false;
    int arrays = 0;
    for (NodeId o : n.operands) {
      const Node* s = &fn_.node(o);
      if (s->op == Op::BroadcastTo || s->op == Op::Reshape) s = &fn_.node(s->operands[0]);
      if (fn_.node(o).type == full_ && s->type == full_) {
        ++arrays;
        continue;
      }
      if (!small_static(s->type.shape)) return false;
    }
    return arrays == 1;
  }

  // Whether a node of the chain is read outside the chain and the sum: then the operand is in
  // memory (or computed) for that reader anyway, and the sum's own pass over it is what goes.
  bool read_elsewhere(const Distribution& d, NodeId sum) const {
    std::map<NodeId, int> inside;
    auto count = [&](NodeId user) {
      for (NodeId o : fn_.node(user).operands) ++inside[o];
    };
    for (NodeId c : d.chain) count(c);
    count(sum);
    for (NodeId c : d.chain)
      if (uses_[size_t(c)] > inside[c]) return true;
    return false;
  }

  const ir::Function& fn_;
  std::vector<int> uses_;
  std::set<SumKey> sums_;   // the sums the function computes already
  ir::TensorType full_;
  std::vector<int64_t> axes_;
};

// Writes the distributed form of sum node `sum` into `out`: each chain node becomes the same op
// over the sums of its operands (a factor reshaped to the sum's axes), each leaf its own sum.
NodeId emit(ir::Function& out, const ir::Function& fn, const Node& sum, const Distribution& d,
            const std::vector<NodeId>& new_id) {
  std::map<NodeId, NodeId> done;
  auto node = [&](Op op, std::vector<NodeId> operands, ir::TensorType type) {
    Node n;
    n.op = op;
    n.type = std::move(type);
    n.operands = std::move(operands);
    n.loc = sum.loc;
    return out.add(std::move(n));
  };
  for (NodeId leaf : d.leaves) {
    Node s = sum;
    s.operands = {new_id.at(size_t(leaf))};
    s.name.clear();
    done[leaf] = out.add(std::move(s));
  }
  const size_t rank = fn.node(sum.operands[0]).type.rank();
  for (NodeId c : d.chain) {
    const Node& n = fn.node(c);
    if (n.op == Op::Mul) {
      const Distribution::Product& product = d.products.at(c);
      const NodeId f = product.factor;
      const ir::TensorType& ft = fn.node(f).type;
      ir::TensorType shape{ft.dtype, {}};   // the factor on the sum's axes: reduced ones 1 or gone
      const size_t lead = rank - ft.rank();
      for (size_t a = 0; a < rank; ++a) {
        const bool reduced = std::find(sum.attrs.axes.begin(), sum.attrs.axes.end(), int64_t(a)) != sum.attrs.axes.end();
        if (reduced && !sum.attrs.keepdims) continue;
        shape.shape.push_back(a < lead ? ir::Dim::fixed(1) : ft.shape[a - lead]);
      }
      NodeId factor = new_id.at(size_t(f));
      if (ft.rank() > 0 && shape != ft) factor = node(Op::Reshape, {factor}, shape);
      done[c] = node(Op::Mul, {done.at(product.scaled), factor}, sum.type);
    } else if (n.op == Op::Neg) {
      done[c] = node(Op::Neg, {done.at(n.operands[0])}, sum.type);
    } else {
      done[c] = node(n.op, {done.at(n.operands[0]), done.at(n.operands[1])}, sum.type);
    }
  }
  return done.at(sum.operands[0]);
}

}  // namespace

ir::Function distribute_sums(const ir::Function& fn) {
  Planner planner(fn);
  std::vector<NodeId> new_id;
  new_id.reserve(fn.nodes.size());
  return rebuild(fn, [&](ir::Function& out, Node node) -> NodeId {
    const NodeId old = NodeId(new_id.size());
    std::optional<Distribution> d = planner.plan(old);
    const NodeId id = d ? emit(out, fn, fn.node(old), *d, new_id) : out.add(std::move(node));
    new_id.push_back(id);
    return id;
  });
}

}  // namespace synk::compiler
