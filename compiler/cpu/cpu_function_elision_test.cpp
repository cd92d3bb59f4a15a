// CpuFunction's copy elision (cpu_function.cpp, find_elisions): a concatenation along axis 0
// into an update whose operands' producers then write straight into it, and a copy of a
// leading-axis slice of a shared variable that its readers read in place. Each case compiles a
// function ONCE and calls it several times on fresh random values (the pointers into the update
// buffer and into the arguments change between calls, and update buffers are handed back dirty
// as the call engine does), comparing every call with the float64 reference evaluator. Cases
// that must NOT be elided (an operand that is an argument, a computed operand, axis 1) are
// checked the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "compiler/cpu/cpu_test_util.h"

namespace synk::compiler {
namespace {

using testing::compare;
using testing::parse;
using testing::random_tensor;
using testing::test_seed;

// Runs `fn` of `source` `calls` times on fresh random arguments, reusing the compiled function
// and its output/update arrays; returns the first mismatch, or "". A misplaced piece shows as
// garbage (the 0x7f fill) or another element's value, far outside the tolerance; the tolerance
// itself covers f32 sums of 33 products of O(1) values (1.6e-5 off the float64 reference for
// seed 15450213164947278988 with the default 1e-5 + 2e-5 relative).
const testing::Tolerance kTolerance{.f32_rel = 1e-4, .f32_abs = 1e-4};

std::string check_repeated_calls(const std::string& source, const std::string& fn_name,
                                 const std::map<std::string, int64_t>& sizes, int calls = 3) {
  ir::Module module = parse(source);
  const ir::Function* fn = module.find_function(fn_name);
  if (!fn) return "no function " + fn_name;
  std::unique_ptr<CpuFunction> compiled = compile_cpu_function(module, fn_name);
  std::vector<rt::Array> outputs(fn->outputs.size()), updates(fn->updates.size());
  std::mt19937_64 rng(test_seed() ^ std::hash<std::string>{}(source));
  for (int call = 0; call < calls; ++call) {
    std::vector<dsl::HostTensor> inputs, shareds;
    for (const ir::Param& p : fn->params) inputs.push_back(random_tensor(p.type, sizes, rng));
    for (const ir::SharedVar& s : module.shareds) shareds.push_back(random_tensor(s.type, sizes, rng));
    dsl::EvalResult want = dsl::evaluate(module, fn_name, inputs, shareds);
    testing::CallArguments args = testing::call_arguments(*compiled, inputs, shareds);
    for (rt::Array& u : updates)   // a reused buffer holds an older value: nothing may read it
      for (std::byte& b : u.bytes) b = std::byte{0x7f};
    compiled->run(args.inputs, args.shareds, outputs, updates);
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::string failure = compare("output " + fn->outputs[o].name, want.outputs.at(o), outputs[o], kTolerance);
      if (!failure.empty()) return fmt::format("call {} (seed {}): {}", call, test_seed(), failure);
    }
    for (size_t u = 0; u < updates.size(); ++u) {
      std::string failure = compare("update " + std::to_string(u), want.updates.at(u), updates[u], kTolerance);
      if (!failure.empty()) return fmt::format("call {} (seed {}): {}", call, test_seed(), failure);
    }
  }
  return "";
}

const char* kShareds = R"(
shared w: f32[6, 5];
shared b: f32[5];
shared big: f32[8, 3];
shared flat: f32[47];
shared wide: f32[6, 10];
shared rep: f32[40];
)";

TEST(CpuFunctionElision, ConcatOfKernelResultsIntoAnUpdate) {
  // Every operand is a temporary written by one kernel (matmul, reduction, pointwise), two of
  // them through reshapes: the concat has nothing left to do.
  std::string source = std::string(kShareds) + R"(
fn pack(scatter x: f32[n, 6]) {
  let h = relu(x @ w + b);
  let gw = transpose(x) @ h;
  let gb = sum(h, axis=0);
  let g3 = slice(big, 2, 6, axis=0) * 2;
  update flat = concat(reshape(gw, [30]), gb, reshape(g3, [12]), axis=0);
  out total: sum = sum(h);
}
)";
  for (int64_t n : {1, 7, 33}) EXPECT_EQ(check_repeated_calls(source, "pack", {{"n", n}}), "") << "n = " << n;
}

TEST(CpuFunctionElision, ConcatWithOperandsThatStayCopies) {
  // An argument read directly, and an operand computed inside the concat kernel: copied.
  std::string source = std::string(kShareds) + R"(
fn mixed(scatter x: f32[n, 6]) {
  let gw = transpose(x) @ (x @ w);
  update flat = concat(reshape(gw, [30]), b, reshape(slice(big, 0, 4, axis=0), [12]), axis=0);
}
fn computed(scatter x: f32[n, 6]) {
  let gw = transpose(x) @ (x @ w);
  update flat = concat(reshape(gw * 3, [30]), b * 2, reshape(slice(big, 4, 8, axis=0), [12]) + 1, axis=0);
}
fn sideways(scatter x: f32[n, 6]) {
  let gw = transpose(x) @ (x @ w);
  update wide = concat(gw, exp(w), axis=1);
}
)";
  for (const char* fn : {"mixed", "computed", "sideways"})
    EXPECT_EQ(check_repeated_calls(source, fn, {{"n", 9}}), "") << fn;
}

TEST(CpuFunctionElision, SliceOfASharedVariableIsReadInPlace) {
  // The update rule's pattern: per-parameter pieces of a flat vector, reshaped; and a slice of
  // rows of a 2-D variable that does not start at row 0.
  std::string source = std::string(kShareds) + R"(
fn step() {
  update w = w - 0.5 * reshape(slice(flat, 0, 30), [6, 5]);
  update b = b - 0.5 * slice(flat, 30, 35);
  out tail: sum = reshape(slice(flat, 35, 47), [4, 3]) * 3;
}
fn rows() {
  let r = reshape(slice(big, 3, 7, axis=0), [12]);
  update flat = concat(r, r * 2, slice(flat, 0, 23), axis=0);
}
)";
  EXPECT_EQ(check_repeated_calls(source, "step", {}), "");
  EXPECT_EQ(check_repeated_calls(source, "rows", {}), "");
}

TEST(CpuFunctionElision, ConcatWithARepeatedOperand) {
  // Two parameters with the same gradient (CSE merges them into one value): the first piece is
  // written in place, the repeat copied by the concatenation's step.
  std::string source = std::string(kShareds) + R"(
fn twice(scatter x: f32[n, 6]) {
  let h = relu(x @ w + b);
  let gb = sum(h, axis=0);
  update rep = concat(reshape(transpose(x) @ h, [30]), gb, gb, axis=0);
}
)";
  for (int64_t n : {1, 9}) EXPECT_EQ(check_repeated_calls(source, "twice", {{"n", n}}), "") << "n = " << n;
}

// Records what a streamed update reports: where it lives, and each piece with its bytes as they
// were when reported (they must be final then).
struct RecordingSink : rt::UpdateSink {
  std::byte* data = nullptr;
  size_t total = 0;
  std::vector<std::pair<size_t, std::vector<std::byte>>> pieces;
  void begin(std::byte* d, size_t bytes) override {
    data = d;
    total = bytes;
  }
  void ready(size_t offset, size_t bytes) override {
    pieces.emplace_back(offset, std::vector<std::byte>(data + offset, data + offset + bytes));
  }
};

TEST(CpuFunctionElision, AStreamedUpdateReportsEveryByteOnceAndFinal) {
  std::string source = std::string(kShareds) + R"(
fn twice(scatter x: f32[n, 6]) {
  let h = relu(x @ w + b);
  let gb = sum(h, axis=0);
  update rep = concat(reshape(transpose(x) @ h, [30]), gb * 2, gb * 2, axis=0);
}
fn decayed(scatter x: f32[n, 6]) {
  let h = relu(x @ w + b);
  update rep = concat(reshape(transpose(x) @ h + w * 0.01, [30]), sum(h, axis=0) + b * 0.01, b * 3, axis=0);
}
)";
  ir::Module module = parse(source);
  std::mt19937_64 rng(test_seed());
  for (const char* name : {"twice", "decayed"}) {
    SCOPED_TRACE(name);
    const ir::Function* fn = module.find_function(name);
    std::unique_ptr<CpuFunction> compiled = compile_cpu_function(module, name);
    RecordingSink sink;
    EXPECT_TRUE(compiled->stream_update(0, &sink));
    std::vector<dsl::HostTensor> inputs, shareds;
    for (const ir::Param& p : fn->params) inputs.push_back(random_tensor(p.type, {{"n", 5}}, rng));
    for (const ir::SharedVar& v : module.shareds) shareds.push_back(random_tensor(v.type, {}, rng));
    testing::CallArguments args = testing::call_arguments(*compiled, inputs, shareds);
    std::vector<rt::Array> outputs(fn->outputs.size()), updates(fn->updates.size());
    compiled->run(args.inputs, args.shareds, outputs, updates);
    ASSERT_EQ(sink.data, updates[0].bytes.data());
    ASSERT_EQ(sink.total, updates[0].bytes.size());
    std::vector<int> seen(sink.total, 0);
    for (const auto& [offset, bytes] : sink.pieces) {
      for (size_t i = 0; i < bytes.size(); ++i) ++seen.at(offset + i);
      EXPECT_EQ(0, std::memcmp(bytes.data(), updates[0].bytes.data() + offset, bytes.size()))
          << "piece at byte " << offset << " changed after it was reported";
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(sink.total)) << "every byte once";
    dsl::EvalResult want = dsl::evaluate(module, name, inputs, shareds);
    EXPECT_EQ(compare("update", want.updates.at(0), updates[0], kTolerance), "");
    compiled->stream_update(-1, nullptr);
  }
}

}  // namespace
}  // namespace synk::compiler
