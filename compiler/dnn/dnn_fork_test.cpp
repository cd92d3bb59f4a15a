// The process model of synk: the master may run oneDNN before it forks one worker per core, and
// each worker then runs oneDNN on one thread. These tests fork after using oneDNN in the parent
// and run it in one and in two concurrent children, each under a deadline (SIGALRM) so that a
// hang fails the test instead of blocking it. They also show why one thread is not optional:
// libgomp's thread pool does not survive fork.
#include <dirent.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "compiler/dnn/dnn.h"
#include "ir/dnn_reference.h"
#include "compiler/dnn/dnn_test_util.h"

namespace synk::compiler::dnn {
namespace {

using testing::close_rel_max;
using testing::conv;
using testing::random_floats;
using testing::to_double;

int thread_count() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

// A fixed mix of oneDNN calls (conv on both layouts, its gradients, batch norm, pooling) whose
// outputs are concatenated: one thread and the same primitives give the same bits in any process.
std::vector<float> workload() {
  const Conv2dParams p = conv(4, 8, 12, 12, 16, 3, 1, 1, true);
  const auto x = random_floats(size_t(conv2d_input_elems(p)), 51),
             w = random_floats(size_t(conv2d_weight_elems(p)), 52);
  const auto b = random_floats(16, 53);
  std::vector<float> y(size_t(conv2d_output_elems(p))), y2 = y, dx(x.size()), dw(w.size()), db(16);
  onednn::conv2d_forward(p, x.data(), w.data(), b.data(), y.data(), onednn::ConvFormat::plain);
  onednn::conv2d_forward(p, x.data(), w.data(), b.data(), y2.data(), onednn::ConvFormat::blocked);
  onednn::conv2d_backward_data(p, y.data(), w.data(), dx.data(), onednn::ConvFormat::blocked);
  onednn::conv2d_backward_weights(p, x.data(), y.data(), dw.data(), db.data());
  const BatchNormParams bp{4, 16, 12, 12, 1e-5};
  const auto gamma = random_floats(16, 54), beta = random_floats(16, 55);
  std::vector<float> z(y.size()), mean(16), var(16);
  onednn::batch_norm_forward_training(bp, y.data(), gamma.data(), beta.data(), z.data(), mean.data(), var.data());
  const Pool2dParams pp{4, 16, 12, 12, 2, 2, 2, 0, PoolKind::avg, true};
  std::vector<float> pooled(size_t(4 * 16 * 6 * 6));
  onednn::avg_pool2d_forward(pp, z.data(), pooled.data());
  std::vector<float> all;
  for (const auto* v : {&y, &y2, &dx, &dw, &db, &z, &mean, &var, &pooled}) all.insert(all.end(), v->begin(), v->end());
  return all;
}

// A conv the parent never ran: the child builds a new primitive (JIT code) of its own.
bool fresh_shape_is_right() {
  const Conv2dParams p = conv(2, 6, 9, 11, 10, 5, 2, 2, false);
  const auto x = random_floats(size_t(conv2d_input_elems(p)), 56),
             w = random_floats(size_t(conv2d_weight_elems(p)), 57);
  std::vector<float> y(size_t(conv2d_output_elems(p)));
  std::vector<double> ref(y.size());
  onednn::conv2d_forward(p, x.data(), w.data(), nullptr, y.data(), onednn::ConvFormat::blocked);
  reference::conv2d_forward(p, to_double(x).data(), to_double(w).data(), (const double*)nullptr, ref.data());
  return bool(close_rel_max(y, ref, 1e-5));
}

// The child's exit code: 0 when all is well, else which check failed.
int child_main(const std::vector<float>& expected) {
  alarm(120);              // a hang becomes SIGALRM
  omp_set_num_threads(2);  // as a worker that inherited a parallel setting: the calls must still use one
  if (thread_count() != 1) return 10;
  if (workload() != expected) return 11;
  if (!fresh_shape_is_right()) return 12;
  if (thread_count() != 1) return 13;         // oneDNN started no OpenMP threads
  if (omp_get_max_threads() != 2) return 14;  // and left the caller's setting as it was
  return 0;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Forks `children` processes at once running f, waits for all, returns how each ended.
std::vector<std::string> run_children(int children, const std::function<int()>& f) {
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) _exit(f());  // _exit: no gtest or static destructors in the child
    pids.push_back(pid);
  }
  std::vector<std::string> out;
  for (pid_t pid : pids) {
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
      out.push_back("fork or wait failed");
      continue;
    }
    out.push_back(describe(status));
  }
  return out;
}

// Runs a 2-thread OpenMP region here, which spins up libgomp's thread pool; the threads it had.
int two_thread_team() {
  int team = 0;
#pragma omp parallel num_threads(2) reduction(+ : team)
  team += 1;
  return team;
}

TEST(Fork, OneDnnWorksInChildrenAfterUseInParent) {
  const std::vector<float> expected = workload();
  ASSERT_GT(onednn::cached_primitives(), 0u);
  EXPECT_EQ(workload(), expected);  // deterministic in the parent too
  EXPECT_EQ(run_children(1, [&] { return child_main(expected); }), (std::vector<std::string>{"exit 0"}));
  EXPECT_EQ(run_children(2, [&] { return child_main(expected); }), (std::vector<std::string>{"exit 0", "exit 0"}));
}

// Even when the parent's own code had spun up libgomp's pool (a 2-thread region) before forking,
// the children's oneDNN calls work: on one thread oneDNN never enters an OpenMP region.
TEST(Fork, OneDnnWorksInChildrenAfterParentRanAnOpenMpTeam) {
  ASSERT_EQ(two_thread_team(), 2);
  const std::vector<float> expected = workload();
  EXPECT_EQ(run_children(2, [&] { return child_main(expected); }), (std::vector<std::string>{"exit 0", "exit 0"}));
}

// Why the one-thread rule is mandatory: after the parent ran a 2-thread team, a child's own
// 2-thread region hangs in libgomp (its pool's threads were not copied by fork). Pinned so that a
// libgomp that fixes this is noticed; the child is killed by its 2 s alarm.
TEST(Fork, LibgompPoolDoesNotSurviveFork) {
  ASSERT_EQ(two_thread_team(), 2);
  const auto ended = run_children(1, [] {
    alarm(2);
    return two_thread_team() == 2 ? 0 : 1;
  });
  EXPECT_EQ(ended, (std::vector<std::string>{"signal " + std::to_string(SIGALRM)}));
}

TEST(Threads, CallsRestoreTheCallersOpenMpSetting) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const std::vector<float> expected = workload();
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(before);
  EXPECT_EQ(workload(), expected);  // and the thread count did not change the result
}

TEST(Version, IsTheOpenMpBuild) { EXPECT_EQ(onednn::version_text(), "2.6.3 runtime=omp"); }

}  // namespace
}  // namespace synk::compiler::dnn
