// The C++ expression builder's internals, shared by builder.cpp (expression trees, writing nodes
// into functions, statements, modules) and builder_ops.cpp (one constructor per operation).
// Not part of the public API.
//
// An Expr points at an immutable, typed ExprNode. Writing a tree into a function ("emitting")
// mirrors sema exactly: an op first evaluates its operands in order (a param read makes its
// Input node on first use, a shared variable its SharedRead once per function, an "immediate"
// literal its Constant right away), then converts the other operands in order (a Cast when a
// node has another dtype, a Constant for a weak literal), then adds its own node.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dsl/builder.h"
#include "dsl/checks.h"

namespace synk::dsl::builder_detail {

using dsl::LiteralKind;

struct Operand {
  std::shared_ptr<const ExprNode> node;
  // sema's `operand()`: a literal becomes a Constant of its default type as soon as it is
  // evaluated. Otherwise (pointwise promotion, where's branches, concat) the conversion to
  // `dtype` happens after every operand has been evaluated.
  bool immediate = false;
  ir::DType dtype = ir::DType::F32;   // the dtype the op receives
};

struct ExprNode {
  enum class Kind : uint8_t { Literal, Param, Shared, Op };
  Kind kind = Kind::Op;
  ir::TensorType type;                // Literal: its default type

  // Literal (weak until it meets a typed value).
  LiteralKind literal = LiteralKind::Int;
  int64_t ivalue = 0;
  double fvalue = 0;
  std::string let_name;               // a literal named by let: one Constant per dtype, cached

  // Param (index into the function's params) / Shared (index into the module's shareds).
  int64_t index = -1;
  std::string name;

  // Op (a Constant op is a literal already given its dtype, e.g. cast(2, f64)).
  ir::Op op = ir::Op::Constant;
  ir::Attrs attrs;
  std::vector<Operand> operands;
  std::vector<std::string> shape_symbols;   // reshape / broadcast_to targets: checked at build

  // Where the tree belongs: the function of its parameters (null when it has none) and the
  // module of its shared variables / function (0 when none).
  std::shared_ptr<FunctionState> function;
  uint64_t module_id = 0;

  // Node ids already written, per function serial (and per dtype for a named literal).
  mutable std::map<std::pair<uint64_t, int>, ir::NodeId> emitted;

  // For an operation sema evaluates as one call with several results (batch_norm, conv2d with a
  // bias): the trees written before this node's operands (sema evaluates every argument first),
  // and those written after the node itself, each optionally the value of an update of a shared
  // variable (batch_norm(training=true)'s running statistics).
  struct After {
    std::shared_ptr<const ExprNode> value;
    int64_t update = -1;   // the shared variable it updates (mode avg), or -1
  };
  std::vector<std::shared_ptr<const ExprNode>> before;
  std::vector<After> after;

  ~ExprNode();
};

struct ModuleState {
  uint64_t id = 0;
  std::vector<ir::SharedVar> shareds;
  std::vector<std::shared_ptr<FunctionState>> functions;
  std::map<std::string, std::string> globals;   // name -> "shared variable" / "function" / "optimizer"
  std::vector<ir::Optimizer> optimizers;         // parameters and gradient set by the first minimize
};

struct OutputInfo {
  std::string name;
  ir::TensorType type;
  ir::ReduceMode mode;
};

struct FunctionState {
  uint64_t serial = 0;
  uint64_t module_id = 0;
  std::weak_ptr<ModuleState> module;
  ir::Function fn;
  std::map<std::string, std::string> locals;        // parameter and let names -> "parameter" / "let"
  std::map<int64_t, ir::NodeId> shared_reads;
  std::vector<int64_t> used_shareds;                 // read or updated, in first-use order
  std::set<std::string> output_names;
  std::set<int64_t> updated;
  std::vector<OutputInfo> outputs;
  std::vector<std::pair<std::string, std::string>> shape_symbols;   // (symbol, op) of reshapes
  std::optional<ir::TrainStep> train_step;           // set by minimize
  std::vector<int64_t> trained;                      // the step's variables
  int64_t next_salt = 0;                             // the next random op's number (attrs.salt)
  std::vector<std::string> helper_stack;             // the helpers being called, outermost first
  std::vector<std::pair<std::string, std::string>> helper_locals;   // their let names, for build()

  std::shared_ptr<ModuleState> lock_module() const;
  void note_shared_use(int64_t index);
};

// ---- Used by the op constructors (builder_ops.cpp), defined in builder.cpp ----------------

const std::shared_ptr<const ExprNode>& require(const Expr& e, const char* op);
Expr make_literal(LiteralKind kind, int64_t ivalue, double fvalue);

// Throws the UserError sema reports when a weak literal cannot take `dtype`.
void check_literal_fits(const ExprNode& literal, ir::DType dtype);

// The dtype a weak literal takes next to a value of dtype `strong` (sema's weak_dtype).
ir::DType weak_dtype(ir::DType strong, LiteralKind kind);

// The dtype sema's common_dtype gives these operands (weak literals follow typed values).
ir::DType common_dtype(const std::vector<const ExprNode*>& operands);

// Makes an op node: checks that the operands come from one function and module, infers the
// type with infer_type (a failure is a UserError naming the op and the operand types) and
// records everything emission needs. `requested` as in infer_type.
Expr make_op(ir::Op op, std::vector<Operand> operands, ir::Attrs attrs,
             const ir::TensorType* requested = nullptr, std::vector<std::string> shape_symbols = {});

// sema's operand(): evaluated, then (a literal) made a Constant of its default dtype at once.
Operand immediate(const std::shared_ptr<const ExprNode>& n);

// A reshape, broadcast_to or draw target: sizes (and -1 when `allow_infer`) and symbols, which
// are noted in `symbols` to be checked against the function's when it is built.
ir::Shape target_shape(const ShapeArg& shape, const char* op, bool allow_infer, std::vector<std::string>& symbols);

// A shape as the builder's argument for it (its sizes and symbols).
ShapeArg shape_arg(const ir::Shape& shape);

// A Constant op of a fixed dtype made from a literal (cast(2, f64)).
Expr make_typed_constant(const ExprNode& literal, ir::DType dtype);

// The operand as the op receives it, for messages: "f32[n, 10]" or "the literal 2".
std::string describe(const ExprNode& node);

// Sets the trees `e`'s node writes before its operands and after itself (ExprNode::before,
// ::after). Only for a node just made, before any other Expr holds it.
Expr with_sequence(Expr e, std::vector<std::shared_ptr<const ExprNode>> before, std::vector<ExprNode::After> after);

}  // namespace synk::dsl::builder_detail
