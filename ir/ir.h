// The Graph IR: what every stage after semantic analysis works on. A Module holds shared
// variables and functions; a Function holds a flat list of nodes in topological order (every
// operand id is smaller than the node's own id), each with a fully inferred dtype and shape.
// Shapes may contain symbolic dimensions (`n`, `batch`), bound to sizes at each call. The IR is
// plain data so that passes can copy, rewrite and compare it freely; `verify()` checks every
// invariant listed here, and `print_module()` writes it back as valid `.synk` text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/diagnostics.h"
#include "base/dtype.h"

namespace synk::ir {


// The element types, roles and reduction modes are synk's one vocabulary (base/dtype.h).
using synk::DType;
using synk::dtype_name;
using synk::dtype_from_name;
using synk::dtype_size;
using synk::is_float;
using synk::is_integer;
using synk::is_reserved;

// One dimension: a static size (>= 0) or a symbol bound at call time.
struct Dim {
  int64_t size = 0;     // meaningful when symbol is empty
  std::string symbol;   // non-empty for a symbolic dimension
  static Dim fixed(int64_t n) { return Dim{n, {}}; }
  static Dim sym(std::string s) { return Dim{0, std::move(s)}; }
  bool is_symbolic() const { return !symbol.empty(); }
  friend bool operator==(const Dim&, const Dim&) = default;
};
using Shape = std::vector<Dim>;
std::string shape_str(const Shape& s);              // "[n, 10]", "[]" for a scalar

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  size_t rank() const { return shape.size(); }
  friend bool operator==(const TensorType&, const TensorType&) = default;
};
std::string type_str(const TensorType& t);          // "f32[n, 10]"

enum class Op : uint16_t {
  // Leaves.
  Input,        // attr.index: position in Function::params
  SharedRead,   // attr.index: position in Module::shareds (value at the start of the call)
  Constant,     // scalar: attr.value (floats) / attr.ivalue (integers, bool); type has rank 0
  // Pointwise, one operand. Floor Ceil Round (half to even) Sign take any numeric type, like Neg
  // Abs Relu; Log1p .. Cos need floats. Softplus is the stable max(x,0) + log1p(exp(-|x|)).
  Neg, Abs, Exp, Log, Sqrt, Tanh, Sigmoid, Relu,
  Log1p, Expm1, Softplus, Sin, Cos, Floor, Ceil, Round, Sign,
  Not,
  Cast,         // to type.dtype
  // Pointwise, two operands, numpy broadcasting (operands already have the result dtype,
  // except comparisons, whose operands share a dtype and whose result is Bool).
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Mod, FloorDiv,  // numpy's floor semantics (the remainder has the divisor's sign); integers or floats
  BceWithLogits,  // (z, y): max(z,0) - z*y + log1p(exp(-|z|)); float
  Eq, Ne, Lt, Le, Gt, Ge, And, Or,
  Where,        // operands: cond (Bool), a, b; broadcasting over all three
  // Reductions over attr.axes (sorted, unique, non-negative), attr.keepdims.
  ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
  ArgMax,       // attr.axes holds exactly one axis; result I64
  // Structure.
  MatMul,       // numpy matmul on rank 1 or 2 operands
  Transpose,    // attr.perm
  Reshape,      // result shape is type.shape (symbolic dims allowed)
  BroadcastTo,  // result shape is type.shape; inserted by passes, not by the front end
  Concat,       // attr.axis; two or more operands
  Slice,        // attr.axis, attr.start, attr.stop (static, 0 <= start <= stop <= size)
  Take,         // operands: x, indices (integer, rank 1); rows of x along axis 0
  OneHot,       // operand: integer labels [n]; attr.num_classes; result [n, num_classes], type.dtype
  // Composite ops kept whole so that code generators emit stable, fused forms.
  Softmax,      // attr.axis
  LogSoftmax,   // attr.axis
  Cumsum,       // attr.axis, attr.reverse: inclusive prefix sum along the axis (from its end when
                // reverse), in the operand's dtype (numeric); result of the operand's type
  CrossEntropy, // operands: logits [n, k], labels (integer [n] or float [n, k]); result [n]
  // Convolution and pooling over NCHW tensors (float), PyTorch's semantics, attr.window holding
  // every parameter; the CPU backend runs them as library steps (compiler/dnn). The backward ops
  // are written by the gradient pass (and the IR printer), never by users' programs.
  Conv2d,                 // operands: x [N, C, H, W], w [O, C/groups, kh, kw]; result [N, O, OH, OW]
  Conv2dBackwardData,     // operands: dy [N, O, OH, OW], w; result [N, C, in_h, in_w] (C from w, groups)
  Conv2dBackwardWeights,  // operands: x, dy; result [O, C/groups, kh, kw] (O from dy)
  MaxPool2d,              // operand: x; result [N, C, OH, OW]; ties: first maximal cell; NaN wins
  MaxPool2dBackward,      // operands: x, dy; result x's type (dy to the cell each window chose)
  AvgPool2d,              // operand: x; result [N, C, OH, OW]
  AvgPool2dBackward,      // operand: dy; result [N, C, in_h, in_w]
  // Random numbers (base/philox.h): no operands; a float tensor of type.shape whose element e of
  // row r (axis 0; a rank-0 value is row 0) is the Philox draw at (seed, attrs.salt, step, row, e)
  // with e the flat index within the row; attrs.index: 0 uniform in [0, 1), 1 standard normal.
  // With attrs.global_rows, axis 0 is a scattered row dimension and r is the call's row (the
  // part's first row is added at run time), so every split of the rows draws the same values.
  Random,
  // Differentiation, expanded by the gradient pass (a later stage); until then it is typed:
  // operands: loss (float scalar), then one SharedRead or Input per variable. Result: the gradient with
  // the variable's type when there is one variable, else a flat rank-1 vector of the variables'
  // sizes concatenated in order (row-major), with the loss's dtype.
  Grad,
};
const char* op_name(Op op);   // the .synk spelling where there is one: "add", "exp", "matmul", ...
bool is_pointwise(Op op);
bool is_reduction(Op op);     // ReduceSum..ReduceProd, ArgMax
// The infix operator of a binary op in .synk text ("+", "@", "&&", ...); nullptr for the ops
// that are written as calls.
const char* infix_spelling(Op op);

// The parameters of Conv2d and the pooling ops (and their backward ops). Padding is per side;
// dilation is PyTorch's (1 = dense); in_h/in_w are the forward input's plane, which the backward
// ops producing an input-shaped result need (an output size does not determine it).
struct Window2d {
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t in_h = 0, in_w = 0;
  bool count_include_pad = true;    // AvgPool2d: padding cells count in the divisor
  // Conv2d*: activations (x, dy, the result) are [N, H, W, C] instead of [N, C, H, W]; weights stay
  // OIHW. Only the CPU backend's channels-last pass (compiler/passes/channels_last.cpp) sets it.
  bool channels_last = false;
  friend bool operator==(const Window2d&, const Window2d&) = default;
};
bool is_window_op(Op op);            // Conv2d .. AvgPool2dBackward

struct Attrs {
  int64_t index = -1;
  double value = 0;                 // Constant, floating
  int64_t ivalue = 0;               // Constant, integer/bool
  std::vector<int64_t> axes;        // reductions
  bool keepdims = false;
  std::vector<int64_t> perm;        // Transpose
  int64_t axis = 0;                 // Concat, Slice, Softmax, LogSoftmax, Cumsum
  bool reverse = false;             // Cumsum: sum from the end of the axis (its gradient's form)
  int64_t start = 0, stop = 0;      // Slice
  int64_t num_classes = 0;          // OneHot
  bool of_cross_entropy = false;    // OneHot: cross_entropy's gradient made it (its errors name cross_entropy)
  Window2d window;                  // Conv2d and the pooling ops
  int64_t salt = 0;                 // Random: the stream (the op's index in its function)
  bool global_rows = false;         // Random: axis 0 is the call's scattered rows
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

using NodeId = int32_t;

struct Node {
  Op op = Op::Constant;
  TensorType type;
  std::vector<NodeId> operands;
  Attrs attrs;
  std::string name;   // a hint for printers (the user's `let` name); not semantic
  SourceLoc loc;
};

using synk::Role;
using synk::role_name;

using synk::ReduceMode;
using synk::mode_name;
using synk::mode_from_name;

struct Param {
  std::string name;
  Role role = Role::Scatter;
  TensorType type;
  SourceLoc loc;
};

struct Output {
  std::string name;
  NodeId node = -1;
  ReduceMode mode = ReduceMode::Avg;
  SourceLoc loc;
};

struct Update {
  int64_t shared = -1;              // index into Module::shareds
  NodeId node = -1;                 // the new value; same type as the shared variable
  ReduceMode mode = ReduceMode::Avg; // accumulation across slices (avg sum prod max min)
  SourceLoc loc;
};

struct Function {
  std::string name;
  std::vector<Param> params;
  std::vector<Node> nodes;
  std::vector<Output> outputs;
  std::vector<Update> updates;
  SourceLoc loc;

  NodeId add(Node n) { nodes.push_back(std::move(n)); return NodeId(nodes.size() - 1); }
  const Node& node(NodeId id) const { return nodes.at(size_t(id)); }
};

// How a shared variable gets its first value.
struct InitZeros {};
struct InitOnes {};
struct InitConstant { double value = 0; };
struct InitNormal { uint64_t seed = 0; double mean = 0, stddev = 1; };
struct InitUniform { uint64_t seed = 0; double low = 0, high = 1; };
struct InitLoad { std::string path; };  // .npy, relative to the .synk file's directory
using Initializer = std::variant<InitZeros, InitOnes, InitConstant, InitNormal, InitUniform, InitLoad>;

struct SharedVar {
  std::string name;
  TensorType type;
  Initializer init = InitZeros{};
  bool sliceable = false;
  SourceLoc loc;
};

// `optimizer NAME = RULE(keyword=value, ...);` and what the module's `minimize` statements bound
// it to (docs/training.md). For an optimizer that some function minimizes with, sema adds the
// flat-gradient shared variable `<name>_grads` (every training function using it writes it with
// `update <name>_grads = grad(loss, parameters...)`); compiler::expand_training_steps (a later
// stage) adds the update function `<name>_update` and the optimizer's state.
struct Optimizer {
  std::string name;
  std::string rule;                     // an update rule's name (dsl/sema_optimizer.h), checked
  std::vector<std::pair<std::string, double>> hyper_parameters;   // as written, in order, checked
  std::vector<int64_t> parameters;      // shared indices, in flat-gradient order; empty when unused
  int64_t gradient = -1;                // the flat gradient `<name>_grads`; -1 when unused
  int64_t num_packs = 0;                // the gradient's all_reduce in this many packs; 0: default
  SourceLoc loc;
  std::string update_function() const { return name + "_update"; }
  std::string gradient_variable() const { return name + "_grads"; }
  friend bool operator==(const Optimizer& a, const Optimizer& b) {   // ignores loc
    return a.name == b.name && a.rule == b.rule && a.hyper_parameters == b.hyper_parameters &&
           a.parameters == b.parameters && a.gradient == b.gradient && a.num_packs == b.num_packs;
  }
};

// A training function: one that minimizes a loss with an optimizer. Its update of the optimizer's
// gradient variable is the step's gradient; a step is: call `function`, all_reduce(avg) of the
// gradient variable, call the optimizer's update function.
struct TrainStep {
  std::string function;
  int64_t optimizer = -1;               // index into Module::optimizers
  SourceLoc loc;
  friend bool operator==(const TrainStep& a, const TrainStep& b) {   // ignores loc
    return a.function == b.function && a.optimizer == b.optimizer;
  }
};

struct Module {
  std::vector<SharedVar> shareds;
  std::vector<Function> functions;
  std::vector<Optimizer> optimizers;    // in declaration order
  std::vector<TrainStep> train_steps;   // in function order
  const Function* find_function(std::string_view name) const;
  int64_t find_shared(std::string_view name) const;   // -1 when absent
  const TrainStep* find_train_step(std::string_view function) const;   // null when absent
};

// Structural equality: ops, types, operands, attributes, params, outputs, updates, shareds,
// optimizers and training steps.
// Ignores names of nodes and source locations (what the printer round-trip promises).
bool structurally_equal(const Module& a, const Module& b, std::string* first_difference = nullptr);

// Checks every invariant above; returns the list of violations (empty when valid). Violations
// are internal errors: a well-typed program never produces one.
std::vector<std::string> verify(const Module& m);
// The invariants of one function, whose shared reads and updates refer to m's variables (the
// function need not be one of m's): what a pass over one function checks after it runs.
std::vector<std::string> verify_function(const Module& m, const Function& f);

}  // namespace synk::ir
