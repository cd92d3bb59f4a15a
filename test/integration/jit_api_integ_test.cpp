// The public JIT API (synk/jit.h) end to end: modules from a file, a string and the C++
// builder; functions compiled and registered before and after synk::fork() (after it, workers
// rebuild them through the "jit" loader); shared variables by name on every rank; load() paths
// made absolute; and every usage and program error, each followed by a call that works.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/testing.h"
#include "compiler/backend/host_arrays.h"
#include "compiler/backend/signature.h"
#include "synk/jit.h"
#include "runtime/data/npy.h"

using namespace synk;
namespace fs = std::filesystem;

namespace {

using synk::testing::error_of;

const char* kIntro = R"(
fn f(scatter x: f32[n, 10], bcast y: f32[10]) {
  out z: avg = mean(x @ y, axis=0);
}
)";

std::string examples_dir() { return SYNK_SOURCE_DIR "/examples"; }

struct IntroData {
  std::vector<float> xs, ys;
  int64_t rows = 0;
  double mean(int64_t begin, int64_t end) const {
    double total = 0;
    for (int64_t i = begin; i < end; ++i)
      for (int k = 0; k < 10; ++k) total += double(xs[size_t(i * 10 + k)]) * ys[size_t(k)];
    return total / double(end - begin);
  }
};

IntroData random_intro(int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  IntroData d;
  d.rows = rows;
  d.xs.resize(size_t(rows * 10));
  d.ys.resize(10);
  for (float& v : d.xs) v = normal(rng);
  for (float& v : d.ys) v = normal(rng);
  return d;
}

float call_intro(Function f, const IntroData& d, const CallOptions& options = {}) {
  Data x = data<float>(d.xs, {d.rows, 10}, {.name = "x"});
  Data y = data<float>(d.ys, {10}, {.name = "y"});
  Outputs r = f({x, y}, options);
  return to_vector<float>(r.get("z")).at(0);
}

class JitApi : public ::testing::Test {
 protected:
  void TearDown() override { synk::close(); }
};

TEST_F(JitApi, LoadFileBeforeForkRunsOnTwoRanks) {
  jit::Module mod = jit::load_file(examples_dir() + "/intro.synk");
  Function f = mod.function("f");
  synk::fork(2);
  IntroData d = random_intro(37, 1);
  EXPECT_NEAR(call_intro(f, d), d.mean(0, 37), 1e-4);
  EXPECT_NEAR(call_intro(f, d, {.batch = Range{5, 20}}), d.mean(5, 20), 1e-4);
}

TEST_F(JitApi, FunctionCreatedAfterForkIsRebuiltInEveryWorker) {
  synk::fork(3);
  jit::Module mod = jit::compile_string(kIntro);
  Function f = mod.function("f");
  IntroData d = random_intro(50, 2);
  EXPECT_NEAR(call_intro(f, d), d.mean(0, 50), 1e-4);
  // distribute() makes every worker load it now; nothing fails.
  EXPECT_NO_THROW(synk::distribute());
}

TEST_F(JitApi, ModuleBeforeForkFunctionAfterFork) {
  jit::Module mod = jit::compile_string(kIntro);
  synk::fork(2);
  Function f = mod.function("f");
  IntroData d = random_intro(9, 3);
  EXPECT_NEAR(call_intro(f, d), d.mean(0, 9), 1e-4);
}

TEST_F(JitApi, FunctionHandlesAreCachedPerName) {
  jit::Module mod = jit::compile_string(kIntro);
  EXPECT_EQ(mod.function("f").id(), mod.function("f").id());
  jit::Module copy = mod;   // a handle: same state
  EXPECT_EQ(copy.function("f").id(), mod.function("f").id());
  EXPECT_EQ(mod.function_names(), std::vector<std::string>{"f"});
}

TEST_F(JitApi, SharedVariablesByNameOnEveryRank) {
  // The seeds' shared-variable example: rank-local updates, read back per rank.
  jit::Module mod = jit::load_file(examples_dir() + "/shared_variable.synk");
  Function f = mod.function("f");
  synk::fork(2);
  jit::Shared s = mod.shared("s");
  EXPECT_EQ(s.name(), "s");
  EXPECT_EQ(s.spec().dtype, DType::F32);
  EXPECT_EQ(s.values<float>(), (std::vector<float>{1, 1}));
  Data x = data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x"});
  f({x});
  EXPECT_EQ(s.values<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(s.values<float>(1), (std::vector<float>{7, 7}));
  s.set_value<float>({1, 1}, {2});
  s.set_value<float>(1, {2, 2}, {2});
  f({x});
  EXPECT_EQ(s.values<float>(0), (std::vector<float>{3, 3}));     // 1*1 + 2*1
  EXPECT_EQ(s.values<float>(1), (std::vector<float>{14, 14}));   // 3*2 + 4*2
  EXPECT_HAS(error_of<UsageError>([&] { s.set_value<float>({1, 2, 3}, {3}); }), "s");
}

TEST_F(JitApi, BuilderModuleCompilesAndRuns) {
  dsl::ModuleBuilder mb;
  auto w = mb.shared("w", ir::DType::F64, {3}, dsl::init::constant(2.0));
  auto fb = mb.function("scaled_sum");
  auto x = fb.scatter("x", ir::DType::F64, {"n", 3});
  fb.out("total", dsl::sum(x * w), ir::ReduceMode::Sum);
  synk::fork(2);
  jit::Module mod = jit::compile(mb);
  Function f = mod.function("scaled_sum");
  Data xd = data<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, {.name = "x"});
  Outputs r = f({xd});
  EXPECT_DOUBLE_EQ(to_vector<double>(r.get("total")).at(0), 2.0 * 45);
}

TEST_F(JitApi, LoadPathsBecomeAbsoluteAndWorkersFindTheFile) {
  fs::path dir = fs::temp_directory_path() / ("synk-jit-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  rt::Array w;
  w.resize(DType::F32, {3});
  for (int i = 0; i < 3; ++i) w.data<float>()[i] = float(i + 1) / 4;
  rt::npy::write((dir / "w.npy").string(), w.ref());
  {
    std::ofstream(dir / "model.synk") << "shared w: f32[3] = load(\"w.npy\");\n"
                                         "fn dot(scatter x: f32[n, 3]) { out d: sum = sum(x @ w); }\n";
  }
  jit::Module mod = jit::load_file((dir / "model.synk").string());
  const rt::SharedSpec& spec = mod.shared("w").spec();
  EXPECT_EQ(spec.init.kind, rt::InitSpec::Kind::Load);
  EXPECT_EQ(spec.init.path, (dir / "w.npy").string());
  // A module built in C++ with a relative path resolves it against CompileOptions::base_dir.
  dsl::ModuleBuilder mb;
  auto wb = mb.shared("w", ir::DType::F32, {3}, dsl::init::load("w.npy"));
  mb.function("g").out("s", dsl::sum(wb));
  jit::Module built = jit::compile(mb, {.base_dir = dir.string()});
  EXPECT_EQ(built.shared("w").spec().init.path, (dir / "w.npy").string());
  EXPECT_HAS(built.ir_text(), (dir / "w.npy").string());
  // After the fork, workers re-read the printed module from another working directory.
  fs::path old_cwd = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  synk::fork(2);
  Function f = mod.function("dot");
  Data x = data<float>({1, 1, 1, 2, 2, 2}, {2, 3}, {.name = "x"});
  EXPECT_FLOAT_EQ(to_vector<float>(f({x}).get("d")).at(0), 1.5f + 3.0f);
  EXPECT_EQ(mod.shared("w").values<float>(1), (std::vector<float>{0.25f, 0.5f, 0.75f}));
  fs::current_path(old_cwd);
  fs::remove_all(dir);
}

TEST_F(JitApi, UnknownNamesAreUsageErrorsListingTheModule) {
  jit::Module mod = jit::load_file(examples_dir() + "/shared_variable.synk");
  std::string e = error_of<UsageError>([&] { mod.function("g"); });
  EXPECT_HAS(e, "no function named 'g'");
  EXPECT_HAS(e, "the module has: f");
  e = error_of<UsageError>([&] { mod.shared("t"); });
  EXPECT_HAS(e, "no shared variable named 't'");
  EXPECT_HAS(e, "the module has: s");
  EXPECT_HAS(error_of<UsageError>([] { jit::Module().function("f"); }), "empty synk::jit::Module");
  EXPECT_NO_THROW(mod.function("f"));
}

TEST_F(JitApi, ProgramErrorsAreUserErrorsWithLocations) {
  std::string e = error_of<synk::UserError>([] { jit::compile_string("fn f(scatter x: f32[n]) { out y = x @ x @ x; }", {}, "bad.synk"); });
  EXPECT_HAS(e, "bad.synk:1:");
  EXPECT_HAS(e, "error:");
  e = error_of<synk::UserError>([] { jit::compile_string("fn f( { }"); });
  EXPECT_HAS(e, "<string>:1:");
  e = error_of<synk::UserError>([] { jit::load_file("/nonexistent/model.synk"); });
  EXPECT_HAS(e, "cannot read '/nonexistent/model.synk'");
  e = error_of<synk::UserError>([] { jit::load_file("/tmp"); });
  EXPECT_HAS(e, "cannot read '/tmp'");
  // Nothing was left half-registered: a good module still works.
  jit::Module mod = jit::compile_string(kIntro);
  synk::fork(2);
  IntroData d = random_intro(4, 5);
  EXPECT_NEAR(call_intro(mod.function("f"), d), d.mean(0, 4), 1e-4);
}

TEST_F(JitApi, CallErrorsNameTheArgumentAndTheNextCallWorks) {
  synk::fork(2);
  jit::Module mod = jit::compile_string(R"(
fn pick(scatter x: f32[n, 2], bcast idx: i64[k]) { out rows: gather = take(x, idx); }
)");
  Function f = mod.function("pick");
  Data x = data<float>({1, 2, 3, 4, 5, 6}, {3, 2}, {.name = "x"});
  Data wrong = data<float>({1, 2, 3}, {3}, {.name = "idx"});
  EXPECT_HAS(error_of<UsageError>([&] { f({x, wrong}); }), "idx");
  // An index past every rank's rows fails inside the ranks: a RankError, then the group works.
  Data bad = data<int64_t>({7}, {1}, {.name = "idx"});
  std::string e = error_of<RankError>([&] { f({x, bad}); });
  EXPECT_HAS(e, "pick failed on");
  EXPECT_HAS(e, "line 2");   // the user's own line, on every rank
  Data good = data<int64_t>({0}, {1}, {.name = "idx"});
  Outputs r = f({x, good});
  // Rank 0 holds row 0, rank 1 rows 1..2: each takes its own row 0.
  EXPECT_EQ(to_vector<float>(r.get("rows")), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(JitApi, ABadLabelOrIndexIsReportedAtItsRowOfTheWholeCall) {
  synk::fork(2);
  jit::Module mod = jit::compile_string(R"(
fn loss(scatter logits: f32[n, 3], scatter labels: i64[n]) { out l: sum = sum(cross_entropy(logits, labels)); }
)");
  Function f = mod.function("loss");
  std::vector<float> zeros(6 * 3, 0.0f);
  Data logits = data<float>(zeros, {6, 3}, {.name = "logits"});
  // Row 4 holds label 7: rank 1 runs rows 3..5 and finds it at its own row 1.
  Data labels = data<int64_t>({0, 1, 2, 0, 7, 1}, {6}, {.name = "labels"});
  std::string e = error_of<RankError>([&] { f({logits, labels}); });
  EXPECT_HAS(e, "loss failed on rank 1");
  EXPECT_HAS(e, "label 7 in row 4 of the call's 6 scattered rows is out of range [0, 3)");
  // Through a batch index list: position 1 of 3 selected rows is input row 4.
  e = error_of<RankError>([&] { f({logits, labels}, {.batch = std::vector<int64_t>{5, 4, 0}}); });
  EXPECT_HAS(e, "label 7 in row 1 of the call's 3 scattered rows (batch[1] = 4) is out of range [0, 3)");
  // In slices, the row is still counted over the whole call.
  e = error_of<RankError>([&] { f({logits, labels}, {.num_slices = 3}); });
  EXPECT_HAS(e, "label 7 in row 4 of the call's 6 scattered rows");
  // A valid call still works afterwards.
  Data good = data<int64_t>({0, 1, 2, 0, 2, 1}, {6}, {.name = "labels"});
  EXPECT_NEAR(to_vector<float>(f({logits, good}).get("l")).at(0), 6 * std::log(3.0f), 1e-4);
  // The same for take() with scattered indices; broadcast indices keep their own positions.
  jit::Module picks = jit::compile_string(R"(
fn pick(bcast table: f32[m, 2], scatter idx: i64[n]) { out r: gather = take(table, idx); }
fn pick_all(bcast table: f32[m, 2], bcast idx: i64[k]) { out r: sum = sum(take(table, idx)); }
)");
  Data table = data<float>({1, 2, 3, 4, 5, 6}, {3, 2}, {.name = "table"});
  Data idx = data<int64_t>({0, 2, 1, 1, 9}, {5}, {.name = "idx"});
  e = error_of<RankError>([&] { picks.function("pick")({table, idx}); });
  EXPECT_HAS(e, "index 9 at row 4 of the call's 5 scattered rows is out of range for an axis of size 3");
  e = error_of<RankError>([&] { picks.function("pick_all")({table, idx}); });
  EXPECT_HAS(e, "index 9 at position 4 is out of range for an axis of size 3");
}

TEST_F(JitApi, RuntimeDtypesAndArrayConversions) {
  for (rt::DType t : {rt::DType::F32, rt::DType::F64, rt::DType::I32, rt::DType::I64, rt::DType::U8, rt::DType::Bool})
    EXPECT_EQ(compiler::runtime_dtype(t), t);
  EXPECT_HAS(error_of<synk::UserError>([] { compiler::runtime_dtype(ir::DType::F16); }), "f16");
  dsl::HostTensor t = dsl::HostTensor::make(ir::DType::I32, {2, 2}, {1, -2, 3, 2147483647});
  rt::Array a = compiler::to_array(t);
  EXPECT_EQ(a.dtype, DType::I32);
  EXPECT_EQ(to_vector<int32_t>(a), (std::vector<int32_t>{1, -2, 3, 2147483647}));
  dsl::HostTensor back = compiler::to_host_tensor(a);
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.data, t.data);
  dsl::HostTensor f = dsl::HostTensor::make(ir::DType::F32, {1}, {0.1});
  EXPECT_EQ(compiler::to_array(f).data<float>()[0], 0.1f);
}

}  // namespace

// A child of the program's own fork() after synk::fork() holds a copy of the group, which belongs
// to the master: its calls are refused there (they once drove the master's workers, mixing the two
// processes' rows and hanging the master), and the master's calls are unharmed.
TEST_F(JitApi, ACallFromAChildOfTheProgramsOwnForkIsRefused) {
  jit::Module mod = jit::load_file(examples_dir() + "/intro.synk");
  Function f = mod.function("f");
  jit::Module holder = jit::compile_string("shared w: f32[2];");
  synk::fork(2);
  IntroData d = random_intro(24, 7);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int status = 3;
    try {
      holder.shared("w").set_value(std::vector<float>(2, 5.0f), {2});
      ::_exit(5);   // the write went into this copy, unseen by the group
    } catch (const UsageError&) {
    }
    try {
      call_intro(f, d);
      status = 1;   // the call ran on the master's group
    } catch (const UsageError& e) {
      status = std::string(e.what()).find("made by the program's own fork()") != std::string::npos ? 0 : 2;
    } catch (...) {
      status = 4;
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the child's call ran; 2: another UsageError; 4: another error; 5: set_value was taken";
  EXPECT_NEAR(call_intro(f, d), d.mean(0, 24), 1e-4);
}
