// Checkpoints (synk/checkpoint.h) through jit::Module: a run resumed from a checkpoint equals the
// uninterrupted run bit for bit on every rank (parameters, adam's state and step counter, the
// dropout draws, the step index a schedule reads), loaded before or after synk::fork(); the directory holds what the manifest says;
// every bad checkpoint is a UsageError that changes nothing; a save never replaces other files and
// leaves no temporary directory; set_value_all reaches every rank where set_value reaches one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "base/testing.h"
#include "synk/jit.h"

using namespace synk;
using synk::testing::error_of;
namespace fs = std::filesystem;

namespace {

constexpr const char* kProgram = R"(
shared w: f32[4, 3] = uniform(seed=1, low=-0.5, high=0.5);
shared b: f32[3];
shared data_x: f32[m, 4] sliceable;
optimizer opt = adam(lr=0.01);
fn train(scatter x: f32[n, 4], scatter y: i64[n]) {
  let h = dropout(x, 0.25) @ w + b;
  out loss: avg = mean(cross_entropy(h, y));
  minimize mean(cross_entropy(h, y)) over w, b using opt;
}
)";

constexpr const char* kOtherProgram = R"(
shared w: f32[4, 3];
fn f(scatter x: f32[n, 4]) { out y: gather = x @ w; }
)";

struct Batch {
  Data x, y;
};

Batch make_batch() {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int i = 0; i < 30; ++i) {
    for (int j = 0; j < 4; ++j) x.push_back(float((i * 7 + j * 3) % 11) * 0.2f - 1.0f);
    y.push_back(i % 3);
  }
  return {data<float>(x, {30, 4}), data<int64_t>(y, {30})};
}

void train_steps(jit::Module& m, const Batch& batch, int first, int count) {
  TrainStep step = m.train_step("train");
  for (int s = first; s < first + count; ++s) {
    std::vector<int64_t> rows;
    for (int j = 0; j < 5 + s % 4; ++j) rows.push_back((s * 11 + j * 5) % 30);
    step({batch.x, batch.y}, {.batch = rows});
  }
}

std::vector<Array> state_on(jit::Module& m, int rank) {
  std::vector<Array> out;
  for (const char* name : {"w", "b", "w_m", "w_v", "b_m", "b_v", "opt_update_t"})
    out.push_back(m.shared(name).get_value(rank));
  return out;
}

void expect_same_bits(const std::vector<Array>& a, const std::vector<Array>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].bytes.size(), b[i].bytes.size()) << what;
    EXPECT_EQ(0, std::memcmp(a[i].bytes.data(), b[i].bytes.data(), a[i].bytes.size())) << what << ", variable " << i;
  }
}

// 16 MB of state: a save takes long enough to be caught in the middle.
constexpr const char* kText4M = "shared big: f32[4000000] = ones;";

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("synk-ckpt-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(Checkpoint, AResumedRunEqualsTheUninterruptedOneOnEveryRank) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  const Batch batch = make_batch();
  constexpr int kRanks = 3;
  jit::Module straight = jit::compile_string(kProgram);
  straight.function("train");
  ASSERT_EQ(kRanks, synk::fork(kRanks));
  train_steps(straight, batch, 0, 3);
  straight.save_checkpoint(ckpt, {{"step", "3"}});
  train_steps(straight, batch, 3, 4);
  std::vector<std::vector<Array>> want;
  for (int r = 0; r < kRanks; ++r) want.push_back(state_on(straight, r));
  synk::close();

  for (bool load_after_fork : {true, false}) {
    jit::Module resumed = jit::compile_string(kProgram);
    std::string step;
    if (!load_after_fork) step = resumed.load_checkpoint(ckpt).at("step");
    ASSERT_EQ(kRanks, synk::fork(kRanks));
    if (load_after_fork) step = resumed.load_checkpoint(ckpt).at("step");
    EXPECT_EQ(step, "3");
    EXPECT_EQ(resumed.function("train").step(), 3u) << "the random state came back";
    train_steps(resumed, batch, 3, 4);
    for (int r = 0; r < kRanks; ++r)
      expect_same_bits(state_on(resumed, r), want[size_t(r)],
                       "rank " + std::to_string(r) + (load_after_fork ? ", loaded after fork" : ", loaded before fork"));
    synk::close();
  }
}

// The step index (what a schedule reads) is training state too: every step the module makes for
// `train` shares one count, the checkpoint saves it, and a resumed schedule continues from it, so
// the resumed run equals the uninterrupted one without set_step_index.
TEST(Checkpoint, AResumedScheduleContinuesFromTheSavedStepIndex) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  const Batch batch = make_batch();
  const Schedule schedule = Schedule::cosine(0.05, 6, 0.001).with_warmup(2);
  jit::Module straight = jit::compile_string(kProgram);
  ASSERT_EQ(2, synk::fork(2));
  TrainStep step = straight.train_step("train");
  step.set_schedule(schedule);
  for (int s = 0; s < 3; ++s) step({batch.x, batch.y}, {.batch = Range{s, s + 12}});
  EXPECT_EQ(straight.train_step("train").step_index(), 3) << "a second step of the module shares the count";
  straight.save_checkpoint(ckpt);
  for (int s = 3; s < 7; ++s) step({batch.x, batch.y}, {.batch = Range{s, s + 12}});
  const std::vector<Array> want = state_on(straight, 1);
  EXPECT_EQ(step.step_index(), 7);
  // Loading into the same module sets the count of the steps it made before.
  straight.load_checkpoint(ckpt);
  EXPECT_EQ(step.step_index(), 3);
  synk::close();

  jit::Module resumed = jit::compile_string(kProgram);
  TrainStep made_before = resumed.train_step("train");
  ASSERT_EQ(2, synk::fork(2));
  made_before({batch.x, batch.y}, {.batch = Range{0, 5}});   // the count moves; the load sets it back
  resumed.load_checkpoint(ckpt);
  TrainStep again = resumed.train_step("train");
  EXPECT_EQ(made_before.step_index(), 3);
  EXPECT_EQ(again.step_index(), 3);
  again.set_schedule(schedule);
  for (int s = 3; s < 7; ++s) again({batch.x, batch.y}, {.batch = Range{s, s + 12}});
  expect_same_bits(state_on(resumed, 1), want, "rank 1 after the resumed schedule");
  EXPECT_EQ(resumed.shared("opt_lr").values<double>(1), std::vector<double>{schedule(6)});
  synk::close();

  // A step index of a training function the module does not have is another model's.
  {
    std::ifstream in(fs::path(ckpt) / "manifest.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"train\": 3");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, 11, "\"tarin\": 3");
    std::ofstream(fs::path(ckpt) / "manifest.json") << text;
  }
  jit::Module target = jit::compile_string(kProgram);
  target.shared("w").set_value(std::vector<float>(12, 9.0f), {4, 3});
  EXPECT_HAS(error_of<UsageError>([&] { target.load_checkpoint(ckpt); }),
             "the step index of training function 'tarin', which this module does not have (it has: train)");
  EXPECT_EQ(target.shared("w").values<float>(), std::vector<float>(12, 9.0f)) << "nothing was loaded";
}

TEST(Checkpoint, TheDirectoryHoldsWhatTheManifestSays) {
  TempDir tmp;
  const fs::path ckpt = tmp.path / "ckpt";
  jit::Module m = jit::compile_string(kProgram);
  m.function("train").set_step(41);
  m.save_checkpoint(ckpt.string(), {{"epoch", "7"}, {"note", "a \"quoted\" value"}});
  for (const char* file : {"manifest.json", "w.npy", "b.npy", "w_m.npy", "opt_update_t.npy", "opt_lr.npy"})
    EXPECT_TRUE(fs::is_regular_file(ckpt / file)) << file;
  EXPECT_FALSE(fs::exists(ckpt / "data_x.npy")) << "sliceable variables hold data, not state";
  EXPECT_FALSE(fs::exists(ckpt / "opt_grads.npy")) << "every step overwrites the flat gradient before reading it";
  EXPECT_EQ(checkpoint_metadata(ckpt.string()), (CheckpointMetadata{{"epoch", "7"}, {"note", "a \"quoted\" value"}}));
  for (const fs::directory_entry& e : fs::directory_iterator(tmp.path))
    EXPECT_EQ(e.path().filename(), "ckpt") << "no temporary directory is left beside it";
  // Saving again swaps the new checkpoint in.
  m.save_checkpoint(ckpt.string(), {{"epoch", "8"}});
  EXPECT_EQ(checkpoint_metadata(ckpt.string()).at("epoch"), "8");
}

// Variable names longer than a file name may be (255 bytes) are saved under a shortened name with
// a hash of the whole name, so two that share their first 200 bytes keep separate files.
TEST(Checkpoint, VariablesWithNamesLongerThanAFileNameSaveAndLoad) {
  TempDir tmp;
  const fs::path ckpt = tmp.path / "ckpt";
  const std::string a = "v" + std::string(299, 'a'), b = "v" + std::string(298, 'a') + "b";
  const std::string text = fmt::format("shared {}: f32[2] = ones;\nshared {}: f32[3];\n", a, b);
  jit::Module m = jit::compile_string(text);
  m.shared(b).set_value(std::vector<float>{1.5f, 2.5f, 3.5f}, {3});
  m.save_checkpoint(ckpt.string());
  int npy_files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(ckpt)) {
    EXPECT_LE(e.path().filename().string().size(), 255u);
    npy_files += e.path().extension() == ".npy";
  }
  EXPECT_EQ(npy_files, 2);
  jit::Module fresh = jit::compile_string(text);
  fresh.load_checkpoint(ckpt.string());
  EXPECT_EQ(fresh.shared(a).values<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(fresh.shared(b).values<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

// A checkpoint that holds the flat gradient (saved before it was left out, or by
// synk::save_checkpoint without the scratch list) loads, and the gradient stays as it was.
TEST(Checkpoint, ACheckpointHoldingTheFlatGradientLoadsAndLeavesIt) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  jit::Module saved = jit::compile_string(kProgram);
  saved.shared("w").set_value(std::vector<float>(12, 0.25f), {4, 3});
  saved.shared("opt_grads").set_value(std::vector<float>(15, 7.0f), {15});
  synk::save_checkpoint(saved.runtime_module(), {}, ckpt, {{"epoch", "2"}}, {{"train", 5}});
  ASSERT_TRUE(fs::is_regular_file(fs::path(ckpt) / "opt_grads.npy"));
  jit::Module target = jit::compile_string(kProgram);
  target.shared("opt_grads").set_value(std::vector<float>(15, -1.0f), {15});
  EXPECT_EQ(target.load_checkpoint(ckpt).at("epoch"), "2");
  EXPECT_EQ(target.shared("w").values<float>(), std::vector<float>(12, 0.25f));
  EXPECT_EQ(target.shared("opt_grads").values<float>(), std::vector<float>(15, -1.0f)) << "not state: left as it is";
  EXPECT_EQ(target.train_step("train").step_index(), 5);
  // Without the scratch list the gradient is state like any other variable, and it must be there.
  fs::remove(fs::path(ckpt) / "opt_grads.npy");
  EXPECT_HAS(error_of<UsageError>([&] { synk::load_checkpoint(saved.runtime_module(), {}, ckpt); }),
             "shared variable 'opt_grads': the file");
}

TEST(Checkpoint, BadCheckpointsAreUsageErrorsThatChangeNothing) {
  TempDir tmp;
  const fs::path ckpt = tmp.path / "ckpt";
  jit::Module m = jit::compile_string(kProgram);
  m.save_checkpoint(ckpt.string());
  jit::Module other = jit::compile_string(kOtherProgram);
  EXPECT_HAS(error_of<UsageError>([&] { other.load_checkpoint(ckpt.string()); }), "it holds 'b'");
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint((tmp.path / "none").string()); }), "no such directory");
  fs::create_directories(tmp.path / "empty");
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint((tmp.path / "empty").string()); }), "not a checkpoint");
  std::ofstream(tmp.path / "weights.npy") << "not a directory";
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint((tmp.path / "weights.npy").string()); }),
             "it is a file; a checkpoint is a directory");
  {
    std::fstream f(ckpt / "w_v.npy", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');   // one flipped byte of data: the checksum catches it
  }
  jit::Module target = jit::compile_string(kProgram);
  target.shared("w").set_value(std::vector<float>(12, 9.0f), {4, 3});
  EXPECT_HAS(error_of<UsageError>([&] { target.load_checkpoint(ckpt.string()); }), "the checkpoint is damaged");
  EXPECT_EQ(target.shared("w").values<float>(), std::vector<float>(12, 9.0f)) << "nothing was loaded";
  std::ofstream(ckpt / "manifest.json") << "{\"format\": \"synk-checkpoint\", \"version\": 1, \"variables\": 3}";
  EXPECT_HAS(error_of<UsageError>([&] { target.load_checkpoint(ckpt.string()); }), "manifest.json is damaged");
}

TEST(Checkpoint, ASaveNeverReplacesOtherFiles) {
  TempDir tmp;
  jit::Module m = jit::compile_string(kProgram);
  fs::create_directories(tmp.path / "mine");
  std::ofstream(tmp.path / "mine" / "notes.txt") << "keep me";
  EXPECT_HAS(error_of<UsageError>([&] { m.save_checkpoint((tmp.path / "mine").string()); }), "not a checkpoint");
  EXPECT_TRUE(fs::exists(tmp.path / "mine" / "notes.txt"));
  EXPECT_HAS(error_of<UsageError>([&] { m.save_checkpoint((tmp.path / "no" / "ckpt").string()); }), "does not exist");
  // A temporary directory that a killed save left behind is swept by the next save.
  const fs::path stale = tmp.path / ".ckpt.tmp-999999999-0badf00d";
  fs::create_directories(stale);
  m.save_checkpoint((tmp.path / "ckpt").string());
  EXPECT_FALSE(fs::exists(stale));
}

// "ckpt/" names ckpt; a save through a symbolic link writes the directory it points at and keeps
// the link (replacing the link left the real checkpoint stale without a word).
TEST(Checkpoint, ATrailingSlashAndALinkNameTheDirectoryTheyPointAt) {
  TempDir tmp;
  jit::Module m = jit::compile_string(kProgram);
  m.shared("w").set_value(std::vector<float>(12, 1.0f), {4, 3});
  m.save_checkpoint((tmp.path / "real").string() + "/", {{"value", "1"}});
  EXPECT_EQ(m.load_checkpoint((tmp.path / "real").string() + "/").at("value"), "1");
  fs::create_directory_symlink("real", tmp.path / "link");
  m.shared("w").set_value(std::vector<float>(12, 2.0f), {4, 3});
  m.save_checkpoint((tmp.path / "link").string(), {{"value", "2"}});
  EXPECT_TRUE(fs::is_symlink(tmp.path / "link"));
  jit::Module loaded = jit::compile_string(kProgram);
  EXPECT_EQ(loaded.load_checkpoint((tmp.path / "real").string()).at("value"), "2");
  EXPECT_EQ(loaded.shared("w").values<float>(), std::vector<float>(12, 2.0f));
}

// A variable saved as i64 does not load into an i32 declaration (no option converts it); the
// message says what to declare. A safe widening (f32 into f64) loads.
TEST(Checkpoint, ADtypeThatCannotHoldTheSavedValuesSaysWhatToDeclare) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  jit::compile_string("shared c: i64[3] = ones; shared f: f32[2] = ones;").save_checkpoint(ckpt);
  EXPECT_HAS(error_of<UsageError>([&] {
               jit::compile_string("shared c: i32[3] = zeros; shared f: f32[2] = zeros;").load_checkpoint(ckpt);
             }),
             "shared variable 'c': the checkpoint holds it as i64, but this module declares it i32, which cannot hold "
             "every i64 value; declare it i64");
  jit::Module wide = jit::compile_string("shared c: i64[3] = zeros; shared f: f64[2] = zeros;");
  wide.load_checkpoint(ckpt);
  EXPECT_EQ(wide.shared("f").values<double>(), std::vector<double>(2, 1.0));
}

// A save ended by a handled signal (SIGTERM, Ctrl-C) removes its half-written copy: the handler
// that removes the shared memory removes it too, and the previous checkpoint stays whole.
TEST(Checkpoint, ASaveEndedBySigtermLeavesNoTemporaryCopy) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  jit::Module m = jit::compile_string(kText4M);
  m.save_checkpoint(ckpt, {{"value", "1"}});
  for (int round = 0; round < 4; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      synk::fork(1);   // a program with shared memory: synk's handlers are installed
      for (;;) m.save_checkpoint(ckpt, {{"value", "2"}});
    }
    ::usleep(useconds_t(150000 + 50000 * round));
    ::kill(child, SIGTERM);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
    for (const fs::directory_entry& e : fs::directory_iterator(tmp.path))
      EXPECT_EQ(e.path().filename(), "ckpt") << "round " << round;
    jit::Module loaded = jit::compile_string(kText4M);
    EXPECT_NO_THROW(loaded.load_checkpoint(ckpt)) << "round " << round;
  }
}

TEST(Checkpoint, SetValueAllReachesEveryRank) {
  jit::Module m = jit::compile_string(kProgram);
  ASSERT_EQ(2, synk::fork(2));
  const std::vector<float> before = m.shared("w").values<float>(1);
  m.shared("w").set_value(std::vector<float>(12, 1.0f), {4, 3});
  EXPECT_EQ(m.shared("w").values<float>(1), before) << "set_value changes the master's copy only";
  m.shared("w").set_value_all(std::vector<float>(12, 2.0f), {4, 3});
  EXPECT_EQ(m.shared("w").values<float>(1), std::vector<float>(12, 2.0f));
  EXPECT_EQ(m.shared("w").values<float>(0), std::vector<float>(12, 2.0f));
  // An Array (what get_value returns) goes back in as it is.
  m.shared("w").set_value(1, m.shared("w").get_value(0));
  m.shared("w").set_value(std::vector<float>(12, 3.0f), {4, 3});
  m.shared("w").set_value_all(m.shared("w").get_value());
  EXPECT_EQ(m.shared("w").values<float>(1), std::vector<float>(12, 3.0f));
  synk::close();
}

// A save killed at any moment (SIGKILL: no handler runs) leaves the previous checkpoint or the new
// one, whole, never a mix: the child saves checkpoints of alternating values as fast as it can.
TEST(Checkpoint, ASaveKilledAtAnyMomentLeavesAWholeCheckpoint) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  jit::Module m = jit::compile_string(kProgram);
  std::mt19937 rng(std::random_device{}());
  int seen_old = 0, seen_new = 0;
  for (int round = 0; round < 12; ++round) {
    m.shared("w").set_value(std::vector<float>(12, 1.0f), {4, 3});
    m.save_checkpoint(ckpt, {{"value", "1"}});
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      m.shared("w").set_value(std::vector<float>(12, 2.0f), {4, 3});
      for (;;) m.save_checkpoint(ckpt, {{"value", "2"}});
    }
    ::usleep(useconds_t(std::uniform_int_distribution<int>(0, 20000)(rng)));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    jit::Module loaded = jit::compile_string(kProgram);
    const std::string value = loaded.load_checkpoint(ckpt).at("value");
    const std::vector<float> w = loaded.shared("w").values<float>();
    EXPECT_EQ(w, std::vector<float>(12, value == "1" ? 1.0f : 2.0f)) << "round " << round;
    (value == "1" ? seen_old : seen_new)++;
  }
  // The next save sweeps what the killed saves left.
  m.save_checkpoint(ckpt);
  for (const fs::directory_entry& e : fs::directory_iterator(tmp.path)) EXPECT_EQ(e.path().filename(), "ckpt");
  RecordProperty("old_new", std::to_string(seen_old) + "/" + std::to_string(seen_new));
}


// A load while another process saves over the same checkpoint (an evaluator reading what training
// writes) reads one whole checkpoint, old or new: never one's manifest with the other's files,
// which it took for damage.
TEST(Checkpoint, ALoadDuringSavesOfAnotherProcessReadsOneWholeCheckpoint) {
  TempDir tmp;
  const std::string ckpt = (tmp.path / "ckpt").string();
  jit::Module m = jit::compile_string(kProgram);
  m.save_checkpoint(ckpt, {{"value", "0"}});
  const std::vector<float> initial = m.shared("w").values<float>();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 1;; ++i) {
      m.shared("w").set_value(std::vector<float>(12, float(i)), {4, 3});
      m.save_checkpoint(ckpt, {{"value", std::to_string(i)}});
    }
  }
  jit::Module loaded = jit::compile_string(kProgram);
  int failures = 0, distinct = 0;
  std::string last;
  // At least 200 loads, and on until one met a save (on a busy machine the child's first save can
  // come after 200 quick loads), within 30 s.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int round = 0; round < 200 || (distinct < 2 && std::chrono::steady_clock::now() < give_up); ++round) {
    try {
      const std::string value = loaded.load_checkpoint(ckpt).at("value");
      const std::vector<float> w = loaded.shared("w").values<float>();
      EXPECT_EQ(w, value == "0" ? initial : std::vector<float>(12, std::stof(value))) << "round " << round;
      if (value != last) ++distinct;
      last = value;
    } catch (const UsageError& e) {
      ADD_FAILURE() << "round " << round << ": " << e.what();
      if (++failures > 3) break;
    }
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_GT(distinct, 1) << "the loads never met a save";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the first `from` in `path` by `to` (a hand edit of the manifest).
void edit(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = read_text(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " in " << text;
  text.replace(at, from.size(), to);
  std::ofstream(path, std::ios::trunc) << text;
}

// Fields after the variables (metadata, a function's seed and step, a step index) are checked
// before any variable is set: a load that fails on one of them left the variables loaded.
TEST(Checkpoint, ADamagedFieldAfterTheVariablesChangesNothing) {
  TempDir tmp;
  jit::Module m = jit::compile_string(kProgram);
  ASSERT_EQ(synk::fork(2), 2);
  train_steps(m, make_batch(), 0, 2);
  const std::vector<std::pair<std::string, std::string>> damage = {
      {"\"epoch\": \"3\"", "\"epoch\": 3"},    // metadata values are strings
      {"\"seed\": ", "\"seed\": \"x\", \"was\": "},
      {"\"step\": ", "\"step\": -1, \"was\": "},
      {"\"train\": 2", "\"train\": 5.5"},      // the step index
  };
  for (const auto& [from, to] : damage) {
    const fs::path ckpt = tmp.path / "ckpt";
    m.save_checkpoint(ckpt.string(), {{"epoch", "3"}});
    edit(ckpt / "manifest.json", from, to);
    jit::Module target = jit::compile_string(kProgram);
    target.shared("w").set_value(std::vector<float>(12, 9.0f), {4, 3});
    EXPECT_HAS(error_of<UsageError>([&] { target.load_checkpoint(ckpt.string()); }), "manifest.json is damaged")
        << to;
    EXPECT_EQ(target.shared("w").values<float>(), std::vector<float>(12, 9.0f)) << "nothing was loaded: " << to;
    EXPECT_EQ(target.train_step("train").step_index(), 0) << to;
  }
  synk::close();
}

// A checkpoint saved before a function ran does not name it: loading it into a module whose
// function has run puts its random stream back at step 0, so the dropout draws after the load are
// those of a fresh run.
TEST(Checkpoint, AFunctionTheCheckpointDoesNotNameDrawsAgainFromStepZero) {
  TempDir tmp;
  const Batch batch = make_batch();
  jit::Module fresh = jit::compile_string(kProgram);
  fresh.save_checkpoint((tmp.path / "start").string());
  jit::Module reused = jit::compile_string(kProgram);
  jit::Module straight = jit::compile_string(kProgram);
  straight.function("train");
  reused.function("train");
  ASSERT_EQ(synk::fork(2), 2);
  train_steps(reused, batch, 0, 3);
  reused.load_checkpoint((tmp.path / "start").string());
  train_steps(reused, batch, 0, 3);
  train_steps(straight, batch, 0, 3);
  expect_same_bits(state_on(reused, 0), state_on(straight, 0), "3 steps after going back to the start");
  synk::close();
}

TEST(Checkpoint, ASaveOverACheckpointKeepsFilesItDidNotWrite) {
  TempDir tmp;
  const fs::path ckpt = tmp.path / "ckpt";
  jit::Module m = jit::compile_string(kProgram);
  m.save_checkpoint(ckpt.string());
  std::ofstream(ckpt / "notes.txt") << "keep me";
  EXPECT_HAS(error_of<UsageError>([&] { m.save_checkpoint(ckpt.string()); }), "also holds 'notes.txt'");
  EXPECT_EQ(read_text(ckpt / "notes.txt"), "keep me");
  fs::remove(ckpt / "notes.txt");
  m.save_checkpoint(ckpt.string());   // its own files alone: replaced as before
}

// Paths the filesystem refuses are the caller's: UsageErrors naming the checkpoint, never a raw
// filesystem_error, and a FIFO in place of the manifest does not block the load.
TEST(Checkpoint, PathsTheFilesystemRefusesAreUsageErrors) {
  TempDir tmp;
  jit::Module m = jit::compile_string(kProgram);
  const fs::path fifo = tmp.path / "fifo";
  fs::create_directories(fifo);
  ASSERT_EQ(::mkfifo((fifo / "manifest.json").c_str(), 0600), 0);
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint(fifo.string()); }), "is not a regular file");
  fs::create_symlink(tmp.path / "loop_b", tmp.path / "loop_a");
  fs::create_symlink(tmp.path / "loop_a", tmp.path / "loop_b");
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint((tmp.path / "loop_a").string()); }), "load_checkpoint");
  EXPECT_HAS(error_of<UsageError>([&] { m.save_checkpoint((tmp.path / "loop_a" / "x").string()); }),
             "save_checkpoint");
  const fs::path ckpt = tmp.path / "ckpt";
  m.save_checkpoint(ckpt.string());
  fs::remove(ckpt / "w.npy");
  fs::create_directories(ckpt / "w.npy");
  EXPECT_HAS(error_of<UsageError>([&] { m.load_checkpoint(ckpt.string()); }), "is not a regular file");
}

}  // namespace
