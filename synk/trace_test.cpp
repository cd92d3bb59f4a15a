// The timeline (runtime/trace/trace.h, synk::trace_start): a JIT-compiled function called on 2
// ranks with num_slices and an all_reduce, traced through the API and through SYNK_TRACE, and the
// file checked as a Chrome trace-event file: valid JSON with a traceEvents array, every event
// with name/ph/ts/pid/tid, X events with dur >= 0, one pid per rank named by process_name
// metadata, spans on a track nested or disjoint, kernel spans inside call spans, the collective
// and the call on every rank (so spans the workers failed to hand over fail the test), slices,
// waits. Also: no file and no temporary when tracing is off or ends, or when the traced program is
// killed; an unwritable path is a UsageError naming it, from trace_start() and from fork() with
// SYNK_TRACE.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "synk/jit.h"
#include "synk/synk.h"

using namespace synk;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* kText = R"(shared s: f32[3] = ones;
shared big: f32[16] = ones;
fn f(scatter x: f32[n, 3], bcast y: f32[3]) {
  out z: avg = mean(x @ y, axis=0);
  update s = s + mean(x, axis=0);
}
)";

// A fresh directory of this test, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/synk-trace-test-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    return names;
  }
};

// Two calls of f on 2 ranks (the second in 2 slices per rank), then an all_reduce of s (12 bytes:
// the inline path) and one of big (64 bytes: through the staging area).
void run_workload(jit::Module& mod) {
  Function f = mod.function("f");
  std::vector<float> xs(8 * 3), ys{1, 2, 3};
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 7) - 3;
  Data x = data<float>(xs, {8, 3}), y = data<float>(ys, {3});
  f({x, y});
  f({x, y}, {.num_slices = 2});
  all_reduce(mod.runtime_module().var("s"));
  all_reduce(mod.runtime_module().var("big"));
}

struct Span {
  std::string name, cat;
  double ts, end;
};

// Every structural check of a trace of `nranks` ranks; returns the X events per pid.
std::map<int, std::vector<Span>> check_trace(const fs::path& file, int nranks) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  json doc = json::parse(in);   // throws (fails the test) on invalid JSON
  EXPECT_TRUE(doc.is_object());
  EXPECT_EQ(doc.value("displayTimeUnit", ""), "ms");
  EXPECT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  std::map<int, std::vector<Span>> spans;
  std::map<int, std::string> process_names;
  for (const json& e : doc["traceEvents"]) {
    for (const char* key : {"name", "ph", "ts", "pid", "tid"}) EXPECT_TRUE(e.contains(key)) << key << " in " << e;
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M" && e["name"] == "process_name") process_names[pid] = e["args"]["name"];
    if (ph != "X") continue;
    EXPECT_TRUE(e.contains("cat")) << e;
    EXPECT_TRUE(e.contains("dur") && e["dur"].get<double>() >= 0) << e;
    const double ts = e["ts"], dur = e["dur"];
    EXPECT_GE(ts, 0) << e;
    spans[pid].push_back(Span{e["name"], e["cat"], ts, ts + dur});
  }
  std::set<int> expected_pids, span_pids, named_pids;
  for (int r = 0; r < nranks; ++r) expected_pids.insert(r);
  for (auto& [pid, list] : spans) span_pids.insert(pid);
  for (auto& [pid, name] : process_names) named_pids.insert(pid);
  EXPECT_EQ(span_pids, expected_pids) << "every rank, and only the ranks, have spans";
  EXPECT_EQ(named_pids, expected_pids);
  EXPECT_EQ(process_names[0], "rank 0 (master)");
  if (nranks > 1) {
    EXPECT_EQ(process_names[1], "rank 1");
  }

  // Nested or disjoint on each track (ts and dur are rounded to the ns separately: 2 ns slack).
  constexpr double kSlack = 0.002;
  for (auto& [pid, list] : spans) {
    std::sort(list.begin(), list.end(),
              [](const Span& a, const Span& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    std::vector<const Span*> open;
    for (const Span& s : list) {
      while (!open.empty() && open.back()->end <= s.ts + kSlack) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end, open.back()->end + kSlack)
            << "rank " << pid << ": '" << s.name << "' [" << s.ts << ", " << s.end << "] overlaps '"
            << open.back()->name << "' [" << open.back()->ts << ", " << open.back()->end << "]";
      }
      open.push_back(&s);
    }
  }
  return spans;
}

int count(const std::vector<Span>& list, const std::string& cat, const std::string& name = {}) {
  int n = 0;
  for (const Span& s : list) n += s.cat == cat && (name.empty() || s.name == name);
  return n;
}

bool inside_a_call(const std::vector<Span>& list, const Span& s) {
  for (const Span& c : list)
    if (c.cat == "call" && c.ts <= s.ts + 0.002 && s.end <= c.end + 0.002) return true;
  return false;
}

void check_workload_spans(std::map<int, std::vector<Span>>& spans, int nranks) {
  for (int r = 0; r < nranks; ++r) {
    const std::vector<Span>& list = spans[r];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(count(list, "call", "f"), 2) << "each call of f, on every rank";
    EXPECT_GE(count(list, "kernel") + count(list, "blas"), 2) << "the compiled function's steps";
    for (const Span& s : list)
      if (s.cat == "kernel" || s.cat == "blas" || s.cat == "dnn") {
        EXPECT_TRUE(inside_a_call(list, s)) << s.name;
      }
    EXPECT_EQ(count(list, "collective", "all_reduce"), 2);
    EXPECT_GE(count(list, "collective", "rsag round"), 1);
    EXPECT_GE(count(list, "wait", "wait for peers"), 1) << "the collective's barriers";
    if (r > 0) {
      EXPECT_GE(count(list, "wait", "wait for the next command"), 3) << "idle between commands";
    }
    EXPECT_EQ(count(list, "slice"), 2) << "num_slices = 2: two parts of this rank's share in the second call";
    EXPECT_GE(count(list, "update"), 1);
  }
  EXPECT_GE(count(spans[0], "wait", "wait for workers"), 2);
}

TEST(Trace, ApiTraceOfTwoRanksIsAValidTimeline) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  jit::Module mod = jit::compile_string(kText);
  trace_start(file.string());
  EXPECT_TRUE(tracing());
  fork(2);
  run_workload(mod);
  close();   // the workers hand their spans over before they exit
  EXPECT_FALSE(fs::exists(file)) << "written by trace_stop(), not before";
  trace_stop();
  EXPECT_FALSE(tracing());
  auto spans = check_trace(file, 2);
  check_workload_spans(spans, 2);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"trace.json"}) << "no temporary left behind";
}

TEST(Trace, StartAndStopWhileTheGroupRuns) {
  TempDir dir;
  const fs::path file = dir.path / "running.json";
  jit::Module mod = jit::compile_string(kText);
  fork(2);
  mod.function("f");
  trace_start(file.string());
  run_workload(mod);
  trace_stop();   // the workers hand over now; the group keeps running untraced
  run_workload(mod);
  close();
  auto spans = check_trace(file, 2);
  check_workload_spans(spans, 2);
}

TEST(Trace, EnvironmentTracesAForkUntilItsClose) {
  TempDir dir;
  const fs::path file = dir.path / "env.json";
  jit::Module mod = jit::compile_string(kText);
  setenv("SYNK_TRACE", file.c_str(), 1);
  fork(2);
  unsetenv("SYNK_TRACE");
  run_workload(mod);
  close();
  auto spans = check_trace(file, 2);
  check_workload_spans(spans, 2);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"env.json"});
}

TEST(Trace, OffWritesNothing) {
  TempDir dir;
  jit::Module mod = jit::compile_string(kText);
  unsetenv("SYNK_TRACE");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path);   // a stray relative file would land here
  fork(2);
  run_workload(mod);
  close();
  trace_stop();   // no trace: nothing
  fs::current_path(cwd);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Trace, AMasterKilledMidTraceLeavesNothingBehind) {
  TempDir dir;
  jit::Module mod = jit::compile_string(kText);
  mod.function("f");
  pid_t child = ::fork();   // a program of its own, killed while it traces 2 ranks
  if (child == 0) {
    trace_start((dir.path / "killed.json").string());
    synk::fork(2);
    run_workload(mod);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_TRUE(dir.entries().empty()) << "neither the file nor a temporary: " << dir.entries().size();
}

TEST(Trace, UnwritablePathIsAUsageErrorNamingIt) {
  const std::string missing = "/nonexistent-synk-dir/trace.json";
  try {
    trace_start(missing);
    FAIL() << "trace_start accepted " << missing;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tracing());
  setenv("SYNK_TRACE", missing.c_str(), 1);
  try {
    fork(2);
    FAIL() << "fork accepted SYNK_TRACE=" << missing;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("SYNK_TRACE: cannot write the trace file", 0), 0u)
        << "the variable the path came from is named: " << e.what();
  }
  unsetenv("SYNK_TRACE");
  EXPECT_FALSE(forked());
  TempDir dir;
  EXPECT_THROW(trace_start(dir.path.string()), UsageError) << "a directory";
  trace_start((dir.path / "a.json").string());
  EXPECT_THROW(trace_start((dir.path / "b.json").string()), UsageError) << "one trace at a time";
  trace_stop();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.json"});
}

// The trace is renamed over its path: a path that is not a regular file (as root, /dev/null) would
// be replaced, and a symbolic link must keep pointing at the trace.
TEST(Trace, APathThatIsNotARegularFileIsRefusedAndALinkIsFollowed) {
  TempDir dir;
  const fs::path fifo = dir.path / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo.string(), std::string("/dev/null")}) {
    try {
      trace_start(path);
      FAIL() << "trace_start accepted " << path;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_THROW(trace_start("/proc/synk-trace.json"), UsageError) << "nothing can be made there, even as root";
  fs::create_directory(dir.path / "traces");
  fs::create_symlink("traces/t.json", dir.path / "link.json");   // to a file yet to be made
  trace_start((dir.path / "link.json").string());
  trace_stop();
  EXPECT_TRUE(fs::is_symlink(dir.path / "link.json"));
  EXPECT_TRUE(fs::is_regular_file(dir.path / "traces" / "t.json"));
  trace_start((dir.path / "link.json").string());   // now to an existing file
  trace_stop();
  EXPECT_TRUE(fs::is_symlink(dir.path / "link.json"));
  std::ifstream in(dir.path / "traces" / "t.json");
  EXPECT_TRUE(json::parse(in).contains("traceEvents"));
}

}  // namespace
