// Fusion: decides which values exist in memory and groups every other node into the kernel that
// consumes it. The rules, in order:
//  1. Leaves (inputs, shared reads), every non-pointwise op (reductions, argmax, matmul, softmax,
//     log_softmax, cumsum, cross_entropy, concat, take, one_hot), outputs and updates get a buffer.
//     A reshape is an alias of its operand's buffer, so the operand must be in memory too.
//  2. Operands that a kernel reads as whole arrays get a buffer: matmul operands (except a 2-D
//     transpose of a buffer, which BLAS reads with a transpose flag), softmax, log_softmax, cumsum
//     and cross_entropy operands, take and one_hot operands; and the operands of an axis-0
//     concatenation that is an output or update (a flat gradient), which then is a pure copy.
//  3. A pointwise or view node feeding two or more kernels gets a buffer (computed once) unless
//     it is free to recompute (a constant, views of a buffer: only index arithmetic, or one cheap
//     op over one array of its size and small static broadcasts: is_free).
//  4. Every node with a buffer that is not a leaf or alias roots a kernel, which also computes
//     every bufferless node it consumes: a pointwise DAG becomes one loop nest, a pointwise DAG
//     feeding a reduction is computed inside the reduction's loop (one pass over memory).
//  5. Pointwise kernels of the same shape merge into one multi-output loop when one consumes the
//     other element for element (vertical) or they read a common buffer (horizontal), provided
//     the merge creates no cycle between kernels.
//  5b. With FusionOptions::sibling_column_sums (the CPU plans), independent sums over every axis
//     but a short static last one that read a common buffer become one multi-output reduction.
//  6. Kernels run in dependency order; one that computes a piece of a flat concatenation into an
//     output or update runs as soon as its operands exist (hoist_pieces).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/passes/passes.h"

namespace synk::compiler {
namespace {

using ir::NodeId;
using ir::Op;

using Class = NodeClass;

KernelKind kind_of(Op op) {
  switch (op) {
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin: case Op::ReduceProd:
      return KernelKind::Reduce;
    case Op::ArgMax: return KernelKind::ArgMax;
    case Op::MatMul: return KernelKind::MatMul;
    case Op::Softmax: return KernelKind::Softmax;
    case Op::LogSoftmax: return KernelKind::LogSoftmax;
    case Op::Cumsum: return KernelKind::Cumsum;
    case Op::CrossEntropy: return KernelKind::CrossEntropy;
    case Op::Concat: return KernelKind::Concat;
    case Op::Take: return KernelKind::Take;
    case Op::OneHot: return KernelKind::OneHot;
    case Op::Random: return KernelKind::Random;
    case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights: case Op::MaxPool2d:
    case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward:
      return KernelKind::Dnn;
    default: return KernelKind::Pointwise;
  }
}

bool is_transpose_2d(const ir::Node& n) {
  return n.op == Op::Transpose && n.attrs.perm == std::vector<int64_t>{1, 0};
}

class Fusion {
 public:
  Fusion(const ir::Module& module, const ir::Function& fn, const FusionOptions& options)
      : module_(module), fn_(fn), options_(options), n_(fn.nodes.size()) {}

  KernelPlan run() {
    plan_.function = fn_;
    find_consumers();
    mark_buffers();
    form_kernels();
    compute_reads();
    if (options_.fuse) merge_pointwise_kernels();
    if (options_.fuse && options_.sibling_column_sums) merge_sibling_column_sums();
    order_kernels();
    assign_buffers();
    collect_symbols();
    return std::move(plan_);
  }

 private:
  const ir::Node& node(NodeId id) const { return fn_.nodes.at(size_t(id)); }

  void find_consumers() {
    consumers_.assign(n_, {});
    is_sink_.assign(n_, false);
    for (size_t i = 0; i < n_; ++i)
      for (NodeId o : fn_.nodes[i].operands) consumers_.at(size_t(o)).push_back(NodeId(i));
    for (const ir::Output& o : fn_.outputs) is_sink_.at(size_t(o.node)) = true;
    for (const ir::Update& u : fn_.updates) is_sink_.at(size_t(u.node)) = true;
  }

  // Rules 1-3.
  void mark_buffers() {
    has_buffer_.assign(n_, false);
    for (size_t i = 0; i < n_; ++i) {
      const ir::Node& nd = fn_.nodes[i];
      if (nd.op == Op::Grad)
        throw synk::UserError(fmt::format("{}:{}: grad() in function '{}' must be expanded by the gradient pass "
                                         "before code generation, and that pass is not available yet",
                                         nd.loc.line, nd.loc.col, fn_.name));
      Class c = classify(nd.op);
      if (c == Class::Leaf || c == Class::Opaque || c == Class::Alias || is_sink_[i]) has_buffer_[i] = true;
      if (!options_.fuse && (c == Class::Pointwise || c == Class::View)) has_buffer_[i] = true;
      switch (nd.op) {
        case Op::MatMul:
          for (NodeId o : nd.operands) {
            if (is_transpose_2d(node(o))) has_buffer_[size_t(node(o).operands[0])] = true;
            else has_buffer_[size_t(o)] = true;
          }
          break;
        case Op::Softmax: case Op::LogSoftmax: case Op::Cumsum: case Op::CrossEntropy: case Op::Take:
        case Op::OneHot: case Op::Reshape: case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights:
        case Op::MaxPool2d: case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward:
          for (NodeId o : nd.operands) has_buffer_[size_t(o)] = true;
          break;
        case Op::Concat:
          // Into an output or update along axis 0 (a training step's flat gradient): operands in
          // memory make the concatenation a pure copy, which the CPU backend elides by having
          // each operand's kernel write its piece in place (and the gradient's all-reduce can
          // start on a piece as soon as it is written).
          if (is_sink_[i] && nd.attrs.axis == 0)
            for (NodeId o : nd.operands) has_buffer_[size_t(o)] = true;
          break;
        default:
          break;
      }
    }
    bound_fused_depth();
    // Rule 3 until nothing changes: a new buffer can make views of it free, never the reverse.
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<std::set<NodeId>> sinks(n_);
      for (size_t i = n_; i-- > 0;) {
        std::set<NodeId> s;
        for (NodeId c : consumers_[i]) {
          if (has_buffer_[size_t(c)]) s.insert(c);
          else s.insert(sinks[size_t(c)].begin(), sinks[size_t(c)].end());
        }
        if (!has_buffer_[i] && s.size() > 1 && !is_free(NodeId(i))) {
          has_buffer_[i] = true;
          changed = true;
        }
        sinks[i] = has_buffer_[i] ? std::set<NodeId>{NodeId(i)} : std::move(s);
      }
    }
  }

  // Rule 3b: a chain of bufferless nodes (a long run of lets, each used once) gets a buffer every
  // kMaxFusedDepth levels. The emitters build a kernel's expression recursively, and 20,000 levels
  // overflowed the stack; at this depth a kernel boundary costs nothing measurable.
  static constexpr int kMaxFusedDepth = 256;
  void bound_fused_depth() {
    std::vector<int> depth(n_, 0);
    for (size_t i = 0; i < n_; ++i) {   // operands come before their consumers
      if (has_buffer_[i]) continue;
      int d = 0;
      for (NodeId o : fn_.nodes[i].operands)
        if (!has_buffer_[size_t(o)]) d = std::max(d, depth[size_t(o)]);
      depth[i] = d + 1;
      if (depth[i] >= kMaxFusedDepth) {
        has_buffer_[i] = true;
        depth[i] = 0;
      }
    }
  }

  // Free to recompute in every consumer: a constant, views down to a buffer or a constant, or one
  // cheap arithmetic op that streams no more than one array of its own size (batch norm's x - mean):
  // a consumer reads that array instead of the result, the same bytes, and the result is never
  // written. Recomputing gives the same bits: each node is its own statement in the generated code.
  bool is_free(NodeId id) const {
    const ir::Node& nd = node(id);
    if (nd.op == Op::Constant) return true;
    if (classify(nd.op) == Class::Pointwise) return cheap_to_recompute(nd);
    if (classify(nd.op) != Class::View) return false;
    NodeId src = nd.operands[0];
    return has_buffer_[size_t(src)] || is_free(src);
  }

  bool cheap_to_recompute(const ir::Node& nd) const {
    if (nd.op != Op::Add && nd.op != Op::Sub && nd.op != Op::Mul && nd.op != Op::Neg) return false;
    int streams = 0;
    for (NodeId o : nd.operands) {
      const ir::Node& operand = node(o);
      if (operand.op == Op::Constant) continue;
      if (has_buffer_[size_t(o)] && operand.type.shape == nd.type.shape) {
        ++streams;
        continue;
      }
      // A small static buffer broadcast to the result's shape (per-channel statistics), implicitly
      // or by broadcast_to, stays in cache.
      NodeId small = o;
      if (!has_buffer_[size_t(o)]) {
        if (operand.op != Op::BroadcastTo) return false;
        small = operand.operands[0];
        if (node(small).op == Op::Constant) continue;
        if (!has_buffer_[size_t(small)]) return false;
      }
      if (!small_static(node(small).type.shape)) return false;
    }
    return streams <= 1;
  }

  // Rule 4.
  void form_kernels() {
    for (size_t i = 0; i < n_; ++i) {
      Class c = classify(fn_.nodes[i].op);
      if (!has_buffer_[i] || c == Class::Leaf || c == Class::Alias) continue;
      Kernel k;
      k.kind = kind_of(fn_.nodes[i].op);
      k.roots = {NodeId(i)};
      std::set<NodeId> members;
      std::function<void(NodeId)> visit = [&](NodeId id) {
        if (!members.insert(id).second) return;
        for (NodeId o : node(id).operands) {
          if (has_buffer_[size_t(o)]) continue;
          // MatMul reads a 2-D transpose of a buffer through BLAS flags: the transpose is
          // listed in the kernel but generates no code.
          visit(o);
        }
      };
      visit(NodeId(i));
      k.nodes.assign(members.begin(), members.end());
      kernels_.push_back(std::move(k));
    }
  }

  // Buffers (by node, sorted) that kernel k reads: operands of its nodes that it does not compute.
  std::vector<NodeId> reads(const Kernel& k) const {
    std::vector<char>& member = scratch_;
    member.resize(n_, 0);
    for (NodeId id : k.nodes) member[size_t(id)] = 1;
    for (NodeId r : k.roots) member[size_t(r)] = 2;
    std::vector<NodeId> out;
    for (NodeId id : k.nodes)
      for (NodeId o : node(id).operands)
        if (member[size_t(o)] == 0 || (has_buffer_[size_t(o)] && member[size_t(o)] != 2))
          out.push_back(storage_node(o));
    for (NodeId id : k.nodes) member[size_t(id)] = 0;
    for (NodeId r : k.roots) member[size_t(r)] = 0;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  mutable std::vector<char> scratch_;   // reads()'s marks, all 0 between calls

  // A reshape reads the bytes of its operand: dependencies follow aliases to the real producer.
  NodeId storage_node(NodeId id) const {
    while (node(id).op == Op::Reshape) id = node(id).operands[0];
    return id;
  }

  // The kernel that computes each node it roots (the first, should two list it), by node.
  std::vector<int> producers() const {
    std::vector<int> producer(n_, -1);
    for (size_t k = 0; k < kernels_.size(); ++k)
      for (NodeId r : kernels_[k].roots)
        if (producer[size_t(r)] < 0) producer[size_t(r)] = int(k);
    return producer;
  }

  // reads(kernels_[k]) for every k, kept in step with kernels_ by the merges: each merge changes
  // one kernel's reads, and recomputing every kernel's after each merge made fusion quadratic in
  // the function's size (1.3 s for ResNet-50's training functions, 8 s for 40,000 lets).
  std::vector<std::vector<NodeId>> reads_;
  void compute_reads() {
    reads_.clear();
    for (const Kernel& k : kernels_) reads_.push_back(reads(k));
  }
  // Kernel `into` absorbed kernel `from`, which goes.
  void absorbed(size_t into, size_t from) {
    reads_[into] = reads(kernels_[into]);
    kernels_.erase(kernels_.begin() + long(from));
    reads_.erase(reads_.begin() + long(from));
  }
  bool share_reads(size_t a, size_t b) const {
    const std::vector<NodeId>& ra = reads_[a];
    const std::vector<NodeId>& rb = reads_[b];
    for (auto i = ra.begin(), j = rb.begin(); i != ra.end() && j != rb.end();) {
      if (*i == *j) return true;
      if (*i < *j) ++i;
      else ++j;
    }
    return false;
  }

  std::vector<std::set<int>> kernel_deps() const {
    const std::vector<int> producer = producers();
    std::vector<std::set<int>> deps(kernels_.size());
    for (size_t k = 0; k < kernels_.size(); ++k)
      for (NodeId b : reads_[k]) {
        int p = producer[size_t(b)];
        if (p >= 0 && p != int(k)) deps[k].insert(p);
      }
    return deps;
  }

  // Is there a path from kernel `from` to kernel `to` (to depends on from) of length >= min_len?
  static bool depends(const std::vector<std::set<int>>& deps, int to, int from, int min_len) {
    std::vector<int> stack;
    std::vector<char> seen(deps.size(), 0);
    for (int d : deps[size_t(to)]) if (!(min_len > 1 && d == from)) stack.push_back(d);
    while (!stack.empty()) {
      int k = stack.back();
      stack.pop_back();
      if (k == from) return true;
      if (seen[size_t(k)]) continue;
      seen[size_t(k)] = 1;
      for (int d : deps[size_t(k)]) stack.push_back(d);
    }
    return false;
  }

  // Vertical merge of a into b is only element-for-element when nothing in b between a's
  // value and b's roots changes the index: no views, no broadcasting (every node of b that
  // depends on a has b's shape), and no read of a's value through a reshape's alias (a buffer
  // the merged loop would read before it writes it: `c * reshape(a + 1, [])` lost the term).
  bool elementwise_consumer(const Kernel& a, const Kernel& b) const {
    std::set<NodeId> depends_on_a(a.roots.begin(), a.roots.end());
    for (NodeId id : b.nodes) {
      const ir::Node& nd = node(id);
      bool uses = false;
      for (NodeId o : nd.operands) {
        if (o != storage_node(o) && depends_on_a.count(storage_node(o))) return false;
        uses |= depends_on_a.count(o) > 0;
      }
      if (!uses) continue;
      if (classify(nd.op) == Class::View || nd.type.shape != node(b.roots[0]).type.shape) return false;
      depends_on_a.insert(id);
    }
    return true;
  }

  // `into` also computes what `from` did: the union of their nodes, from's roots after its own.
  static void absorb(Kernel& into, const Kernel& from) {
    std::vector<NodeId> nodes;   // both sorted: from form_kernels, then from here
    nodes.reserve(into.nodes.size() + from.nodes.size());
    std::merge(into.nodes.begin(), into.nodes.end(), from.nodes.begin(), from.nodes.end(), std::back_inserter(nodes));
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    into.nodes = std::move(nodes);
    into.roots.insert(into.roots.end(), from.roots.begin(), from.roots.end());
  }

  // Rule 5.
  void merge_pointwise_kernels() {
    for (bool merged = true; merged;) {
      merged = false;
      const auto deps = kernel_deps();
      // Only pointwise kernels of one shape merge: each kernel's candidates
      // are its group, in index order, so the pairs are tried in the order of a full scan.
      std::vector<int> group(kernels_.size(), -1);
      std::vector<std::vector<size_t>> groups;
      std::vector<char> piece(kernels_.size(), 0);
      for (size_t k = 0; k < kernels_.size(); ++k) {
        if (kernels_[k].kind != KernelKind::Pointwise) continue;
        const int c = shape_class(kernels_[k].roots[0]);
        if (size_t(c) >= groups.size()) groups.resize(size_t(c) + 1);
        groups[size_t(c)].push_back(k);
        group[k] = c;
        piece[k] = is_piece(kernels_[k]);
      }
      for (size_t b = 0; b < kernels_.size() && !merged; ++b) {
        if (group[b] < 0) continue;
        for (size_t a : groups[size_t(group[b])]) {
          if (a == b) continue;
          bool vertical = deps[b].count(int(a)) > 0;
          // A flat concatenation's pieces stay apart, so each can run as early as it may (rule 6);
          // a piece still absorbs the pointwise work that feeds it.
          if (piece[a] || (!vertical && piece[b])) continue;
          bool ok;
          if (vertical) {
            ok = elementwise_consumer(kernels_[a], kernels_[b]) && !depends(deps, int(b), int(a), 2);
          } else {
            if (a > b) continue;   // each unordered pair once
            ok = share_reads(a, b) && !depends(deps, int(b), int(a), 1) && !depends(deps, int(a), int(b), 1);
          }
          if (!ok) continue;
          absorb(kernels_[b], kernels_[a]);
          std::sort(kernels_[b].roots.begin(), kernels_[b].roots.end());
          absorbed(b, a);
          merged = true;
          break;
        }
      }
    }
  }

  // Nodes of equal shapes get equal classes (numbered from 0 as first asked for).
  int shape_class(NodeId id) {
    if (shape_classes_.empty()) shape_classes_.assign(n_, -1);
    int& c = shape_classes_[size_t(id)];
    if (c < 0) c = shape_numbers_.emplace(ir::shape_str(node(id).type.shape), int(shape_numbers_.size())).first->second;
    return c;
  }
  std::vector<int> shape_classes_;
  std::map<std::string, int> shape_numbers_;

  // A sum or mean whose reduced axes are all but the last, which is static, 2 to 256 wide: the
  // form codegen_cpu's reduce kernel computes in rotating partial rows, for several roots at once.
  bool is_column_sum(const Kernel& k) const {
    if (k.kind != KernelKind::Reduce) return false;
    for (NodeId root : k.roots) {
      const ir::Node& r = node(root);
      if (r.op != Op::ReduceSum && r.op != Op::ReduceMean) return false;
      const ir::Shape& in = node(r.operands[0]).type.shape;
      if (in.size() < 2 || r.attrs.axes.size() != in.size() - 1) return false;
      bool rows = false;   // a reduced dim that is not static 1 (those vanish from the loop nest)
      for (size_t d = 0; d + 1 < in.size(); ++d) {
        if (r.attrs.axes[d] != int64_t(d)) return false;
        rows |= in[d].is_symbolic() || in[d].size > 1;
      }
      if (!rows) return false;
      const ir::Dim& columns = in.back();
      if (columns.is_symbolic() || columns.size < 2 || columns.size > kMaxSiblingColumns) return false;
    }
    return true;
  }

  bool same_column_sum(const Kernel& a, const Kernel& b) const {
    const ir::Node& ra = node(a.roots[0]);
    const ir::Node& rb = node(b.roots[0]);
    return node(ra.operands[0]).type.shape == node(rb.operands[0]).type.shape && ra.type.dtype == rb.type.dtype;
  }

  // Rule 5b (FusionOptions::sibling_column_sums): independent column sums of one shape that read
  // a common buffer become one kernel, one pass over that buffer.
  void merge_sibling_column_sums() {
    for (bool merged = true; merged;) {
      merged = false;
      auto deps = kernel_deps();
      for (size_t a = 0; a < kernels_.size() && !merged; ++a) {
        if (!is_column_sum(kernels_[a])) continue;
        for (size_t b = a + 1; b < kernels_.size() && !merged; ++b) {
          if (!is_column_sum(kernels_[b]) || !same_column_sum(kernels_[a], kernels_[b])) continue;
          if (!share_reads(a, b) || depends(deps, int(b), int(a), 1) || depends(deps, int(a), int(b), 1)) continue;
          absorb(kernels_[a], kernels_[b]);
          absorbed(a, b);
          merged = true;
        }
      }
    }
  }

  static constexpr int64_t kMaxSiblingColumns = 256;

  void order_kernels() {
    auto deps = kernel_deps();
    std::vector<int> order, state(kernels_.size(), 0);
    std::function<void(int)> visit = [&](int k) {
      if (state[size_t(k)] == 2) return;
      if (state[size_t(k)] == 1) synk::internal_error("fusion produced a cycle between kernels in " + fn_.name);
      state[size_t(k)] = 1;
      for (int d : deps[size_t(k)]) visit(d);
      state[size_t(k)] = 2;
      order.push_back(k);
    };
    for (size_t k = 0; k < kernels_.size(); ++k) visit(int(k));
    order = hoist_pieces(order, deps);
    for (size_t i = 0; i < order.size(); ++i) {
      Kernel k = kernels_[size_t(order[i])];
      k.name = fmt::format("k{}", i);
      plan_.kernels.push_back(std::move(k));
    }
  }

  // Rule 6: a kernel whose result is a piece of an axis-0 concatenation into an output or update
  // (a parameter's part of a flat gradient) runs as soon as its operands exist, not where its
  // nodes fall in the function: the gradient's all-reduce can start on the piece while the rest of
  // the backward pass runs (docs/training.md, "Overlap"), and its operands die sooner.
  bool is_piece(const Kernel& k) const {
    for (NodeId r : k.roots)
      for (NodeId c : consumers_[size_t(r)])
        if (node(c).op == Op::Concat && is_sink_[size_t(c)] && node(c).attrs.axis == 0) return true;
    return false;
  }

  std::vector<int> hoist_pieces(const std::vector<int>& order, const std::vector<std::set<int>>& deps) const {
    std::vector<char> piece(kernels_.size(), 0);
    for (size_t k = 0; k < kernels_.size(); ++k) piece[k] = is_piece(kernels_[k]);
    std::vector<int> out, waiting;
    std::vector<char> placed(kernels_.size(), 0);
    auto ready = [&](int k) {
      return std::all_of(deps[size_t(k)].begin(), deps[size_t(k)].end(), [&](int d) { return placed[size_t(d)] != 0; });
    };
    auto place_ready_pieces = [&] {
      for (bool again = true; again;) {
        again = false;
        for (int& p : waiting)
          if (p >= 0 && ready(p)) {
            out.push_back(p);
            placed[size_t(p)] = 1;
            p = -1;
            again = true;
          }
      }
    };
    for (int k : order)
      if (piece[size_t(k)]) waiting.push_back(k);
    place_ready_pieces();
    for (int k : order) {
      if (piece[size_t(k)]) continue;
      if (!ready(k)) place_ready_pieces();   // a later kernel reads a piece
      out.push_back(k);
      placed[size_t(k)] = 1;
      place_ready_pieces();
    }
    for (int p : waiting)
      if (p >= 0) synk::internal_error("fusion: a piece of a flat concatenation was never ready in " + fn_.name);
    return out;
  }

  int add_buffer(Buffer::Kind kind, int64_t index, NodeId id) {
    plan_.buffers.push_back(Buffer{kind, index, node(id).type, id});
    return int(plan_.buffers.size() - 1);
  }

  void assign_buffers() {
    plan_.node_buffer.assign(n_, -1);
    std::set<int64_t> shared_set;
    for (const ir::Node& nd : fn_.nodes) if (nd.op == Op::SharedRead) shared_set.insert(nd.attrs.index);
    for (int64_t s : shared_set) plan_.shareds_read.push_back(int32_t(s));
    std::vector<bool> output_claimed(fn_.outputs.size()), update_claimed(fn_.updates.size());
    for (size_t i = 0; i < n_; ++i) {
      if (!has_buffer_[i]) continue;
      const ir::Node& nd = fn_.nodes[i];
      NodeId id = NodeId(i);
      if (nd.op == Op::Input) {
        plan_.node_buffer[i] = add_buffer(Buffer::Kind::Input, nd.attrs.index, id);
      } else if (nd.op == Op::SharedRead) {
        auto pos = std::find(plan_.shareds_read.begin(), plan_.shareds_read.end(), int32_t(nd.attrs.index));
        plan_.node_buffer[i] = add_buffer(Buffer::Kind::Shared, pos - plan_.shareds_read.begin(), id);
      } else if (nd.op == Op::Reshape) {
        plan_.node_buffer[i] = add_buffer(Buffer::Kind::Alias, plan_.node_buffer.at(size_t(nd.operands[0])), id);
      } else {
        int b = -1;
        for (size_t o = 0; o < fn_.outputs.size() && b < 0; ++o)
          if (fn_.outputs[o].node == id && !output_claimed[o]) {
            output_claimed[o] = true;
            b = add_buffer(Buffer::Kind::Output, int64_t(o), id);
          }
        for (size_t u = 0; u < fn_.updates.size() && b < 0; ++u)
          if (fn_.updates[u].node == id && !update_claimed[u]) {
            update_claimed[u] = true;
            b = add_buffer(Buffer::Kind::Update, int64_t(u), id);
          }
        if (b < 0) b = add_buffer(Buffer::Kind::Temp, -1, id);
        plan_.node_buffer[i] = b;
      }
    }
    for (Kernel& k : plan_.kernels) {
      for (NodeId r : k.roots) k.outputs.push_back(plan_.node_buffer.at(size_t(r)));
      std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
      auto note_input = [&](NodeId o) {
        int b = plan_.node_buffer.at(size_t(o));
        if (b >= 0 && std::find(k.inputs.begin(), k.inputs.end(), b) == k.inputs.end()) k.inputs.push_back(b);
      };
      for (NodeId id : k.nodes)
        for (NodeId o : node(id).operands)
          if (!members.count(o) || (has_buffer_[size_t(o)] && !std::count(k.roots.begin(), k.roots.end(), o)))
            note_input(o);
      if (k.kind == KernelKind::MatMul) {
        const ir::Node& mm = node(k.roots[0]);
        auto operand = [&](NodeId o, int& buffer, bool& trans) {
          if (plan_.node_buffer.at(size_t(o)) >= 0) {
            buffer = plan_.node_buffer[size_t(o)];
          } else {
            trans = true;
            buffer = plan_.node_buffer.at(size_t(node(o).operands[0]));
          }
        };
        operand(mm.operands[0], k.matmul_a, k.trans_a);
        operand(mm.operands[1], k.matmul_b, k.trans_b);
        k.inputs = {k.matmul_a, k.matmul_b};
      }
    }
  }

  void collect_symbols() {
    auto note = [&](const ir::Shape& shape) {
      for (const ir::Dim& d : shape)
        if (d.is_symbolic() && plan_.symbol_index(d.symbol) < 0) plan_.symbols.push_back(d.symbol);
    };
    for (const ir::Param& p : fn_.params) note(p.type.shape);
    for (int32_t s : plan_.shareds_read) note(module_.shareds.at(size_t(s)).type.shape);
    for (const ir::Update& u : fn_.updates) note(module_.shareds.at(size_t(u.shared)).type.shape);
    for (const ir::Node& nd : fn_.nodes) note(nd.type.shape);
  }

  const ir::Module& module_;
  const ir::Function& fn_;
  FusionOptions options_;
  size_t n_;
  KernelPlan plan_;
  std::vector<std::vector<NodeId>> consumers_;
  std::vector<bool> is_sink_, has_buffer_;
  std::vector<Kernel> kernels_;
};

}  // namespace

KernelPlan fuse_kernels(const ir::Module& module, const ir::Function& fn, const FusionOptions& options) {
  return Fusion(module, fn, options).run();
}

}  // namespace synk::compiler
