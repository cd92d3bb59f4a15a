// Tests of the C++ builder's convolutional-network and random operations (dsl/builder_dnn.cpp,
// dsl/builder_random.cpp): the Fashion-MNIST CNN of examples/fashion_cnn/cnn.synk written with
// the builder, and programs using every option of every such operation, must build modules
// structurally equal to what the .synk front end builds (same nodes in the same order, the same
// window attributes, updates and random-draw numbers); and the mistakes the language rejects, the
// builder rejects with a UserError naming what was wrong.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "dsl/builder.h"
#include "dsl/builder_testing.h"
#include "dsl/frontend.h"

namespace synk::dsl {
namespace {

using ir::DType;
using ir::ReduceMode;
using synk::testing::expect_user_error;
using testing::examples_dir;
using testing::expect_same_module;
using testing::read_file;

// examples/fashion_cnn/cnn.synk, helper for helper.
ir::Module build_fashion_cnn() {
  ModuleBuilder mb;
  auto c1_w = mb.shared("c1_w", DType::F32, {32, 1, 3, 3}, init::uniform(11, -0.333333333, 0.333333333));
  auto c1_g = mb.shared("c1_g", DType::F32, {32}, init::ones());
  auto c1_b = mb.shared("c1_b", DType::F32, {32});
  auto c1_mean = mb.shared("c1_mean", DType::F32, {32});
  auto c1_var = mb.shared("c1_var", DType::F32, {32}, init::ones());
  auto c2_w = mb.shared("c2_w", DType::F32, {64, 32, 3, 3}, init::uniform(12, -0.0589255651, 0.0589255651));
  auto c2_g = mb.shared("c2_g", DType::F32, {64}, init::ones());
  auto c2_b = mb.shared("c2_b", DType::F32, {64});
  auto c2_mean = mb.shared("c2_mean", DType::F32, {64});
  auto c2_var = mb.shared("c2_var", DType::F32, {64}, init::ones());
  auto d1_w = mb.shared("d1_w", DType::F32, {3136, 128}, init::uniform(13, -0.0178571429, 0.0178571429));
  auto d1_b = mb.shared("d1_b", DType::F32, {128}, init::uniform(14, -0.0178571429, 0.0178571429));
  auto d2_w = mb.shared("d2_w", DType::F32, {128, 10}, init::uniform(15, -0.0883883476, 0.0883883476));
  auto d2_b = mb.shared("d2_b", DType::F32, {10}, init::uniform(16, -0.0883883476, 0.0883883476));
  mb.optimizer("opt", "nesterov", {{"lr", 0.1}, {"momentum", 0.9}});
  auto relu_pool = mb.helper("relu_pool", [](FunctionBuilder&, const Expr& x) { return max_pool2d(relu(x), 2); });
  auto block = mb.helper("block", [&](FunctionBuilder& f, const Expr& x, const Expr& w, const Expr& g, const Expr& b,
                                      const Expr& m, const Expr& v, bool training) {
    return relu_pool(f, batch_norm(conv2d(x, w, {.padding = "same"}), g, b, m, v, {.training = training}));
  });
  auto pixels = mb.helper("pixels", [](FunctionBuilder&, const Expr& images) {
    const ir::Dim& rows = images.shape()[0];
    return reshape(cast(images, DType::F32) / 255, {rows.symbol, 1, 28, 28});
  });
  auto hidden = mb.helper("hidden", [&](FunctionBuilder&, const Expr& features) {
    return relu(features.matmul(d1_w) + d1_b);
  });
  auto logits = mb.helper("logits", [&](FunctionBuilder& f, const Expr& images, bool training) {
    auto h1 = f.let("h1", block(f, pixels(f, images), c1_w, c1_g, c1_b, c1_mean, c1_var, training));
    auto h2 = f.let("h2", block(f, h1, c2_w, c2_g, c2_b, c2_mean, c2_var, training));
    return dropout(hidden(f, flatten(h2, 1)), 0.25, training).matmul(d2_w) + d2_b;
  });
  const std::vector<Expr> trained{c1_w, c1_g, c1_b, c2_w, c2_g, c2_b, d1_w, d1_b, d2_w, d2_b};
  auto step = [&](FunctionBuilder& f, const Expr& images, const Expr& labels) {
    auto losses = f.let("losses", cross_entropy(logits(f, images, true), labels));
    f.out("loss_sum", sum(losses), ReduceMode::Sum);
    f.minimize(mean(losses), trained, "opt");
  };
  auto train_images = mb.shared("train_images", DType::U8, {"m", 784}, init::zeros(), true);
  auto train_labels = mb.shared("train_labels", DType::I64, {"m"}, init::zeros(), true);
  auto train = mb.function("train");
  auto images = train.scatter("images", DType::U8, {"n", 784});
  auto labels = train.scatter("labels", DType::I64, {"n"});
  step(train, images, labels);
  auto device = mb.function("train_device");
  step(device, train_images, train_labels);
  auto evaluate = mb.function("evaluate");
  auto eval_images = evaluate.scatter("images", DType::U8, {"n", 784});
  auto eval_labels = evaluate.scatter("labels", DType::I64, {"n"});
  auto scores = evaluate.let("scores", logits(evaluate, eval_images, false));
  evaluate.out("loss", mean(cross_entropy(scores, eval_labels)));
  evaluate.out("accuracy", mean(cast(argmax(scores, 1) == eval_labels, DType::F32)));
  return mb.build();
}

TEST(BuilderCnn, TheFashionCnnBuildsTheSameModuleAsTheFrontEnd) {
  const std::filesystem::path file = examples_dir() / "fashion_cnn" / "cnn.synk";
  const ir::Module built = build_fashion_cnn();
  const ir::Module parsed = compile_source(file.string(), read_file(file));
  // The training functions update the running statistics, as the file's do.
  const ir::Function* train = built.find_function("train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->updates.size(), 5u);   // 2 x 2 running statistics and the gradient
  expect_same_module(built, parsed);
}

// Every option of every convolutional-network operation.
TEST(BuilderCnn, EveryOptionBuildsWhatTheLanguageBuilds) {
  const std::string text = R"(
shared w: f32[8, 2, 3, 3] = normal(seed=1);
shared wg: f32[8, 1, 3, 1] = normal(seed=2);
shared bias: f32[8];
shared g: f32[8] = ones;
shared b: f32[8];
shared m: f32[8];
shared v: f32[8] = ones;
shared m2: f32[8];
shared v2: f32[8] = ones;
fn f(scatter x: f32[n, 2, 9, 9], bcast z: f32[4, 8]) {
  let a = conv2d(x, w, bias, stride=2, padding=[1, 0, 2, 1], dilation=[1, 2]);
  let c = conv2d(x, w, padding="same", dilation=2);
  let d = conv2d(c, wg, groups=8, padding=[1, 0]);
  let p = max_pool2d(d, [3, 2], stride=2, padding=1);
  let q = avg_pool2d(c, 3, stride=1, padding=1, count_include_pad=false);
  let r = avg_pool2d(c, 2);
  let bn = batch_norm(c, g, b, m, v, momentum=0.3, eps=0.01, training=true);
  let bi = batch_norm(q, g, b, m, v);
  let b2 = batch_norm(z, g, b, m2, v2, training=true);
  out s: avg = mean(flatten(a, axis=1)) + sum(global_avg_pool(p, keepdims=true)) + mean(global_avg_pool(r))
      + mean(bn) + mean(bi) + mean(flatten(b2)) + mean(flatten(bi, axis=-2));
}
)";
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {8, 2, 3, 3}, init::normal(1));
  auto wg = mb.shared("wg", DType::F32, {8, 1, 3, 1}, init::normal(2));
  auto bias = mb.shared("bias", DType::F32, {8});
  auto g = mb.shared("g", DType::F32, {8}, init::ones());
  auto b = mb.shared("b", DType::F32, {8});
  auto m = mb.shared("m", DType::F32, {8});
  auto v = mb.shared("v", DType::F32, {8}, init::ones());
  auto m2 = mb.shared("m2", DType::F32, {8});
  auto v2 = mb.shared("v2", DType::F32, {8}, init::ones());
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 2, 9, 9});
  auto z = f.bcast("z", DType::F32, {4, 8});
  auto a = f.let("a", conv2d(x, w, bias, {.stride = 2, .padding = {1, 0, 2, 1}, .dilation = {1, 2}}));
  auto c = f.let("c", conv2d(x, w, {.padding = Padding::same(), .dilation = 2}));
  auto d = f.let("d", conv2d(c, wg, {.padding = {1, 0}, .groups = 8}));
  auto p = f.let("p", max_pool2d(d, {3, 2}, {.stride = 2, .padding = 1}));
  auto q = f.let("q", avg_pool2d(c, 3, {.stride = 1, .padding = 1, .count_include_pad = false}));
  auto r = f.let("r", avg_pool2d(c, 2));
  auto bn = f.let("bn", batch_norm(c, g, b, m, v, {.momentum = 0.3, .eps = 0.01, .training = true}));
  auto bi = f.let("bi", batch_norm(q, g, b, m, v));
  auto b2 = f.let("b2", batch_norm(z, g, b, m2, v2, {.training = true}));
  f.out("s", mean(flatten(a, 1)) + sum(global_avg_pool(p, true)) + mean(global_avg_pool(r)) + mean(bn) + mean(bi) +
                 mean(flatten(b2)) + mean(flatten(bi, -2)));
  const ir::Module built = mb.build();
  EXPECT_EQ(built.functions.at(0).updates.size(), 4u);
  expect_same_module(built, compile_source("every_option.synk", text));
}

// A batch of static size counts its values at compile time; a helper passes the running
// statistics on, as the language's do.
TEST(BuilderCnn, AStaticBatchAndAHelperBuildWhatTheLanguageBuilds) {
  const std::string text = R"(
shared g: f32[3] = ones;
shared b: f32[3];
shared m: f32[3];
shared v: f32[3] = ones;
def normed(x, mean_of, var_of) { return batch_norm(x, g, b, mean_of, var_of, training=true); }
fn f(bcast x: f32[4, 3, 2, 2]) {
  out y: avg = sum(normed(x, m, v));
}
)";
  ModuleBuilder mb;
  auto g = mb.shared("g", DType::F32, {3}, init::ones());
  auto b = mb.shared("b", DType::F32, {3});
  auto m = mb.shared("m", DType::F32, {3});
  auto v = mb.shared("v", DType::F32, {3}, init::ones());
  auto normed = mb.helper("normed", [&](FunctionBuilder&, const Expr& x, const Expr& mean_of, const Expr& var_of) {
    return batch_norm(x, g, b, mean_of, var_of, {.training = true});
  });
  auto f = mb.function("f");
  auto x = f.bcast("x", DType::F32, {4, 3, 2, 2});
  f.out("y", sum(normed(f, x, m, v)));
  expect_same_module(mb.build(), compile_source("static.synk", text));
}

TEST(BuilderRandom, EveryDrawBuildsWhatTheLanguageBuilds) {
  const std::string text = R"(
fn f(scatter x: f32[n, 3], bcast k: i32[2, 2]) {
  let u = uniform([n, 3], low=-1, high=2);
  let e = normal([2, 3], mean=1, std=0.5, dtype=f64);
  let h = bernoulli([n], 0.3);
  let hb = bernoulli([4], 0.5, dtype=bool);
  let ul = uniform_like(x);
  let nl = normal_like(k);
  let bl = bernoulli_like(x, 0.1);
  let d = dropout(x, 0.25, training=true);
  let d0 = dropout(x, 0.5, training=false);
  let d1 = dropout(x, 1, training=true);
  out s: avg = mean(u + ul + bl + d + d0 + d1 + x) + mean(h) + mean(cast(e, f32)) + sum(nl) + sum(cast(hb, f32));
}
)";
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 3});
  auto k = f.bcast("k", DType::I32, {2, 2});
  auto u = f.let("u", uniform({"n", 3}, -1, 2));
  auto e = f.let("e", normal({2, 3}, 1, 0.5, DType::F64));
  auto h = f.let("h", bernoulli({"n"}, 0.3));
  auto hb = f.let("hb", bernoulli({4}, 0.5, DType::Bool));
  auto ul = f.let("ul", uniform_like(x));
  auto nl = f.let("nl", normal_like(k));
  auto bl = f.let("bl", bernoulli_like(x, 0.1));
  auto d = f.let("d", dropout(x, 0.25, true));
  auto d0 = f.let("d0", dropout(x, 0.5, false));
  auto d1 = f.let("d1", dropout(x, 1, true));
  f.out("s", mean(u + ul + bl + d + d0 + d1 + x) + mean(h) + mean(cast(e, DType::F32)) + sum(nl) +
                 sum(cast(hb, DType::F32)));
  const ir::Module built = mb.build();
  int draws = 0, global = 0;
  for (const ir::Node& n : built.functions.at(0).nodes)
    if (n.op == ir::Op::Random) ++draws, global += n.attrs.global_rows;
  EXPECT_EQ(draws, 9);    // all but d0 (not training)
  EXPECT_EQ(global, 6);   // u, h, ul, bl, d and d1 draw at the call's rows (axis 0 is n)
  expect_same_module(built, compile_source("random.synk", text));
}

TEST(BuilderCnn, MistakesAreUserErrorsNamingWhatWasWrong) {
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {4, 2, 3, 3});
  auto w64 = mb.shared("w64", DType::F64, {4, 2, 3, 3});
  auto g = mb.shared("g", DType::F32, {4}, init::ones());
  auto m = mb.shared("m", DType::F32, {4});
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 2, 8, 8});
  auto flat = f.scatter("flat", DType::F32, {"n", 128});
  auto x4 = f.scatter("x4", DType::F32, {"n", 4, 8, 8});
  expect_user_error([&] { conv2d(flat, w); }, {"conv2d needs its input as [N, C, H, W] (rank 4)"});
  expect_user_error([&] { conv2d(x, w, {.stride = 0}); }, {"conv2d's stride must be at least 1, found 0"});
  expect_user_error([&] { conv2d(x, w, {.padding = -1}); }, {"conv2d's padding must not be negative"});
  expect_user_error([&] { conv2d(x, w, {.padding = "valid"}); }, {"found 'valid'"});
  expect_user_error([&] { conv2d(x, w, {.stride = 2, .padding = "same"}); }, {"needs stride 1"});
  expect_user_error([&] { conv2d(x, w64); }, {"conv2d needs weights of the input's dtype"});
  expect_user_error([&] { conv2d(x, w, m.reshape({2, 2})); }, {"conv2d's bias must be f32[4]"});
  expect_user_error([&] { conv2d(x, w, {.groups = 3}); }, {"conv2d", "groups = 3"});
  expect_user_error([&] { max_pool2d(x, {3, 2}); }, {"non-square kernel needs an explicit stride"});
  expect_user_error([&] { max_pool2d(x, 0); }, {"max_pool2d's kernel must be at least 1"});
  expect_user_error([&] { batch_norm(x4, g, g, m, m, {.training = true}); }, {"'m' is given for both"});
  expect_user_error([&] { batch_norm(x4, g, g, m, m * 2, {.training = true}); }, {"must be a shared variable"});
  expect_user_error([&] { batch_norm(x4, g, g, m, m, {.momentum = 2}); }, {"momentum must be in [0, 1], found 2"});
  expect_user_error([&] { batch_norm(x4, w, g, m, m); }, {"batch_norm's gamma must be f32[4]"});
  expect_user_error([&] { batch_norm(x, g, g, m, m); }, {"batch_norm's gamma must be f32[2]"});
  expect_user_error([&] { flatten(x, 5); }, {"in flatten"});
  expect_user_error([&] { dropout(x, 1.5, true); }, {"dropout's probability must be a number in [0, 1], found 1.5"});
  expect_user_error([&] { uniform({3}, 1, 1); }, {"uniform needs low < high"});
  expect_user_error([&] { normal({3}, 0, 1, DType::I32); }, {"normal draws floating values"});
  // A function may not also update what its batch_norm(training=true) updates.
  auto h = mb.function("h");
  auto hx = h.scatter("x", DType::F32, {"n", 2, 8, 8});
  auto m2 = mb.shared("m2", DType::F32, {2});
  auto v2 = mb.shared("v2", DType::F32, {2}, init::ones());
  auto g2 = mb.shared("g2", DType::F32, {2}, init::ones());
  h.update(m2, m2 * 0.5);
  expect_user_error([&] { h.out("y", mean(batch_norm(hx, g2, g2, m2, v2, {.training = true}))); },
                    {"'m2'"});
}

}  // namespace
}  // namespace synk::dsl
