// An opt-in, in-process profile of where a call's time goes (perf is not installed on the
// development machines, and ranks are forked processes, so an external profiler would miss the
// workers anyway). Enabled by the environment variable SYNK_PROFILE=N (N > 0): every table
// prints to stderr, after every N calls of what it measures, the mean time per call of each of
// its rows, then starts again. Off (unset, empty or 0), timing sites cost one well-predicted
// branch on a cached flag: no clock reads, no allocation.
//
// Users: CpuFunction::run (one row per kernel or BLAS call, labelled with its shape) and the
// call engine (argument planning, row gathers, the compiled function, output and update
// handling, waiting for the workers, the master's reduction).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace synk::rt::profile {

// The print period N from SYNK_PROFILE, read once; 0 when profiling is off.
int64_t period();
inline bool enabled() { return period() > 0; }
int64_t now_ns();   // steady clock

// The rank this process runs as (printed in each table's title); set by the call engine.
void set_rank(int rank);

// Rows of named timings, accumulated over calls. Rows are found by their index (the caller's
// fixed position, e.g. a kernel's step number); a row's label is what the latest call set.
class Table {
 public:
  explicit Table(std::string title) : title_(std::move(title)) {}
  // Adds `ns` to row `row` (rows grow on demand); `label` replaces the row's label when not empty.
  void add(size_t row, int64_t ns, const std::string& label = {});
  bool has_label(size_t row) const { return row < rows_.size() && !rows_[row].label.empty(); }
  // Ends one call: prints and resets once `period()` calls have ended.
  void end_call();

 private:
  struct Row {
    std::string label;
    int64_t ns = 0;
    int64_t hits = 0;
  };
  std::string title_;
  std::vector<Row> rows_;
  int64_t calls_ = 0;
};

}  // namespace synk::rt::profile
