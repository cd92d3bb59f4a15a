// The timeline: an opt-in recorder of what every rank does and when, written at the end as one
// Chrome trace-event file (JSON; opens in Perfetto and chrome://tracing) with one track per rank
// (docs/trace.md). Started by SYNK_TRACE=<path> (read when the process group forks; the file is
// written when the group closes) or by synk::trace_start(path) / synk::trace_stop().
//
// Recording: each process (the master, rank 0, and every forked worker) appends complete spans
// to its own preallocated buffer: no lock, no allocation, no system call beyond the clock. The
// clock is CLOCK_MONOTONIC, which every process on the machine shares, so the ranks' spans line
// up without correction. A full buffer drops further spans and counts them (the file says how
// many). Off, every timing site costs one branch on a cached flag and reads no clock.
//
// Hand-over: the process group asks its workers for their spans (a group command: their results
// areas) when the trace stops or the group closes; the master writes the file. Workers never
// write files.
//
// Errors: a path whose directory cannot be written is a UsageError naming the path, raised by
// start(), not at the end. Guarantees: the file appears whole or not at all (written unnamed or
// under a temporary name in the same directory, then renamed); a master killed mid-trace leaves
// no file and no temporary behind (O_TMPFILE where the file system has it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace synk::rt::trace {

// What a span is, for filtering and colouring (the event's "cat").
enum class Category : uint8_t { Call, Plan, Gather, Run, Kernel, Blas, Dnn, Slice, Reduce, Update, Collective, Wait };
const char* category_name(Category c);

namespace detail {
extern bool g_recording;   // this process records spans
}
// The one branch every timing site takes first.
inline bool on() { return detail::g_recording; }
int64_t now_ns();   // CLOCK_MONOTONIC, shared by every process on the machine

// One span, [start_ns, end_ns], on this process's track. `name` and `detail` are copied (cut to
// fit the fixed-size event); `bytes` < 0 means none. Nothing happens when off.
void record(Category category, std::string_view name, int64_t start_ns, int64_t end_ns,
            std::string_view detail = {}, int64_t bytes = -1);

// The track of this thread's spans within its rank's process (0, the default: the rank's own
// thread). The call engine's gradient all-reduce thread records on kCommunicationTrack.
inline constexpr uint8_t kCommunicationTrack = 1;
void set_track(uint8_t track);

// Records [construction, destruction] as one span when the trace was on at construction. `name`
// must outlive the span (a literal, or a string the caller keeps).
class Span {
 public:
  Span(Category category, std::string_view name) : category_(category), name_(name), start_(on() ? now_ns() : 0) {}
  ~Span() {
    if (start_ != 0) record(category_, name_, start_, now_ns(), detail_, bytes_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  bool active() const { return start_ != 0; }
  void set_detail(std::string detail, int64_t bytes = -1) {
    detail_ = std::move(detail);
    bytes_ = bytes;
  }

 private:
  Category category_;
  std::string_view name_;
  int64_t start_;
  std::string detail_;
  int64_t bytes_ = -1;
};

// --- Control (the master) ------------------------------------------------------------------------

// Starts a trace that will be written to `path`: checks now that the file can be created
// (UsageError naming the path otherwise), then records on this process as rank 0. A UsageError
// when a trace is running already. Workers forked later record too; a running group's workers are
// switched on by the process group (ProcessGroup::trace_workers).
void start(const std::string& path);
// SYNK_TRACE, when set and no trace runs: start(its value). Returns whether it started one (the
// process group then writes the file when it closes).
bool start_from_environment();
// Whether this process is the master of a running trace (it will write a file).
bool writing();
const std::string& path();
// Ends the trace: writes every span recorded here and handed over by workers into the file
// (temporary name, then rename). Idempotent; nothing when no trace runs. Throws Error when the
// write fails.
void stop();

// Multi-node runs (docs/multinode.md): this leader's node and its first global rank. The file
// then numbers the tracks by global rank and goes to `path.node<K>` (each leader writes its own;
// leaders on one host would otherwise overwrite each other's file).
void set_node(int node, int first_rank);

// Spans of worker `rank`, as handed over (take_spans() of that worker), kept until stop().
void add_rank_spans(int rank, std::span<const std::byte> bytes);

// --- Workers -----------------------------------------------------------------------------------

// In a freshly forked worker: forgets what the master recorded and the file it writes; keeps
// recording (or not) as the master did.
void become_worker();
// Switches recording on in a worker of a running group (an empty buffer).
void start_recording();
// Stops recording and returns this process's spans in the form add_rank_spans() reads; valid
// until the next recording starts.
std::span<const std::byte> take_spans();

}  // namespace synk::rt::trace
