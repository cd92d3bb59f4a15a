// Unit tests for type/shape inference: promotion, broadcasting with symbols, every op family's
// result type, and the messages for the ways each can fail.
#include "ir/type_infer.h"

#include <gtest/gtest.h>

namespace synk::dsl {
namespace {

using ir::Attrs;
using ir::Dim;
using ir::DType;
using ir::Op;
using ir::Shape;
using ir::TensorType;

Dim S(const char* s) { return Dim::sym(s); }
Dim F(int64_t n) { return Dim::fixed(n); }
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s)}; }

InferResult infer(Op op, std::vector<TensorType> xs, Attrs a = {}, const TensorType* req = nullptr) {
  return infer_type(op, xs, a, req);
}

TEST(Promote, FollowsTheLattice) {
  EXPECT_EQ(promote(DType::Bool, DType::U8), DType::U8);
  EXPECT_EQ(promote(DType::U8, DType::I32), DType::I32);
  EXPECT_EQ(promote(DType::I64, DType::I32), DType::I64);
  EXPECT_EQ(promote(DType::I64, DType::F32), DType::F32);
  EXPECT_EQ(promote(DType::F64, DType::F32), DType::F64);
  EXPECT_EQ(promote(DType::Bool, DType::Bool), DType::Bool);
}

TEST(Broadcast, NumpyRulesWithSymbols) {
  std::string err;
  auto s = broadcast_shapes({S("n"), F(10)}, {F(10)}, &err);
  ASSERT_TRUE(s);
  EXPECT_EQ(ir::shape_str(*s), "[n, 10]");
  s = broadcast_shapes({S("n"), F(1)}, {F(1), F(7)}, &err);
  ASSERT_TRUE(s);
  EXPECT_EQ(ir::shape_str(*s), "[n, 7]");
  s = broadcast_shapes({}, {S("m")}, &err);
  ASSERT_TRUE(s);
  EXPECT_EQ(ir::shape_str(*s), "[m]");
  EXPECT_FALSE(broadcast_shapes({S("n"), F(10)}, {F(3)}, &err));
  EXPECT_EQ(err, "cannot broadcast shapes [n, 10] and [3]");
  // Symbols are rigid: n is neither 10 nor m.
  EXPECT_FALSE(broadcast_shapes({S("n")}, {F(10)}, nullptr));
  EXPECT_FALSE(broadcast_shapes({S("n")}, {S("m")}, nullptr));
}

TEST(Infer, BinaryPointwise) {
  auto r = infer(Op::Add, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {F(10)})});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 10]");
  r = infer(Op::Lt, {T(DType::I32, {S("n")}), T(DType::I32, {})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ir::type_str(*r.type), "bool[n]");
  r = infer(Op::Add, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {F(3)})});
  EXPECT_EQ(r.error, "cannot broadcast shapes [n, 10] and [3] in '+'");
  r = infer(Op::Div, {T(DType::I32, {}), T(DType::I32, {})});
  EXPECT_EQ(r.error, "'/' needs floating operands, found i32; use cast(x, f32)");
  r = infer(Op::And, {T(DType::F32, {}), T(DType::F32, {})});
  EXPECT_EQ(r.error, "'&&' needs bool operands, found f32");
  r = infer(Op::Add, {T(DType::F32, {}), T(DType::F64, {})});
  EXPECT_FALSE(r.ok());
  r = infer(Op::Add, {T(DType::Bool, {}), T(DType::Bool, {})});
  EXPECT_FALSE(r.ok());
}

TEST(Infer, UnaryAndWhere) {
  EXPECT_EQ(infer(Op::Exp, {T(DType::I32, {F(2)})}).error,
            "exp needs a floating operand, found i32; use cast(x, f32)");
  EXPECT_TRUE(infer(Op::Relu, {T(DType::I64, {F(2)})}).ok());
  EXPECT_FALSE(infer(Op::Neg, {T(DType::Bool, {F(2)})}).ok());
  EXPECT_TRUE(infer(Op::Not, {T(DType::Bool, {F(2)})}).ok());
  auto r = infer(Op::Where, {T(DType::Bool, {S("n"), F(1)}), T(DType::F32, {F(4)}), T(DType::F32, {})});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 4]");
  EXPECT_FALSE(infer(Op::Where, {T(DType::I32, {}), T(DType::F32, {}), T(DType::F32, {})}).ok());
}

TEST(Infer, Reductions) {
  Attrs a;
  a.axes = {1};
  auto r = infer(Op::ReduceSum, {T(DType::F32, {S("n"), F(10)})}, a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ir::type_str(*r.type), "f32[n]");
  a.keepdims = true;
  r = infer(Op::ReduceMax, {T(DType::I32, {S("n"), F(10)})}, a);
  EXPECT_EQ(ir::type_str(*r.type), "i32[n, 1]");
  a.keepdims = false;
  r = infer(Op::ArgMax, {T(DType::F32, {S("n"), F(10)})}, a);
  EXPECT_EQ(ir::type_str(*r.type), "i64[n]");
  a.axes = {0, 1};
  r = infer(Op::ReduceMean, {T(DType::F64, {S("n"), F(10)})}, a);
  EXPECT_EQ(ir::type_str(*r.type), "f64[]");
  EXPECT_FALSE(infer(Op::ArgMax, {T(DType::F32, {S("n"), F(10)})}, a).ok());
  EXPECT_FALSE(infer(Op::ReduceMean, {T(DType::I32, {S("n"), F(10)})}, a).ok());
  a.axes = {2};
  EXPECT_EQ(infer(Op::ReduceSum, {T(DType::F32, {S("n"), F(10)})}, a).error,
            "axis 2 is out of range for rank 2 in sum");
  a.axes = {1, 0};
  EXPECT_FALSE(infer(Op::ReduceSum, {T(DType::F32, {S("n"), F(10)})}, a).ok());
}

TEST(Infer, Axes) {
  std::string err;
  EXPECT_EQ(normalize_axis(-1, 3, &err), 2);
  EXPECT_FALSE(normalize_axis(3, 3, &err));
  EXPECT_EQ(err, "axis 3 is out of range for rank 3");
  EXPECT_FALSE(normalize_axis(-4, 3, &err));
  std::vector<int64_t> axes{-1, 0};
  auto n = normalize_axes(axes, 3, &err);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, (std::vector<int64_t>{0, 2}));
  axes = {1, -2};
  EXPECT_FALSE(normalize_axes(axes, 3, &err));
  EXPECT_EQ(err, "axis 1 appears twice");
  EXPECT_EQ(all_axes(3), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Infer, MatMul) {
  auto r = infer(Op::MatMul, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {F(10)})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ir::type_str(*r.type), "f32[n]");
  r = infer(Op::MatMul, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {F(10), F(3)})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 3]");
  r = infer(Op::MatMul, {T(DType::F32, {F(10)}), T(DType::F32, {F(10), F(3)})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[3]");
  r = infer(Op::MatMul, {T(DType::F32, {F(10)}), T(DType::F32, {F(10)})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[]");
  r = infer(Op::MatMul, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {F(9), F(3)})});
  EXPECT_EQ(r.error, "inner dimensions of '@' do not match: [n, 10] and [9, 3] (10 vs 9)");
  EXPECT_FALSE(infer(Op::MatMul, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {S("m")})}).ok());
  EXPECT_FALSE(infer(Op::MatMul, {T(DType::F32, {F(2), F(2), F(2)}), T(DType::F32, {F(2)})}).ok());
}

TEST(Infer, ReshapeWithSymbols) {
  std::string err;
  auto s = resolve_reshape({S("n"), F(10)}, {S("n"), F(2), F(5)}, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(ir::shape_str(*s), "[n, 2, 5]");
  s = resolve_reshape({S("n"), F(10)}, {F(-1), F(5)}, &err);
  EXPECT_FALSE(s);
  EXPECT_EQ(err, "cannot infer -1 in reshape of [n, 10] to [-1, 5]: the size would be 2*n, which is "
                 "not a single dimension");
  s = resolve_reshape({S("n"), F(10)}, {F(10), F(-1)}, &err);
  ASSERT_TRUE(s);
  EXPECT_EQ(ir::shape_str(*s), "[10, n]");
  s = resolve_reshape({F(4), F(6)}, {F(-1)}, &err);
  EXPECT_EQ(ir::shape_str(*s), "[24]");
  EXPECT_FALSE(resolve_reshape({F(4), F(6)}, {F(5), F(5)}, &err));
  EXPECT_EQ(err, "cannot reshape [4, 6] (24 elements) to [5, 5] (25 elements)");
  EXPECT_FALSE(resolve_reshape({S("n")}, {S("m")}, &err));
  EXPECT_FALSE(resolve_reshape({F(4), F(6)}, {F(-1), F(-1)}, &err));
  EXPECT_FALSE(resolve_reshape({F(4), F(6)}, {F(-1), F(5)}, &err));
  // Element counts that overflow int64 are errors, not wrapped numbers.
  EXPECT_FALSE(resolve_reshape({F(int64_t(1) << 40), F(int64_t(1) << 40)}, {F(-1)}, &err));
  EXPECT_NE(err.find("too many elements"), std::string::npos) << err;
  EXPECT_FALSE(infer(Op::Grad, {T(DType::F32, {}), T(DType::F32, {F(int64_t(1) << 62)}),
                                T(DType::F32, {F(int64_t(1) << 62), F(4)})}).ok());
  TensorType req = T(DType::F32, {F(-1)});
  auto r = infer(Op::Reshape, {T(DType::I32, {F(2), F(3)})}, {}, &req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ir::type_str(*r.type), "i32[6]");
}

TEST(Infer, Structure) {
  Attrs a;
  a.perm = {1, 0};
  auto r = infer(Op::Transpose, {T(DType::F32, {S("n"), F(10)})}, a);
  EXPECT_EQ(ir::type_str(*r.type), "f32[10, n]");
  a.perm = {0, 0};
  EXPECT_FALSE(infer(Op::Transpose, {T(DType::F32, {S("n"), F(10)})}, a).ok());

  a = {};
  a.axis = 1;
  r = infer(Op::Concat, {T(DType::F32, {S("n"), F(2)}), T(DType::F32, {S("n"), F(3)})}, a);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 5]");
  a.axis = 0;
  EXPECT_FALSE(infer(Op::Concat, {T(DType::F32, {S("n"), F(2)}), T(DType::F32, {S("n"), F(2)})}, a).ok());
  EXPECT_FALSE(infer(Op::Concat, {T(DType::F32, {F(2)})}, a).ok());

  a = {};
  a.axis = 1;
  a.start = 1;
  a.stop = 4;
  r = infer(Op::Slice, {T(DType::F32, {S("n"), F(10)})}, a);
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 3]");
  a.stop = 11;
  EXPECT_FALSE(infer(Op::Slice, {T(DType::F32, {S("n"), F(10)})}, a).ok());

  r = infer(Op::Take, {T(DType::F32, {S("n"), F(10)}), T(DType::I64, {S("k")})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[k, 10]");
  EXPECT_FALSE(infer(Op::Take, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {S("k")})}).ok());

  a = {};
  a.num_classes = 7;
  TensorType f64 = T(DType::F64, {});
  r = infer(Op::OneHot, {T(DType::I32, {S("n")})}, a, &f64);
  EXPECT_EQ(ir::type_str(*r.type), "f64[n, 7]");

  TensorType target = T(DType::F32, {S("n"), F(4)});
  r = infer(Op::BroadcastTo, {T(DType::F32, {F(1), F(4)})}, {}, &target);
  EXPECT_EQ(ir::type_str(*r.type), "f32[n, 4]");
  EXPECT_FALSE(infer(Op::BroadcastTo, {T(DType::F32, {F(3), F(4)})}, {}, &target).ok());
}

TEST(Infer, CompositesAndGrad) {
  Attrs a;
  a.axis = 1;
  EXPECT_TRUE(infer(Op::Softmax, {T(DType::F32, {S("n"), F(10)})}, a).ok());
  a.axis = 2;
  EXPECT_FALSE(infer(Op::LogSoftmax, {T(DType::F32, {S("n"), F(10)})}, a).ok());
  auto r = infer(Op::CrossEntropy, {T(DType::F32, {S("n"), F(10)}), T(DType::I64, {S("n")})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[n]");
  // cumsum: numeric, keeps its operand's type (an integer cumsum stays integer, like sum).
  Attrs c;
  c.axis = 0;
  r = infer(Op::Cumsum, {T(DType::I32, {S("n"), F(0)})}, c);
  EXPECT_EQ(ir::type_str(*r.type), "i32[n, 0]");
  c.reverse = true;
  c.axis = 1;
  EXPECT_EQ(ir::type_str(*infer(Op::Cumsum, {T(DType::U8, {F(3), F(4)})}, c).type), "u8[3, 4]");
  EXPECT_FALSE(infer(Op::Cumsum, {T(DType::Bool, {F(3), F(4)})}, c).ok());
  EXPECT_FALSE(infer(Op::Cumsum, {T(DType::F32, {F(3)})}, c).ok());   // axis 1 of a vector
  c.axis = 0;
  EXPECT_FALSE(infer(Op::Cumsum, {T(DType::F32, {})}, c).ok());
  EXPECT_FALSE(infer(Op::Cumsum, {T(DType::F32, {F(3)}), T(DType::F32, {F(3)})}, c).ok());
  r = infer(Op::CrossEntropy, {T(DType::F32, {S("n"), F(10)}), T(DType::F32, {S("n"), F(10)})});
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(infer(Op::CrossEntropy, {T(DType::F32, {S("n"), F(10)}), T(DType::I64, {S("m")})}).ok());

  r = infer(Op::Grad, {T(DType::F32, {}), T(DType::F32, {F(3), F(4)})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[3, 4]");
  r = infer(Op::Grad, {T(DType::F32, {}), T(DType::F32, {F(3), F(4)}), T(DType::F64, {F(4)})});
  EXPECT_EQ(ir::type_str(*r.type), "f32[16]");
  EXPECT_FALSE(infer(Op::Grad, {T(DType::F32, {S("n")}), T(DType::F32, {F(3)})}).ok());
  EXPECT_FALSE(infer(Op::Grad, {T(DType::F32, {}), T(DType::I32, {F(3)})}).ok());
  EXPECT_FALSE(infer(Op::Grad, {T(DType::F32, {}), T(DType::F32, {S("n")}), T(DType::F32, {F(3)})}).ok());
}

TEST(Infer, LeavesAndCast) {
  TensorType c = T(DType::I64, {});
  EXPECT_TRUE(infer(Op::Constant, {}, {}, &c).ok());
  TensorType v = T(DType::I64, {F(2)});
  EXPECT_FALSE(infer(Op::Constant, {}, {}, &v).ok());
  EXPECT_FALSE(infer(Op::Input, {}).ok());
  auto r = infer(Op::Cast, {T(DType::F32, {S("n")})}, {}, &c);
  EXPECT_EQ(ir::type_str(*r.type), "i64[n]");
  EXPECT_EQ(infer(Op::Exp, {T(DType::F32, {}), T(DType::F32, {})}).error,
            "exp takes 1 operand but 2 were given");
}

TEST(ElementCount, Strings) {
  EXPECT_EQ(element_count_str(element_count({S("n"), F(10), S("m")})), "10*m*n");
  EXPECT_EQ(element_count_str(element_count({})), "1");
  EXPECT_EQ(element_count_str(element_count({S("n")})), "n");
}

}  // namespace
}  // namespace synk::dsl
