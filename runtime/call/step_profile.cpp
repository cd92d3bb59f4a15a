// The opt-in call profile of step_profile.h.
#include "runtime/call/step_profile.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace synk::rt::profile {

namespace {
int g_rank = 0;

int64_t read_period() {
  const char* text = std::getenv("SYNK_PROFILE");
  if (!text || !*text) return 0;
  char* end = nullptr;
  long long n = std::strtoll(text, &end, 10);
  if (*end != '\0' || n < 0) {
    std::fprintf(stderr, "synk: SYNK_PROFILE must be a number of calls (0 = off), got '%s'; profiling stays off\n",
                 text);
    return 0;
  }
  return int64_t(n);
}
}  // namespace

int64_t period() {
  static const int64_t value = read_period();
  return value;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void set_rank(int rank) { g_rank = rank; }

void Table::add(size_t row, int64_t ns, const std::string& label) {
  if (row >= rows_.size()) rows_.resize(row + 1);
  Row& r = rows_[row];
  if (!label.empty()) r.label = label;
  r.ns += ns;
  ++r.hits;
}

void Table::end_call() {
  if (++calls_ < period()) return;
  int64_t total = 0;
  for (const Row& r : rows_) total += r.ns;
  std::string text = fmt::format("[synk profile] rank {} (pid {}): {}: mean over {} calls, {:.1f} us per call\n",
                                 g_rank, getpid(), title_, calls_, 1e-3 * double(total) / double(calls_));
  for (const Row& r : rows_) {
    if (r.hits == 0) continue;
    text += fmt::format("  {:9.1f} us {:5.1f}%  {}\n", 1e-3 * double(r.ns) / double(calls_),
                        total ? 100.0 * double(r.ns) / double(total) : 0.0, r.label);
  }
  std::fputs(text.c_str(), stderr);   // one write per table, so ranks do not interleave lines
  for (Row& r : rows_) r.ns = r.hits = 0;
  calls_ = 0;
}

}  // namespace synk::rt::profile
