// The C++ expression builder: the second front door to the Graph IR. It builds exactly the
// ir::Module that the .synk front end (parse + sema) builds for the same program, with the same
// checks and the same messages, through a small API:
//
//   synk::dsl::ModuleBuilder mb;
//   auto w = mb.shared("w", ir::DType::F32, {784, 10}, init::normal(/*seed=*/1, 0.0, 0.05));
//   auto f = mb.function("loss");
//   auto x = f.scatter("x", ir::DType::F32, {"n", 784});
//   auto y = f.scatter("y", ir::DType::I32, {"n"});
//   auto logits = f.let("logits", x.matmul(w));
//   f.out("loss", mean(cross_entropy(logits, y)));
//   f.update(w, w - 0.1 * grad(mean(cross_entropy(logits, y)), w));
//   ir::Module m = mb.build();
//
// An Expr is a typed expression tree: its type is inferred (ir/type_infer.h) as soon as it is
// made, so a mistake throws a UserError at the line that made it. Nodes are written into a
// function only when a statement (let / out / update) uses the Expr, depth first and left to
// right, exactly as sema walks the same expression; an Expr used twice is written once. To get
// the node order of a .synk `let`, write the same `let` with FunctionBuilder::let. Numbers are
// weak literals as in the language (`x * 2` keeps x's dtype). See docs/builder.md.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "ir/ir.h"

namespace synk::dsl {

namespace builder_detail {
struct ExprNode;
struct FunctionState;
struct ModuleState;
class HelperCall;
}  // namespace builder_detail

// Initializers of shared variables, as in the language: zeros, ones, a constant, random
// (reproducible from the seed), or a .npy file.
namespace init {
ir::Initializer zeros();
ir::Initializer ones();
ir::Initializer constant(double value);
ir::Initializer normal(uint64_t seed, double mean = 0.0, double stddev = 1.0);
ir::Initializer uniform(uint64_t seed, double low = 0.0, double high = 1.0);
ir::Initializer load(std::string path);
}  // namespace init

// One dimension of a declared type or a reshape target: a size (`784`, or -1 in reshape) or a
// symbol (`"n"`).
struct DimArg {
  ir::Dim dim;
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  DimArg(T value) : dim(ir::Dim::fixed(int64_t(value))) {}
  DimArg(const char* symbol) : dim(ir::Dim::sym(symbol)) {}
  DimArg(std::string symbol) : dim(ir::Dim::sym(std::move(symbol))) {}
};
using ShapeArg = std::vector<DimArg>;

// The axes of a reduction: omitted (all axes), one axis (`1`, `-1`) or a list (`{0, 2}`).
class Axes {
 public:
  Axes() = default;                                     // all axes
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Axes(T axis) : list_(std::vector<int64_t>{int64_t(axis)}) {}
  Axes(std::initializer_list<int64_t> axes) : list_(std::vector<int64_t>(axes)) {}
  static Axes list(std::vector<int64_t> axes) { Axes a; a.list_ = std::move(axes); return a; }
  const std::optional<std::vector<int64_t>>& get() const { return list_; }

 private:
  std::optional<std::vector<int64_t>> list_;
};

template <class T>
concept Number = std::is_arithmetic_v<std::remove_cvref_t<T>>;

// A typed expression. Made by parameters (FunctionBuilder::scatter ...), shared variables
// (ModuleBuilder::shared), numbers (implicitly: a weak literal) and the operations below.
// Copying an Expr copies a handle to the same tree.
class Expr {
 public:
  Expr() = default;   // empty: using it is a UserError
  Expr(bool value);
  Expr(double value);
  Expr(float value) : Expr(double(value)) {}
  template <Number T>
    requires(!std::same_as<std::remove_cvref_t<T>, bool> && !std::floating_point<std::remove_cvref_t<T>>)
  Expr(T value) : Expr(integer_literal(value)) {}

  bool valid() const { return node_ != nullptr; }
  // The type the value has; for a number, its default type (i32 or i64, f32, bool).
  const ir::TensorType& type() const;
  ir::DType dtype() const { return type().dtype; }
  const ir::Shape& shape() const { return type().shape; }
  size_t rank() const { return type().rank(); }
  bool is_literal() const;           // a plain number (weak: takes the dtype of what it meets)
  bool is_shared() const;            // a shared variable, as made by ModuleBuilder::shared
  std::string str() const;           // "f32[n, 10]", or the number

  // Method forms of the most used operations (the free functions below take the same arguments).
  Expr matmul(const Expr& other) const;
  Expr transpose() const;
  Expr transpose(std::vector<int64_t> perm) const;
  Expr reshape(ShapeArg shape) const;
  Expr flatten() const;
  Expr cast(ir::DType dtype) const;
  Expr sum(Axes axes = {}, bool keepdims = false) const;
  Expr mean(Axes axes = {}, bool keepdims = false) const;
  Expr max(Axes axes = {}, bool keepdims = false) const;
  Expr min(Axes axes = {}, bool keepdims = false) const;
  Expr prod(Axes axes = {}, bool keepdims = false) const;
  Expr argmax(int64_t axis = -1, bool keepdims = false) const;

  const std::shared_ptr<const builder_detail::ExprNode>& node() const { return node_; }
  explicit Expr(std::shared_ptr<const builder_detail::ExprNode> node) : node_(std::move(node)) {}

 private:
  template <class T>
  static Expr integer_literal(T value) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (value > uint64_t(INT64_MAX)) throw UserError("integer literal does not fit in i64");
    }
    return make_int(int64_t(value));
  }
  static Expr make_int(int64_t value);

  std::shared_ptr<const builder_detail::ExprNode> node_;
};

// ---- Operations (every op of the language; numbers are weak literals) ---------------------

Expr neg(const Expr& x);          // the call neg(x); `-x` folds a literal (`-2` stays a literal)
Expr unary_minus(const Expr& x);  // `-x`
Expr abs(const Expr& x);
Expr exp(const Expr& x);
Expr log(const Expr& x);
Expr sqrt(const Expr& x);
Expr tanh(const Expr& x);
Expr sigmoid(const Expr& x);
Expr relu(const Expr& x);
Expr log1p(const Expr& x);
Expr expm1(const Expr& x);
Expr softplus(const Expr& x);     // max(x, 0) + log1p(exp(-|x|)); gradient sigmoid(x)
Expr sin(const Expr& x);
Expr cos(const Expr& x);
Expr floor(const Expr& x);        // floor .. sign: any numeric dtype; gradient 0
Expr ceil(const Expr& x);
Expr round(const Expr& x);        // half to even, like numpy
Expr sign(const Expr& x);         // sign(NaN) = NaN
Expr logical_not(const Expr& x);

Expr add(const Expr& a, const Expr& b);
Expr sub(const Expr& a, const Expr& b);
Expr mul(const Expr& a, const Expr& b);
Expr div(const Expr& a, const Expr& b);
Expr pow(const Expr& a, const Expr& b);
Expr maximum(const Expr& a, const Expr& b);
Expr minimum(const Expr& a, const Expr& b);
Expr equal(const Expr& a, const Expr& b);
Expr not_equal(const Expr& a, const Expr& b);
Expr less(const Expr& a, const Expr& b);
Expr less_equal(const Expr& a, const Expr& b);
Expr greater(const Expr& a, const Expr& b);
Expr greater_equal(const Expr& a, const Expr& b);
Expr logical_and(const Expr& a, const Expr& b);
Expr logical_or(const Expr& a, const Expr& b);
Expr where(const Expr& condition, const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);            // `a % b`: numpy's floor remainder (divisor's sign)
Expr floor_divide(const Expr& a, const Expr& b);   // numpy's a // b
// max(z, 0) - z * y + log1p(exp(-|z|)); gradient sigmoid(z) - y for z, -z for y.
Expr binary_cross_entropy_with_logits(const Expr& logits, const Expr& targets);
Expr clip(const Expr& x, const Expr& lo, const Expr& hi);   // gradient 1 for lo <= x <= hi, else 0

Expr sum(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr mean(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr max(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr min(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr prod(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr argmax(const Expr& x, int64_t axis = -1, bool keepdims = false);
Expr argmin(const Expr& x, int64_t axis = -1, bool keepdims = false);
Expr logsumexp(const Expr& x, Axes axes = {}, bool keepdims = false);
Expr var(const Expr& x, Axes axes = {}, bool keepdims = false, int64_t ddof = 0);
Expr stddev(const Expr& x, Axes axes = {}, bool keepdims = false, int64_t ddof = 0);   // the language's std
Expr norm(const Expr& x, Axes axes = {}, bool keepdims = false);   // L2; gradient x / norm, 0 at norm 0

Expr matmul(const Expr& a, const Expr& b);
Expr transpose(const Expr& x);                              // reverses the axes
Expr transpose(const Expr& x, std::vector<int64_t> perm);
Expr reshape(const Expr& x, ShapeArg shape);                // one -1 allowed; symbols allowed
Expr flatten(const Expr& x);                                // reshape(x, {-1})
Expr flatten(const Expr& x, int64_t axis);                  // axes before `axis` kept, the rest into one
Expr broadcast_to(const Expr& x, ShapeArg shape);
// A dimension symbol as a value, the language's `n` in an expression (docs/language.md,
// "Dimension names as values"): the i64 scalar the symbol is bound to in the call, the sum of a 1
// broadcast over [symbol]. The symbol must be one of the function's (checked when it is built).
Expr dimension(const std::string& symbol);
Expr cast(const Expr& x, ir::DType dtype);
Expr softmax(const Expr& x, int64_t axis = -1);
Expr log_softmax(const Expr& x, int64_t axis = -1);
// Inclusive prefix sum along one axis (numeric, keeps the dtype); reverse sums from the end.
// Gradient: the cumsum of the adjoint in the other direction.
Expr cumsum(const Expr& x, int64_t axis = -1, bool reverse = false);
Expr cross_entropy(const Expr& logits, const Expr& labels);
Expr one_hot(const Expr& labels, int64_t num_classes, ir::DType dtype = ir::DType::F32);
Expr take(const Expr& x, const Expr& indices);
Expr concat(std::vector<Expr> parts, int64_t axis = 0);
Expr slice(const Expr& x, int64_t start, int64_t stop, int64_t axis = 0);
Expr stack(std::vector<Expr> parts, int64_t axis = 0);
Expr expand_dims(const Expr& x, int64_t axis);
Expr squeeze(const Expr& x, std::optional<int64_t> axis = std::nullopt);   // no axis: every static 1
// Gradient of a float scalar loss with respect to shared variables (Exprs from
// ModuleBuilder::shared): one variable gives its shape, several give one flat vector.
Expr grad(const Expr& loss, std::vector<Expr> variables);
inline Expr grad(const Expr& loss, const Expr& variable) { return grad(loss, std::vector<Expr>{variable}); }

// ---- Random numbers (docs/language.md, "Random numbers") ----------------------------------
// Drawn from the function's seed and step (set from C++ or `synkc run --seed`); each draw is
// numbered in the order the function writes it, as the language numbers them. An axis 0 that is
// a scattered row dimension draws at the call's rows, whatever split of them a rank computes.
Expr uniform(ShapeArg shape, double low = 0, double high = 1, ir::DType dtype = ir::DType::F32);
Expr normal(ShapeArg shape, double mean = 0, double std = 1, ir::DType dtype = ir::DType::F32);
Expr bernoulli(ShapeArg shape, double p, ir::DType dtype = ir::DType::F32);   // 1 with probability p
Expr uniform_like(const Expr& x, double low = 0, double high = 1);   // x's shape; x's dtype if floating
Expr normal_like(const Expr& x, double mean = 0, double std = 1);
Expr bernoulli_like(const Expr& x, double p);
// Inverted dropout: in training each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), else 0; otherwise x. The language's `training=` defaults to whether the function
// trains; here it is always written.
Expr dropout(const Expr& x, double p, bool training);

// ---- Convolutional networks (docs/language.md and docs/builder.md, "Convolutional networks") --
// The language's keyword arguments are the fields of an options struct, so a call reads like the
// .synk one: conv2d(x, w, {.stride = 2, .padding = 1}), max_pool2d(x, 2),
// batch_norm(x, g, b, m, v, {.training = true}).

// A size per axis of the plane, height then width: `2` (both) or `{2, 1}`.
struct Pair2d {
  int64_t h = 1, w = 1;
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Pair2d(T both) : h(int64_t(both)), w(int64_t(both)) {}
  Pair2d(int64_t height, int64_t width) : h(height), w(width) {}
};

// conv2d's padding: `1` (every side), `{h, w}`, `{top, bottom, left, right}` or "same" (stride 1:
// the output keeps the input's size, the smaller half of the padding before).
class Padding {
 public:
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Padding(T all) : pads_{int64_t(all), int64_t(all), int64_t(all), int64_t(all)} {}
  Padding(int64_t h, int64_t w) : pads_{h, h, w, w} {}
  Padding(int64_t top, int64_t bottom, int64_t left, int64_t right) : pads_{top, bottom, left, right} {}
  Padding(const char* mode);   // "same"; another word is a UserError
  static Padding same() { return Padding("same"); }
  bool is_same() const { return same_; }
  const std::array<int64_t, 4>& pads() const { return pads_; }   // top, bottom, left, right

 private:
  std::array<int64_t, 4> pads_{};
  bool same_ = false;
};

struct Conv2dOptions {
  Pair2d stride = 1;
  Padding padding = 0;
  Pair2d dilation = 1;
  int64_t groups = 1;     // divides the input's and the output's channels; groups = C: depthwise
};

struct MaxPool2dOptions {
  std::optional<int64_t> stride;   // default: the kernel (a non-square kernel needs it written)
  int64_t padding = 0;             // every side; at most half the kernel
};

struct AvgPool2dOptions {
  std::optional<int64_t> stride;
  int64_t padding = 0;
  bool count_include_pad = true;   // false: divide by the number of real cells
};

struct BatchNormOptions {
  double momentum = 0.1;
  double eps = 1e-5;
  // true: normalise with the batch's statistics and update running_mean and running_var (two
  // different shared variables) in the function the value is written into, as the language does.
  bool training = false;
};

// x [N, C, H, W] (static C, H, W) and w [O, C / groups, kh, kw] of x's dtype; the bias [O] is a
// broadcast add that fuses with what follows.
Expr conv2d(const Expr& x, const Expr& w, const Conv2dOptions& options = {});
Expr conv2d(const Expr& x, const Expr& w, const Expr& bias, const Conv2dOptions& options = {});
Expr max_pool2d(const Expr& x, Pair2d kernel, const MaxPool2dOptions& options = {});
Expr avg_pool2d(const Expr& x, Pair2d kernel, const AvgPool2dOptions& options = {});
Expr global_avg_pool(const Expr& x, bool keepdims = false);   // mean over axes 2 and 3
// x [N, C, H, W] or [N, C]; gamma, beta, running_mean, running_var [C] of x's dtype.
Expr batch_norm(const Expr& x, const Expr& gamma, const Expr& beta, const Expr& running_mean,
                const Expr& running_var, const BatchNormOptions& options = {});

// Operators; at least one side is an Expr (so `2 * 3` stays C++ arithmetic).
template <class T>
concept ExprOrNumber = std::same_as<std::remove_cvref_t<T>, Expr> || Number<T>;
template <class A, class B>
concept ExprOperands = ExprOrNumber<A> && ExprOrNumber<B> &&
                       (std::same_as<std::remove_cvref_t<A>, Expr> || std::same_as<std::remove_cvref_t<B>, Expr>);

template <class A, class B> requires ExprOperands<A, B>
Expr operator+(const A& a, const B& b) { return add(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator-(const A& a, const B& b) { return sub(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator*(const A& a, const B& b) { return mul(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator/(const A& a, const B& b) { return div(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator%(const A& a, const B& b) { return mod(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator==(const A& a, const B& b) { return equal(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator!=(const A& a, const B& b) { return not_equal(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator<(const A& a, const B& b) { return less(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator<=(const A& a, const B& b) { return less_equal(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator>(const A& a, const B& b) { return greater(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator>=(const A& a, const B& b) { return greater_equal(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator&&(const A& a, const B& b) { return logical_and(Expr(a), Expr(b)); }
template <class A, class B> requires ExprOperands<A, B>
Expr operator||(const A& a, const B& b) { return logical_or(Expr(a), Expr(b)); }
inline Expr operator-(const Expr& x) { return unary_minus(x); }
inline Expr operator!(const Expr& x) { return logical_not(x); }

// ---- Functions and modules ----------------------------------------------------------------

// Builds one function of a module. Copies are handles to the same function.
class FunctionBuilder {
 public:
  const std::string& name() const;

  // Parameters, in order. Dimensions are sizes or symbols ("n"); scatter and minibatch
  // parameters need a symbolic row dimension (axis 0).
  Expr scatter(const std::string& name, ir::DType dtype, ShapeArg shape);
  Expr bcast(const std::string& name, ir::DType dtype, ShapeArg shape);
  Expr minibatch(const std::string& name, ir::DType dtype, ShapeArg shape);
  Expr param(ir::Role role, const std::string& name, ir::DType dtype, ShapeArg shape);

  // `let name = value;`: writes the value's nodes into the function now and names its node.
  // Returns the same value (a number stays a weak literal, as in the language).
  Expr let(const std::string& name, const Expr& value);
  // `out name: mode = value;`
  void out(const std::string& name, const Expr& value, ir::ReduceMode mode = ir::ReduceMode::Avg);
  // `update shared: mode = value;` The value must have the shared variable's type exactly.
  void update(const Expr& shared, const Expr& value, ir::ReduceMode mode = ir::ReduceMode::Avg);
  // `minimize loss over variables... using optimizer;` (docs/training.md): this function's
  // training step. Writes grad(loss, variables...) as one flat vector into the optimizer's
  // gradient variable `<optimizer>_grads` (made by the first step that uses the optimizer);
  // jit::compile adds the update function `<optimizer>_update` and the optimizer's state.
  void minimize(const Expr& loss, std::vector<Expr> variables, const std::string& optimizer);

  explicit FunctionBuilder(std::shared_ptr<builder_detail::FunctionState> state) : state_(std::move(state)) {}

 private:
  friend class builder_detail::HelperCall;
  std::shared_ptr<builder_detail::FunctionState> state_;
};

namespace builder_detail {
// One call of a Helper, for as long as its body runs: the body's `let` names are its own, and a
// UserError it throws is rethrown with "in call to helper 'NAME' from ..." added.
class HelperCall {
 public:
  HelperCall(FunctionBuilder& f, const std::string& helper);
  ~HelperCall();
  HelperCall(const HelperCall&) = delete;
  HelperCall& operator=(const HelperCall&) = delete;
  [[noreturn]] void rethrow(const UserError& e) const;

 private:
  std::shared_ptr<FunctionState> f_;
  std::string helper_;
  std::map<std::string, std::string> caller_locals_;
};
}  // namespace builder_detail

// A helper, the builder's `def` (docs/builder.md, "Helpers"): a named C++ callable whose first
// parameter is the FunctionBuilder being written, then its arguments (Exprs, or anything else),
// returning what the helper returns (an Expr, a std::pair or a struct of them, ...). Calling it
// runs the body at once, so its nodes are written where it is called, as sema inlines a .synk
// helper. While the body runs its `let` names are its own (they may repeat those of the caller
// and of other calls); a UserError thrown inside names the helper and its caller.
template <class Body>
class Helper {
 public:
  Helper(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  const std::string& name() const { return name_; }
  template <class... Args>
  decltype(auto) operator()(FunctionBuilder& f, Args&&... args) const {
    builder_detail::HelperCall call(f, name_);
    try {
      return body_(f, std::forward<Args>(args)...);
    } catch (const UserError& e) {
      call.rethrow(e);
    }
  }

 private:
  std::string name_;
  Body body_;
};

class ModuleBuilder {
 public:
  ModuleBuilder();

  // `shared name: dtype[shape] = init [sliceable];` Returns the variable as an Expr, usable in
  // every function of this module (and as the target of FunctionBuilder::update and grad).
  Expr shared(const std::string& name, ir::DType dtype, ShapeArg shape, ir::Initializer init = init::zeros(),
              bool sliceable = false);
  // Starts a function. Functions, shared variables, optimizers and helpers share one namespace.
  FunctionBuilder function(const std::string& name);
  // `def name(...) { ... }`: a Helper calling `body`. The name is checked as the language checks
  // a helper's (unique, not a built-in operation's).
  template <class Body>
  Helper<Body> helper(const std::string& name, Body body) {
    declare_helper(name);
    return Helper<Body>(name, std::move(body));
  }
  // `optimizer name = rule(keyword=value, ...);`: an update rule (sgd, momentum, nesterov,
  // adagrad, rmsprop, adadelta, adam, adamax, adamw) with its hyper-parameters by keyword (lr, momentum,
  // rho, epsilon, beta1, beta2; the others take their defaults), and `num_packs` for the step's
  // all-reduce. Functions train with it through FunctionBuilder::minimize.
  void optimizer(const std::string& name, const std::string& rule,
                 const std::vector<std::pair<std::string, double>>& hyper_parameters = {});

  // The module: shared variables and functions in declaration order. Checks what only the
  // whole function shows (at least one out or update; scattered row dimensions used whole)
  // and then runs ir::verify. Throws UserError on a mistake. May be called again after more
  // statements are added.
  ir::Module build() const;

 private:
  void declare_helper(const std::string& name);
  std::shared_ptr<builder_detail::ModuleState> state_;
};

}  // namespace synk::dsl
