// Unit tests for the Graph IR helpers: names and predicates, structural equality (and the first
// difference it reports), and the verifier catching hand-broken IR of every kind it checks.
#include "ir/ir.h"

#include <gtest/gtest.h>

namespace synk::ir {
namespace {

Dim S(const char* s) { return Dim::sym(s); }
Dim F(int64_t n) { return Dim::fixed(n); }

// shared s: f32[2] = ones;
// fn f(scatter x: f32[n, 2]) { update s = sum(x * s, axis=0); out m: avg = mean(x); }
Module sample() {
  Module m;
  m.shareds.push_back(SharedVar{"s", TensorType{DType::F32, {F(2)}}, InitOnes{}, false, {}});
  Function f;
  f.name = "f";
  f.params.push_back(Param{"x", Role::Scatter, TensorType{DType::F32, {S("n"), F(2)}}, {}});
  Node x;
  x.op = Op::Input;
  x.attrs.index = 0;
  x.type = f.params[0].type;
  NodeId xi = f.add(x);
  Node s;
  s.op = Op::SharedRead;
  s.attrs.index = 0;
  s.type = m.shareds[0].type;
  NodeId si = f.add(s);
  Node mul;
  mul.op = Op::Mul;
  mul.operands = {xi, si};
  mul.type = x.type;
  NodeId mi = f.add(mul);
  Node sum;
  sum.op = Op::ReduceSum;
  sum.operands = {mi};
  sum.attrs.axes = {0};
  sum.type = TensorType{DType::F32, {F(2)}};
  NodeId sumi = f.add(sum);
  Node mean;
  mean.op = Op::ReduceMean;
  mean.operands = {xi};
  mean.attrs.axes = {0, 1};
  mean.type = TensorType{DType::F32, {}};
  NodeId meani = f.add(mean);
  f.updates.push_back(Update{0, sumi, ReduceMode::Avg, {}});
  f.outputs.push_back(Output{"m", meani, ReduceMode::Avg, {}});
  m.functions.push_back(f);
  return m;
}

TEST(IrNames, RoundTripAndPredicates) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::Bool, DType::F16, DType::BF16})
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_FALSE(dtype_from_name("f31"));
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_TRUE(is_float(DType::BF16));
  EXPECT_FALSE(is_integer(DType::Bool));
  EXPECT_TRUE(is_reserved(DType::F16));
  for (ReduceMode mode : {ReduceMode::Avg, ReduceMode::Sum, ReduceMode::Prod, ReduceMode::Max, ReduceMode::Min,
                          ReduceMode::Gather, ReduceMode::None})
    EXPECT_EQ(mode_from_name(mode_name(mode)), mode);
  EXPECT_FALSE(mode_from_name("mean"));
  EXPECT_STREQ(op_name(Op::MatMul), "matmul");
  EXPECT_STREQ(op_name(Op::ReduceMean), "mean");
  EXPECT_TRUE(is_pointwise(Op::Where));
  EXPECT_TRUE(is_pointwise(Op::Cast));
  EXPECT_FALSE(is_pointwise(Op::MatMul));
  EXPECT_TRUE(is_reduction(Op::ArgMax));
  EXPECT_FALSE(is_reduction(Op::Softmax));
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(type_str(TensorType{DType::I64, {S("n"), F(10)}}), "i64[n, 10]");
  EXPECT_STREQ(role_name(Role::Broadcast), "bcast");
}

TEST(IrModule, Find) {
  Module m = sample();
  EXPECT_EQ(m.find_shared("s"), 0);
  EXPECT_EQ(m.find_shared("t"), -1);
  ASSERT_NE(m.find_function("f"), nullptr);
  EXPECT_EQ(m.find_function("g"), nullptr);
}

TEST(StructurallyEqual, IgnoresNamesAndLocations) {
  Module a = sample();
  Module b = sample();
  b.functions[0].nodes[2].name = "product";
  b.functions[0].nodes[2].loc = SourceLoc{3, 4};
  std::string diff;
  EXPECT_TRUE(structurally_equal(a, b, &diff)) << diff;
}

TEST(StructurallyEqual, ReportsTheFirstDifference) {
  Module a = sample();
  std::string diff;

  // Each change to a copy of the sample, and what the difference must name (nullptr: anything).
  struct Change {
    void (*apply)(Module&);
    const char* named;
  };
  const Change changes[] = {
      {[](Module& b) { b.functions[0].nodes[3].attrs.axes = {1}; }, "node 3"},
      {[](Module& b) { b.functions[0].outputs[0].mode = ReduceMode::Sum; }, "output 0"},
      {[](Module& b) { b.shareds[0].init = InitNormal{1, 0, 0.5}; }, "shared 0"},
      {[](Module& b) { b.shareds[0].sliceable = true; }, nullptr},
      {[](Module& b) { b.functions[0].params[0].role = Role::Broadcast; }, "parameter 0"},
      {[](Module& b) { b.functions[0].updates[0].mode = ReduceMode::Max; }, "update 0"},
      {[](Module& b) { b.functions[0].nodes.pop_back(); }, nullptr},
  };
  for (const Change& change : changes) {
    Module b = sample();
    change.apply(b);
    EXPECT_FALSE(structurally_equal(a, b, &diff));
    if (change.named) {
      EXPECT_NE(diff.find(change.named), std::string::npos) << diff;
    }
  }

  // Constants compare by value, NaN equal to itself.
  Module c = sample();
  Node k;
  k.op = Op::Constant;
  k.type = TensorType{DType::F32, {}};
  k.attrs.value = std::numeric_limits<double>::quiet_NaN();
  c.functions[0].add(k);
  Module d = c;
  EXPECT_TRUE(structurally_equal(c, d, &diff)) << diff;
  d.functions[0].nodes.back().attrs.value = 1.0;
  EXPECT_FALSE(structurally_equal(c, d, &diff));
}

TEST(Verify, AcceptsValidIr) {
  EXPECT_TRUE(verify(sample()).empty());
}

std::string first_violation(const Module& m) {
  auto v = verify(m);
  return v.empty() ? std::string() : v[0];
}

TEST(Verify, CatchesBrokenIr) {
  Module m = sample();
  m.functions[0].nodes[2].operands = {0, 3};  // a later node: not topological
  EXPECT_NE(first_violation(m).find("not an earlier node"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[2].type = TensorType{DType::F64, {S("n"), F(2)}};
  EXPECT_NE(first_violation(m).find("but its operands give"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[3].attrs.axes = {2};
  EXPECT_NE(first_violation(m).find("out of range"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[4].attrs.axes = {1, 0};
  EXPECT_NE(first_violation(m).find("sorted"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[2].operands = {0};
  EXPECT_NE(first_violation(m).find("2 operands"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[0].attrs.index = 3;
  EXPECT_NE(first_violation(m).find("parameter index"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].nodes[1].type = TensorType{DType::F32, {F(3)}};
  EXPECT_FALSE(verify(m).empty());

  m = sample();
  m.functions[0].outputs[0].node = 42;
  EXPECT_NE(first_violation(m).find("does not exist"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].updates[0].node = 2;  // f32[n, 2] for s: f32[2]
  EXPECT_NE(first_violation(m).find("differs from"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].updates[0].shared = 5;
  EXPECT_NE(first_violation(m).find("out of range"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].updates.push_back(m.functions[0].updates[0]);
  EXPECT_NE(first_violation(m).find("updated twice"), std::string::npos) << first_violation(m);

  m = sample();
  m.functions[0].updates[0].mode = ReduceMode::Gather;
  EXPECT_FALSE(verify(m).empty());

  m = sample();
  m.shareds.push_back(m.shareds[0]);
  EXPECT_NE(first_violation(m).find("declared twice"), std::string::npos) << first_violation(m);
}

TEST(Verify, GradOperandsMustBeSharedReadsOrInputs) {
  Module m = sample();
  Function& f = m.functions[0];
  Node g;
  g.op = Op::Grad;
  g.operands = {4, 1};
  g.type = TensorType{DType::F32, {F(2)}};
  f.add(g);
  EXPECT_TRUE(verify(m).empty()) << first_violation(m);
  f.nodes.back().operands = {4, 3};  // a sum, not a variable
  EXPECT_NE(first_violation(m).find("neither a shared variable read nor an input"), std::string::npos)
      << first_violation(m);
  f.nodes.back().operands = {4, 0};  // the input x
  f.nodes.back().type = f.params[0].type;
  EXPECT_TRUE(verify(m).empty()) << first_violation(m);
  f.nodes.back().type = TensorType{DType::F32, {F(2)}};
  f.nodes.back().operands = {4, 1, 1};
  f.nodes.back().type = TensorType{DType::F32, {F(4)}};
  EXPECT_NE(first_violation(m).find("twice"), std::string::npos) << first_violation(m);
}

TEST(Verify, ConstantsAreScalars) {
  Module m = sample();
  Node k;
  k.op = Op::Constant;
  k.type = TensorType{DType::F32, {F(2)}};
  m.functions[0].add(k);
  EXPECT_FALSE(verify(m).empty());
}

}  // namespace
}  // namespace synk::ir
