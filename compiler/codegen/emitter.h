// The C-like kernel emitter both dialects (compiler/cpu, compiler/cuda) specialise: text with
// indentation, C types and literals, index maps, array accesses, the expression DAG of a fused
// kernel, loop-nest collapsing and emission, and the set-up every dialect's concat, reduction,
// argmax, take, one_hot, cumsum and integer matmul kernels start from. Internal to the compiler.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/codegen/poly.h"
#include "compiler/passes/kernel_plan.h"

namespace synk::compiler::emitter {


// Text with indentation.
class Writer {
 public:
  void line(const std::string& text);
  void open(const std::string& text);    // line + "{", indent
  void close(const std::string& suffix = "");   // dedent, "}" + suffix
  const std::string& str() const { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

const char* c_type(ir::DType t);          // storage type: bool is stored as uint8_t
const char* c_value_type(ir::DType t);    // value type in expressions: bool is bool
std::string c_literal(ir::DType t, double value, int64_t ivalue);
std::string c_identity(ir::Op reduction, ir::DType t);            // sum 0, max -inf, ...
std::string c_combine(ir::Op reduction, ir::DType t, const std::string& a, const std::string& b);

// How one node's index relates to the kernel's loop domain: for each of the node's dims, the
// domain dim it follows (-1: always 0) plus a constant offset (from slices).
struct MapDim {
  int kdim = -1;
  int64_t off = 0;
  friend bool operator<(const MapDim& a, const MapDim& b) { return a.kdim != b.kdim ? a.kdim < b.kdim : a.off < b.off; }
  friend bool operator==(const MapDim&, const MapDim&) = default;
};
using IndexMap = std::vector<MapDim>;
IndexMap identity_map(size_t rank);

// One array read or written inside a loop nest: element = offset + sum_k index_k * stride[k].
struct Access {
  int buffer = -1;
  ir::DType dtype = ir::DType::F32;
  std::vector<Poly> stride;   // one per domain dim
  Poly offset;
  bool store = false;
};
// The access to an array of `shape` (contiguous) seen through `map` from a domain of `rank`.
Access make_access(int buffer, const ir::TensorType& type, const IndexMap& map, size_t rank);

struct Value {
  enum class Kind { Load, Const, Op } kind = Kind::Op;
  ir::DType dtype = ir::DType::F32;
  int access = -1;            // Load
  ir::NodeId node = -1;       // Const, Op
  std::vector<int> args;      // Op: operand values
};

// The expression DAG of a fused kernel over one loop domain. value() evaluates an IR node at an
// index map: nodes the kernel computes become ops, everything else a load from its buffer.
class ExprBuilder {
 public:
  ExprBuilder(const KernelPlan& plan, const Kernel& kernel, size_t domain_rank);
  int value(ir::NodeId id, const IndexMap& map);
  int add_access(Access a);
  size_t rank() const { return rank_; }
  const KernelPlan& plan() const { return plan_; }
  std::vector<Access> accesses;
  std::vector<Value> values;

 private:
  bool computed_here(ir::NodeId id) const;
  const KernelPlan& plan_;
  const Kernel& kernel_;
  size_t rank_;
  std::map<std::pair<ir::NodeId, IndexMap>, int> memo_;
};

// A loop nest after merging dimensions: dims that are static 1 are dropped, and neighbours k,
// k+1 of the same class merge when stride[k] == stride[k+1] * size[k+1] for every access.
struct Nest {
  std::vector<Poly> size;
  std::vector<int> cls;
  std::vector<std::vector<Poly>> stride;   // [access][dim]
  std::vector<Poly> offset;                // [access]
};
Nest collapse(const std::vector<Poly>& domain, const std::vector<int>& cls, const std::vector<Access>& accesses);

// Emits the constants of a nest (sizes n<d>, strides st<a>_<d>, offsets off<a>).
void emit_nest_constants(Writer& w, const Nest& nest);
// Opens loops over `outer` dims (in order) and defines a<k>, the base element of each access
// for the current outer indices. Returns the number of blocks opened (close them with close()).
int open_outer_loops(Writer& w, const Nest& nest, const std::vector<int>& outer);
// Only the a<k> definitions of open_outer_loops, for code whose `outer` indices i<d> are already
// defined (a loop body emitted as a lambda over them).
void emit_outer_addresses(Writer& w, const Nest& nest, const std::vector<int>& outer);
// The element address of access k when the inner dim `inner` (or -1) has index `var`.
std::string address(const Nest& nest, int k, int inner, const std::string& var);
// Emits `const T v<i> = ...;` for every value, loads addressed with the inner dim.
void emit_values(Writer& w, const ExprBuilder& eb, const Nest& nest, int inner, const std::string& var,
                 const std::string& prefix = "v");
// The C expression of value i (used by emit_values; exposed for tests of single ops). A float
// select (relu, where) reads `synk_keep`, which every dialect defines as true: the CPU's from a
// volatile, because LLVM 14's InstCombine folds a max-like select of a max-like select with another
// NaN rule as if NaN could not occur (`where(relu(x) > 0, relu(x), 0)` gave NaN for NaN, not 0; found
// by scripts/fuzz-compiler.py --diff); a condition combined with an unknown is no such pattern.
std::string value_expr(const ExprBuilder& eb, const KernelPlan& plan, int i, const std::string& prefix,
                       const std::function<std::string(int access)>& load);

// Domain sizes of a shape.
std::vector<Poly> domain_of(const ir::Shape& shape);

// The node `id` of the plan's function and the buffer that holds it.
inline const ir::Node& node_of(const KernelPlan& plan, ir::NodeId id) { return plan.function.node(id); }
inline int buffer_of(const KernelPlan& plan, ir::NodeId id) { return plan.node_buffer.at(size_t(id)); }

// A concatenation kernel, one operand at a time: `emit_part` gets the expression builder over
// the part's domain, the domain, the part's value and its store into the output at the part's
// offset along the axis; it writes the loop nest (each dialect its own).
using ConcatPartEmitter = std::function<void(ExprBuilder& eb, const std::vector<Poly>& domain, int value, int store)>;
void emit_concat_parts(const KernelPlan& plan, const Kernel& k, const ConcatPartEmitter& emit_part);

// What every dialect's reduction starts from: per input dim whether it is reduced, the nest
// class of each dim (1 reduced, 0 kept) and the number of reduced elements.
struct ReductionDims {
  std::vector<bool> reduced;
  std::vector<int> cls;
  Poly count = Poly::constant(1);
};
ReductionDims reduction_dims(const ir::Node& reduction, const ir::TensorType& input);

// The start every dialect's reduce and argmax kernels share: the root node, its operand's type,
// the reduced dims, the expression builder over the operand's domain holding the operand's value,
// and the result's buffer. An argmax reduces its one axis and puts the dims after it in a class of
// their own (2), so that they never merge with the axis or the dims before it.
struct ReductionKernel {
  ReductionKernel(const KernelPlan& plan, const Kernel& k);
  const ir::Node& node;
  const ir::TensorType& in;
  ReductionDims dims;
  ExprBuilder eb;
  int value;
  int out_buffer;
  // The collapsed nest over the operand's domain, with every access added to `eb` so far.
  Nest nest() const;
};
// An argmax's nest: the dim of its axis (-1 when the axis has static size 1 and collapsed away),
// and the other dims in order.
int argmax_axis_dim(const Nest& nest, std::vector<int>* others);

// The block a take (row gather) kernel opens in every dialect, defining `rows` (of the operand),
// `row` (elements per row) and `n` (rows taken); returns the names of the operand, index and
// result buffers. The caller writes the loop and closes the block.
struct TakeBuffers {
  std::string x, idx, y;
};
TakeBuffers open_take(Writer& w, const KernelPlan& plan, const Kernel& k);

// Likewise for one_hot: defines `n` (labels) and `nk` (classes); returns the label and result
// buffers' names and the result's C storage type.
struct OneHotBuffers {
  std::string lab, y, T;
};
OneHotBuffers open_one_hot(Writer& w, const KernelPlan& plan, const Kernel& k);

// Likewise for cross_entropy: defines `n` (rows) and `nk` (classes); returns the nodes, the
// dtype with its C value type and arithmetic suffix, and the logits, labels and result buffers.
struct CrossEntropyKernel {
  const ir::Node& node;
  const ir::Node& logits;
  const ir::Node& labels;
  ir::DType t;
  std::string T;
  const char* sfx;
  std::string x, lab, y;
};
CrossEntropyKernel open_cross_entropy(Writer& w, const KernelPlan& plan, const Kernel& k);

// Likewise for cumsum: defines `no`, `nl` and `ni` (the elements before, along and after the
// axis); returns the operand and result buffers' names, the C value type and how to add.
struct CumsumKernel {
  std::string x, y, T;
  ir::DType t;
  bool reverse;
};
CumsumKernel open_cumsum(Writer& w, const KernelPlan& plan, const Kernel& k);
// The scan of one line, the same in every dialect: the caller's loops define `o` (< no) and `j`
// (< ni); the line's elements are x[(o * nl + t) * ni + j] for t < nl, visited from the end of
// the axis when reversed, each result stored as soon as it is known.
void emit_cumsum_line(Writer& w, const CumsumKernel& c);

// An integer matrix product's dims, written in the block the caller has opened: A as M x K with
// element (i, p) at i*sam + p*sak; B as K x N with (p, j) at p*sbk + j*sbn (vector operands as
// 1 x K / K x 1 matrices, transposes as strides).
void emit_matmul_dims(Writer& w, const KernelPlan& plan, const Kernel& k);
// The suffix of the prelude's checked arithmetic for a dtype: synk_add_<sfx>, synk_mul_<sfx>.
const char* arith_suffix(ir::DType t);

}  // namespace synk::compiler::emitter
