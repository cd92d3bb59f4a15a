// Internal interface of semantic analysis (sema.cpp: declarations, statements and the module;
// sema_expr.cpp: expressions and built-in operations; sema_helper.cpp: helpers, inlined at each
// call). Not used outside dsl/: the entry point is analyze() in frontend.h.
//
// Expressions evaluate to a Value: an IR node, a weak literal (a number not yet given a dtype:
// `x * 2` keeps x's dtype), or an error. An error Value is silent: whoever finds one in an
// operand returns an error Value too without reporting, so one mistake gives one message.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dsl/ast.h"
#include "dsl/checks.h"
#include "base/diagnostics.h"
#include "ir/ir.h"

namespace synk::dsl::sema {

using dsl::LiteralKind;

struct Value {
  enum class Kind : uint8_t { Error, Node, Literal };
  Kind kind = Kind::Error;
  ir::NodeId node = -1;          // Kind::Node
  ir::TensorType type;           // Node: the node's type; Literal: its default type (a scalar)
  LiteralKind literal = LiteralKind::Int;
  int64_t ivalue = 0;            // Int and Bool literals
  double fvalue = 0;             // Float literals
  std::string let_name;          // a literal bound by `let`: materializations are cached there

  static Value error() { return {}; }
  static Value of_node(ir::NodeId id, ir::TensorType t) {
    Value v;
    v.kind = Kind::Node;
    v.node = id;
    v.type = std::move(t);
    return v;
  }
  bool failed() const { return kind == Kind::Error; }
  bool is_literal() const { return kind == Kind::Literal; }
};

Value int_literal(int64_t v);
Value float_literal(double v);
Value bool_literal(bool v);

// The dtype a weak literal takes next to a value of dtype `strong`.
ir::DType weak_dtype(ir::DType strong, LiteralKind kind);

// Short source-like text of an expression for messages: `x @ w`, `sum(h, axis=1)`.
std::string expr_text(const ast::Expr& e);

// Literals as written (sema_builtins.cpp). The number of an integer or float literal, also `-` one
// (`low=-1`); nullopt for anything else.
std::optional<double> literal_number(const ast::Expr& e);
// A number or bool literal: what a `let` may bind for an operation's literal argument.
bool scalar_literal(const ast::Expr& e);
// What is written only as an operation's literal argument and is no value: a list of literals
// (`[1, -2, [3]]`: axes, stride, padding), a string (`"same"`), a dtype (`f64`).
bool literal_only(const ast::Expr& e);

// Names that sema knows as values without a declaration.
using checks::is_builtin_constant;                 // inf, nan
bool is_builtin_op(std::string_view name);          // exp, sum, grad, ...
bool is_window_builtin(std::string_view name);      // conv2d, max_pool2d, batch_norm, ... (sema_dnn.cpp)

// What a module-level name denotes.
struct Global {
  enum class Kind : uint8_t { Shared, Function, Optimizer, Helper } kind = Kind::Shared;
  int64_t index = -1;
  SourceLoc loc;
};
const char* global_kind_text(Global::Kind kind);   // "a shared variable", "a helper", ...

// A helper (`def`). ok is false after an error in its declaration (its names, its parameter
// types) or when it is part of a recursion: calls to it then stay silent.
struct HelperInfo {
  const ast::HelperDecl* decl = nullptr;
  bool ok = true;
  size_t results = 0;   // how many values its `return` gives back
};

struct ModuleContext {
  DiagnosticEngine& diags;
  std::string base_dir;
  bool syntax_errors = false;           // the parser reported errors: parts of the AST are missing
  ir::Module module;
  std::vector<bool> shared_ok;          // false: its declaration had an error (uses stay silent)
  std::vector<SourceLoc> shared_locs;
  std::map<std::string, Global> globals;
  std::vector<bool> optimizer_ok;       // false: its declaration had an error
  std::vector<SourceLoc> optimizer_bound_at;   // the first minimize that gave it its variables
  std::map<std::string, HelperInfo> helpers;
  // Helpers declared with a built-in operation's name (an error there): their calls stay silent,
  // one mistake, one message, instead of each being checked against the operation's signature.
  std::set<std::string> helpers_named_like_builtins;
  bool check_load_files = true;   // LoadFiles::Checked (frontend.h)
};

// Resolves `f32[n, 10]` as written; reports an unknown or reserved dtype, or a bad size.
std::optional<ir::TensorType> resolve_type_expr(const ast::TypeExpr& t, DiagnosticEngine& diags);

// Declares a module-level name; reports a duplicate (or a built-in constant) and returns false.
bool declare_global(ModuleContext& ctx, const std::string& name, SourceLoc loc, Global g);

// sema_train.cpp: `optimizer` declarations, and the names the training steps add (checked once
// every function is analyzed).
void analyze_optimizer(ModuleContext& ctx, const ast::OptimizerDecl& decl);
void check_training_names(ModuleContext& ctx);

// sema_helper.cpp: declares every helper (names, parameter types, the names of its lets) and
// reports recursion; run after the shared variables and optimizers, before the functions.
void declare_helpers(ModuleContext& ctx, const std::vector<ast::HelperDecl>& helpers);

// Analyzes one function into module.functions (when it has no errors).
class FunctionAnalyzer {
 public:
  FunctionAnalyzer(ModuleContext& context, const ast::FnDecl& decl);
  // Returns false when this function had an error.
  bool run();
  ir::Function take() { return std::move(fn_); }
  // The function's training step, when it minimizes (valid after a successful run()).
  std::optional<ir::TrainStep> train_step() const { return train_step_; }

 private:
  struct Binding {
    enum class Kind : uint8_t { Param, Let } kind = Kind::Let;
    Value value;                        // Let: its value (Error after an error)
    int64_t param_index = -1;           // Param: its Input node is made on first use
    SourceLoc loc;
    std::map<ir::DType, ir::NodeId> materialized;  // a literal let, per dtype used
    // A helper's parameter whose argument is evaluated where the helper first reads it, as if
    // written out there (argument_read); null once evaluated. argument_depth: frames_.size() of
    // the caller, whose scope the argument is evaluated in.
    const ast::Expr* argument = nullptr;
    size_t argument_depth = 0;
    // For literal_argument: a helper parameter's argument as written at the call (kept after
    // evaluation) with frames_.size() of the caller then (source_in_caller); or the literal a
    // `let` binds, written in the let's own scope.
    const ast::Expr* source = nullptr;
    size_t source_depth = 0;
    bool source_in_caller = false;
  };

  // ---- sema.cpp: the function's header and statements.
  void declare_params();
  void collect_symbols();
  void check_scattered_symbols();
  void statement(const ast::Stmt& s);
  void let_statement(const ast::Stmt& s);
  // Names a let's value (its new node, or its literal) and puts it in scope.
  // `literal`: the scalar literal the let binds, if it is one (literal_argument follows it).
  void bind_let(const std::string& name, SourceLoc name_loc, Value v, ir::NodeId first_new, bool name_ok,
                const ast::Expr* literal = nullptr);
  void out_statement(const ast::Stmt& s);
  void update_statement(const ast::Stmt& s);
  // sema_train.cpp: `minimize`, `update <opt>_grads = grad(...) using opt`.
  void minimize_statement(const ast::Stmt& s);
  void training_update(const ast::Stmt& s, int64_t gradient_var, const Value& value);
  std::optional<int64_t> resolve_optimizer(const ast::Stmt& s);
  bool bind_optimizer(const ast::Stmt& s, int64_t optimizer, const checks::FlatGradient& gradient);
  void check_training_conflicts();
  void warn_of_loss(const checks::LossWarning& w, const ast::Expr& loss);
  bool check_local_name(const std::string& name, SourceLoc loc, const char* what);
  void poison_name(const std::string& name, SourceLoc loc);
  std::optional<ir::TensorType> resolve_type(const ast::TypeExpr& t);
  std::optional<ir::ReduceMode> resolve_mode(const ast::Stmt& s, bool for_update);
  void error(SourceLoc loc, std::string message);
  // Inside an inlined helper: one note per call on the way there, innermost first.
  void add_call_notes();

  // ---- sema_helper.cpp: helper calls, inlined where they are made.
  struct HelperFrame {
    const ast::HelperDecl* decl = nullptr;
    SourceLoc call_loc;
    std::map<std::string, ir::Dim> dims;   // the symbols of its parameter types, bound by this call
    std::map<std::string, Binding> caller_scope;   // the caller's names, while the helper runs
  };
  Value argument_read(Binding& b);
  // Every symbol name in `shared reads` of the function, through the helpers it calls.
  void collect_helper_shareds(const ast::Expr& e, SourceLoc outer_call, std::set<std::string>& visited);
  Value call_helper_value(const ast::Expr& e, const HelperInfo& helper);   // one result
  std::vector<Value> call_helper(const ast::Expr& e, const HelperInfo& helper);   // empty after an error
  bool match_helper_arguments(const ast::Expr& e, const ast::HelperDecl& decl, std::vector<const ast::Expr*>& bound);
  bool unify_parameter(const ast::HelperDecl& decl, size_t i, const ast::Expr& arg, Value& value, HelperFrame& frame,
                       std::map<std::string, std::string>& bound_by);
  void let_many_statement(const ast::Stmt& s);
  // A dimension name in a reshape/broadcast_to shape or a let's type, inside a helper.
  std::optional<ir::Dim> helper_dimension(const ast::Expr& item, const char* op);
  // ---- sema_expr.cpp: expressions.
  Value expr(const ast::Expr& e);
  Value name(const ast::Expr& e);
  // A dimension name read as a value: the function's symbol, or in a helper the dimension its
  // parameter types bound; nullopt when `text` names none.
  std::optional<ir::Dim> dimension_named(const std::string& text) const;
  Value dimension_value(const ir::Dim& dim, SourceLoc loc);
  Value unary(const ast::Expr& e);
  Value binary(const ast::Expr& e);
  Value call(const ast::Expr& e);
  Value shared_read(int64_t index, SourceLoc loc);
  Value param_read(Binding& b, const std::string& param_name);

  // Builtins (sema_builtins.cpp).
  Value call_unary(const ast::Expr& e, ir::Op op);
  Value call_binary(const ast::Expr& e, ir::Op op);
  Value call_where(const ast::Expr& e);
  Value call_reduction(const ast::Expr& e, ir::Op op);
  Value call_transpose(const ast::Expr& e);
  Value call_reshape(const ast::Expr& e, bool flatten);
  Value call_broadcast_to(const ast::Expr& e);
  Value call_cast(const ast::Expr& e);
  Value call_softmax(const ast::Expr& e, ir::Op op);
  Value call_cumsum(const ast::Expr& e);
  Value call_cross_entropy(const ast::Expr& e);
  Value call_one_hot(const ast::Expr& e);
  Value call_take(const ast::Expr& e);
  Value call_concat(const ast::Expr& e);
  // concat's and stack's operands (`args`, converted to their common dtype) and `e`'s axis=
  // (default 0); nullopt after an error.
  struct JoinArgs {
    std::vector<Value> xs;
    int64_t axis = 0;
  };
  std::optional<JoinArgs> join_arguments(const ast::Expr& e, const std::vector<ast::ExprPtr>& args);
  Value call_slice(const ast::Expr& e);
  Value call_grad(const ast::Expr& e);
  // Compositions of existing IR ops (sema_composite.cpp).
  struct ReductionArgs {
    Value x;
    std::vector<int64_t> axes;   // normalized
    bool keepdims = false;
  };
  std::optional<ReductionArgs> reduction_arguments(const ast::Expr& e, bool single_axis,
                                                   std::initializer_list<const char*> keywords);
  bool require_float(const ast::Expr& e, const Value& x);
  Value constant(double v, ir::DType dtype, SourceLoc loc);
  Value reduce(ir::Op op, const Value& x, const std::vector<int64_t>& axes, bool keepdims, SourceLoc loc);
  Value drop_kept_axes(const Value& kept, const Value& x, const std::vector<int64_t>& axes, bool keepdims,
                       SourceLoc loc);
  Value insert_axis(const Value& x, int64_t axis, SourceLoc loc);
  Value call_clip(const ast::Expr& e);
  Value call_logsumexp(const ast::Expr& e);
  Value call_argmin(const ast::Expr& e);
  Value call_variance(const ast::Expr& e, bool take_sqrt);
  Value call_norm(const ast::Expr& e);
  Value call_expand_dims(const ast::Expr& e);
  Value call_squeeze(const ast::Expr& e);
  Value call_stack(const ast::Expr& e);
  // Convolutional networks (sema_dnn.cpp, sema_batch_norm.cpp).
  Value call_window_builtin(const ast::Expr& e);
  Value call_conv2d(const ast::Expr& e);
  Value call_pool2d(const ast::Expr& e, ir::Op op);
  Value call_global_avg_pool(const ast::Expr& e);
  Value call_batch_norm(const ast::Expr& e);
  Value call_flatten(const ast::Expr& e);
  Value call_window_backward(const ast::Expr& e, ir::Op op);
  // Random numbers (sema_random.cpp).
  Value call_random(const ast::Expr& e);
  Value call_dropout(const ast::Expr& e);
  Value random_node(const ast::Expr& call, int64_t dist, const ir::TensorType& type);
  std::optional<double> random_parameter(const ast::Expr& call, const char* name, double fallback);
  bool is_training_function() const;
  std::optional<std::array<int64_t, 2>> pair_argument(const ast::Expr& arg, const char* what, int64_t at_least);
  std::optional<std::array<int64_t, 4>> padding_argument(const ast::Expr& arg, const char* op, bool* same);
  std::optional<double> number_argument(const ast::Expr& arg, const char* what);
  bool check_nchw(const Value& x, const ast::Expr& arg, const char* op, const char* role);
  int64_t named_shared(const ast::Expr& arg, const Value& value, const char* what);
  // grad(loss, variables...) for `grad` and `minimize` (`construct` names it in messages). A
  // variable is a shared variable, or also an input where `inputs_allowed` (grad; minimize trains
  // shared variables only).
  Value gradient_of(const char* construct, const Value& loss, const ast::Expr& loss_expr,
                    const std::vector<ast::NameRef>& variables, SourceLoc loc, bool inputs_allowed);

  // Checks positional count and keyword names; reports and returns false when wrong.
  bool check_arguments(const ast::Expr& call, size_t min_positional, size_t max_positional,
                       std::initializer_list<const char*> keywords);
  const ast::Expr* keyword(const ast::Expr& call, const char* name);
  // What an operation's literal argument (axis=, training=, padding=, ...) stands for: `arg`
  // itself, or, when it names a helper's parameter, the argument written at the call, followed
  // through every helper on the way (`def block(x, training) { ... training=training ... }`).
  const ast::Expr& literal_argument(const ast::Expr& arg) const;
  std::optional<int64_t> int_argument(const ast::Expr& arg, const char* what);
  std::optional<std::vector<int64_t>> int_list_argument(const ast::Expr& arg, const char* what,
                                                        bool allow_scalar);
  std::optional<bool> bool_argument(const ast::Expr& arg, const char* what);
  std::optional<ir::DType> dtype_argument(const ast::Expr& arg);
  std::optional<ir::Shape> shape_argument(const ast::Expr& arg, const char* op, bool allow_infer);

  // Applies an op through infer_type, reporting its message at `loc` on failure.
  Value apply(ir::Op op, std::vector<Value> operands, const ir::Attrs& attrs, SourceLoc loc,
              const ir::TensorType* requested = nullptr);
  // Makes a node of dtype `dtype` from a value: materializes a literal (checking that it fits)
  // or inserts a Cast. nullopt after reporting that the literal does not fit.
  std::optional<Value> convert(const Value& v, ir::DType dtype, SourceLoc loc);
  // Brings operands to one dtype (weak literals follow strong values).
  std::optional<ir::DType> common_dtype(const std::vector<Value>& operands);
  // Promotes every operand to one dtype, then applies `op`.
  Value pointwise(ir::Op op, std::vector<Value> operands, SourceLoc loc);
  // The value of call argument `arg` as a node (literals take their default dtype).
  Value operand(const ast::Expr& arg);
  Value materialize_default(const Value& v, SourceLoc loc);
  ir::NodeId add_node(ir::Op op, std::vector<ir::NodeId> operands, ir::Attrs attrs,
                      ir::TensorType type, SourceLoc loc);

  ModuleContext& ctx_;
  const ast::FnDecl& decl_;
  ir::Function fn_;
  std::map<std::string, Binding> scope_;
  std::map<int64_t, ir::NodeId> shared_reads_;
  std::map<std::string, Value> dimension_values_;    // symbol -> its value, read once per function
  std::set<std::string> symbols_;                 // dimension symbols bound in this function
  checks::ScatteredRows scattered_;               // row symbol -> what scatters it
  std::map<std::string, SourceLoc> outputs_seen_;
  std::map<int64_t, SourceLoc> updates_seen_;
  // A batch_norm update made inside a helper: the function's call that led there, which a second
  // update of the same variable names (the helper's own position is the same for both calls).
  std::map<int64_t, std::string> update_call_sites_;
  std::map<int64_t, SourceLoc> used_shareds_;     // first use of each shared variable
  std::optional<SourceLoc> step_at_;             // the first minimize / update ... using
  std::optional<ir::TrainStep> train_step_;      // set by minimize / update ... using
  std::vector<int64_t> trained_;                  // the step's variables
  std::vector<HelperFrame> frames_;               // the helper calls being inlined, outermost first
  size_t helper_calls_ = 0;                       // inlined so far in this function
  size_t argument_nesting_ = 0;                   // argument_read calls in progress
  bool argument_too_deep_ = false;                // reported once per function
  int64_t next_salt_ = 0;                         // the next random op's salt
  size_t errors_at_start_ = 0;
  bool had_error_ = false;
};

}  // namespace synk::dsl::sema
