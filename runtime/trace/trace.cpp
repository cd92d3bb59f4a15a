// The timeline recorder of trace.h: the per-process span buffer, starting and stopping, the
// workers' hand-over, and the file (Chrome trace-event JSON, written whole, then renamed).
#include "runtime/trace/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"

namespace synk::rt::trace {

namespace detail {
bool g_recording = false;
}

namespace {

// One span as it sits in a buffer and travels from a worker to the master (plain bytes: workers
// are forks of the master, but the layout is all the master relies on).
struct Event {
  int64_t start_ns;
  int64_t end_ns;
  int64_t bytes;       // < 0: none
  uint8_t category;
  uint8_t track;       // the thread's track within its rank (set_track)
  char name[62];
  char detail[64];
};
static_assert(sizeof(Event) == 152);

// About 1,200 training steps of the Fashion-MNIST CNN (some 110 spans per step and rank); the
// buffer is reserved, not touched, so unused capacity costs no memory.
constexpr size_t kCapacity = size_t(1) << 17;

struct Buffer {
  Event* events = nullptr;               // kCapacity of them, allocated at the first start
  std::atomic<size_t> next{0};           // claimed slots (may pass kCapacity: those are dropped)
  size_t count() const { return std::min(next.load(std::memory_order_relaxed), kCapacity); }
  uint64_t dropped() const {
    size_t n = next.load(std::memory_order_relaxed);
    return n > kCapacity ? n - kCapacity : 0;
  }
};
Buffer g_buffer;
thread_local uint8_t g_track = 0;

// The handed-over form: {count u64, dropped u64} then `count` Events.
struct HandOverHeader {
  uint64_t count;
  uint64_t dropped;
};
std::vector<std::byte> g_hand_over;

// The master's side of a running trace.
struct RankSpans {
  std::vector<Event> events;
  uint64_t dropped = 0;
};
struct TraceFile {
  bool active = false;
  pid_t owner = 0;                        // the process that writes the file
  std::string path;
  std::string requested;                  // as given (under mpirun the node's suffix goes on it)
  std::string directory;
  int unnamed_fd = -1;                    // O_TMPFILE in the target's directory, or -1
  int64_t origin_ns = 0;                  // time 0 of the file
  std::map<int, RankSpans> workers;       // handed-over spans, by rank
};
TraceFile g_file;

void ensure_buffer() {
  if (g_buffer.events) return;
  // malloc, not new[]: nothing is constructed, so the pages stay untouched until spans land there.
  g_buffer.events = static_cast<Event*>(std::malloc(kCapacity * sizeof(Event)));
  if (!g_buffer.events) throw Error("trace: could not reserve the span buffer");
}

// Copies `text` into a fixed field, cut at a UTF-8 character boundary.
template <size_t N>
void copy_cut(char (&field)[N], std::string_view text) {
  size_t n = std::min(text.size(), N - 1);
  if (n < text.size())
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

void append_escaped(std::string& out, const char* text) {
  for (const char* c = text; *c; ++c) {
    unsigned char u = static_cast<unsigned char>(*c);
    if (u == '"' || u == '\\') {
      out += '\\';
      out += char(u);
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", unsigned(u));
    } else {
      out += char(u);
    }
  }
}

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The file a trace at `path` replaces. A symbolic link is followed, so that the link keeps
// pointing at the new file; a path that exists must be a regular file, because the trace is
// renamed over it: a device, a FIFO or a socket (as root, /dev/null) would be replaced.
std::string trace_target(const std::string& path, const char* what) {
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* resolved = ::realpath(path.c_str(), nullptr)) {
      target = resolved;
      std::free(resolved);
    } else {   // a link to a file yet to be made
      std::string text(4096, '\0');
      const ssize_t n = ::readlink(path.c_str(), text.data(), text.size() - 1);
      if (n > 0) {
        text.resize(size_t(n));
        target = text[0] == '/' ? text : directory_of(path) + "/" + text;
      }
    }
  }
  if (::stat(target.c_str(), &st) != 0) return target;
  if (S_ISDIR(st.st_mode))
    throw UsageError(fmt::format("{}: '{}' is a directory; give the path of a file to write the trace to", what,
                                 path));
  if (!S_ISREG(st.st_mode))
    throw UsageError(fmt::format("{}: '{}' is not a regular file (a device, a FIFO or a socket); the trace "
                                 "is written whole and renamed over its path, so give the path of a regular file or "
                                 "of a new one", what, path));
  return target;
}

// Whether a file can be made in `directory` now: a named one, made and removed at once (the
// access check alone passes for root where nothing can be made, e.g. under /proc).
int can_create_in(const std::string& directory) {
  const std::string probe = fmt::format("{}/.synk-trace-probe-{}", directory, getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(probe.c_str());
  return 0;
}

int g_node = -1;          // set_node(): -1 on one node
int g_first_rank = 0;

void append_metadata(std::string& out, int rank) {
  rank += g_first_rank;
  out += fmt::format(R"({{"name":"process_name","ph":"M","ts":0,"pid":{0},"tid":0,"args":{{"name":"rank {0}{1}"}}}},)"
                     "\n",
                     rank, rank == 0 ? " (master)" : "");
  out += fmt::format(R"({{"name":"process_sort_index","ph":"M","ts":0,"pid":{0},"tid":0,"args":{{"sort_index":{0}}}}},)"
                     "\n",
                     rank);
  out += fmt::format(R"({{"name":"thread_name","ph":"M","ts":0,"pid":{0},"tid":0,"args":{{"name":"rank {0}"}}}},)"
                     "\n",
                     rank);
}

// Names the extra tracks a rank's spans use (set_track), once each.
void append_track_names(std::string& out, int rank, const std::vector<Event>& events) {
  rank += g_first_rank;
  bool named[256] = {};
  for (const Event& e : events) {
    if (e.track == 0 || named[e.track]) continue;
    named[e.track] = true;
    out += fmt::format(R"({{"name":"thread_name","ph":"M","ts":0,"pid":{0},"tid":{1},"args":{{"name":"rank {0}: {2}"}}}},)"
                       "\n",
                       rank, e.track, e.track == kCommunicationTrack ? "gradient all-reduce" : "helper");
  }
}

void append_events(std::string& out, int rank, std::vector<Event>& events, int64_t origin_ns) {
  rank += g_first_rank;
  // In time order, an enclosing span before the spans it holds: easier to read, and what the
  // B/E-minded tools expect.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  for (const Event& e : events) {
    out += R"({"name":")";
    append_escaped(out, e.name);
    out += fmt::format(R"(","cat":"{}","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":{},"tid":{})",
                       category_name(Category(e.category)), 1e-3 * double(e.start_ns - origin_ns),
                       1e-3 * double(std::max<int64_t>(e.end_ns - e.start_ns, 0)), rank, unsigned(e.track));
    if (e.detail[0] || e.bytes >= 0) {
      out += R"(,"args":{)";
      if (e.detail[0]) {
        out += R"("detail":")";
        append_escaped(out, e.detail);
        out += '"';
      }
      if (e.bytes >= 0) out += fmt::format(R"({}"bytes":{})", e.detail[0] ? "," : "", e.bytes);
      out += '}';
    }
    out += "},\n";
  }
}

std::string render(std::vector<Event> master, std::map<int, RankSpans>& workers, uint64_t master_dropped,
                   int64_t origin_ns) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\n\"traceEvents\":[\n";
  append_metadata(out, 0);
  append_track_names(out, 0, master);
  append_events(out, 0, master, origin_ns);
  for (auto& [rank, spans] : workers) {
    append_metadata(out, rank);
    append_track_names(out, rank, spans.events);
    append_events(out, rank, spans.events, origin_ns);
  }
  // The last event has no comma after it: a closing instant marks the end of the trace.
  // Ranks by their global number: this node's master is rank g_first_rank.
  out += fmt::format(R"({{"name":"trace end","cat":"trace","ph":"i","s":"g","ts":{:.3f},"pid":{},"tid":0}})",
                     1e-3 * double(now_ns() - origin_ns), g_first_rank);
  out += "\n],\n\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\",\"dropped_spans\":{";
  out += fmt::format("\"{}\":{}", g_first_rank, master_dropped);
  for (auto& [rank, spans] : workers) out += fmt::format(",\"{}\":{}", rank + g_first_rank, spans.dropped);
  out += "}}}\n";
  return out;
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Puts `text` at `file.path` whole: through the unnamed file when there is one (linked under a
// temporary name, then renamed over the path), else through a named temporary file.
void publish(TraceFile& file, const std::string& text) {
  // Under mpirun each node writes PATH.node<K>, known only once the cluster runs: the checks of
  // trace_start (links followed, no device, FIFO or socket replaced) apply to that path here.
  if (g_node >= 0) file.path = trace_target(fmt::format("{}.node{}", file.requested, g_node), "trace");
  const std::string temporary = fmt::format("{}.tmp-{}", file.path, getpid());
  bool linked = false;
  if (file.unnamed_fd >= 0 && write_all(file.unnamed_fd, text)) {
    std::string proc = fmt::format("/proc/self/fd/{}", file.unnamed_fd);
    linked = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temporary.c_str(), AT_SYMLINK_FOLLOW) == 0;
  }
  if (!linked) {
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    bool ok = fd >= 0 && write_all(fd, text);
    int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) {
      ::unlink(temporary.c_str());
      throw Error(fmt::format("trace: could not write '{}': {}", temporary, std::strerror(err)));
    }
  }
  if (::rename(temporary.c_str(), file.path.c_str()) != 0) {
    int err = errno;
    ::unlink(temporary.c_str());
    throw Error(fmt::format("trace: could not rename '{}' to '{}': {}", temporary, file.path, std::strerror(err)));
  }
}

void close_unnamed(TraceFile& file) {
  if (file.unnamed_fd >= 0) ::close(file.unnamed_fd);
  file.unnamed_fd = -1;
}

}  // namespace

const char* category_name(Category c) {
  switch (c) {
    case Category::Call: return "call";
    case Category::Plan: return "plan";
    case Category::Gather: return "gather";
    case Category::Run: return "run";
    case Category::Kernel: return "kernel";
    case Category::Blas: return "blas";
    case Category::Dnn: return "dnn";
    case Category::Slice: return "slice";
    case Category::Reduce: return "reduce";
    case Category::Update: return "update";
    case Category::Collective: return "collective";
    case Category::Wait: return "wait";
  }
  return "other";
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void set_track(uint8_t track) { g_track = track; }

void record(Category category, std::string_view name, int64_t start_ns, int64_t end_ns, std::string_view detail,
            int64_t bytes) {
  if (!detail::g_recording) return;
  size_t slot = g_buffer.next.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kCapacity) return;   // counted as dropped
  Event& e = g_buffer.events[slot];
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.bytes = bytes;
  e.category = uint8_t(category);
  e.track = g_track;
  copy_cut(e.name, name);
  copy_cut(e.detail, detail);
}

namespace {

// start(), its messages beginning with `what` (the API call, or the variable the path came from).
void start_as(const std::string& path, const char* what) {
  if (g_file.active)
    throw UsageError(fmt::format("{}: a trace to '{}' is running already; call trace_stop() first", what,
                                 g_file.path));
  if (path.empty()) throw UsageError(fmt::format("{}: the path of the trace file is empty", what));
  TraceFile file;
  file.requested = path;
  file.path = trace_target(path, what);
  file.directory = directory_of(file.path);
  // An unnamed file in the target's directory proves it writable now and vanishes if the program
  // dies before stop(). File systems without O_TMPFILE make and remove a named file instead.
  file.unnamed_fd = ::open(file.directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (file.unnamed_fd < 0) {
    int err = errno;
    bool unsupported = err == EOPNOTSUPP || err == EISDIR || err == EINVAL;
    if (unsupported) err = can_create_in(file.directory);
    if (err != 0)
      throw UsageError(fmt::format("{}: cannot write the trace file '{}': {}", what, path, std::strerror(err)));
  }
  try {
    ensure_buffer();
  } catch (...) {
    close_unnamed(file);
    throw;
  }
  g_buffer.next.store(0, std::memory_order_relaxed);
  file.active = true;
  file.owner = getpid();
  file.origin_ns = now_ns();
  g_file = std::move(file);
  detail::g_recording = true;
}

}  // namespace

void start(const std::string& path) { start_as(path, "trace_start"); }

bool start_from_environment() {
  const char* path = std::getenv("SYNK_TRACE");
  if (!path || !*path || g_file.active) return false;
  try {
    start_as(path, "SYNK_TRACE");
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{} (set SYNK_TRACE to a file that can be written, or unset it)", e.what()));
  }
  return true;
}

bool writing() { return g_file.active; }
const std::string& path() { return g_file.path; }

void set_node(int node, int first_rank) {
  g_node = node;
  g_first_rank = first_rank;
}

void add_rank_spans(int rank, std::span<const std::byte> bytes) {
  if (!g_file.active) return;
  RankSpans& spans = g_file.workers[rank];   // the rank gets its track even with no span
  if (bytes.size() < sizeof(HandOverHeader)) return;
  HandOverHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  const size_t available = (bytes.size() - sizeof header) / sizeof(Event);
  if (header.count > available)
    throw InternalError(fmt::format("trace: rank {} handed over {} spans in room for {}", rank, header.count, available));
  const size_t old = spans.events.size();
  spans.events.resize(old + header.count);
  if (header.count) std::memcpy(spans.events.data() + old, bytes.data() + sizeof header, header.count * sizeof(Event));
  spans.dropped += header.dropped;
}

void stop() {
  if (!g_file.active) return;
  detail::g_recording = false;
  TraceFile file = std::move(g_file);
  g_file = TraceFile{};
  std::vector<Event> mine(g_buffer.events, g_buffer.events + g_buffer.count());
  const uint64_t dropped = g_buffer.dropped();
  g_buffer.next.store(0, std::memory_order_relaxed);
  if (file.owner != getpid()) {   // a copy in a process the user forked: not ours to write
    close_unnamed(file);
    return;
  }
  uint64_t dropped_everywhere = dropped;
  for (const auto& [rank, spans] : file.workers) dropped_everywhere += spans.dropped;
  if (dropped_everywhere > 0)
    std::fprintf(stderr, "synk: trace: %llu spans did not fit in the ranks' buffers and are missing from '%s'; "
                 "trace a shorter part of the program (trace_start / trace_stop)\n",
                 static_cast<unsigned long long>(dropped_everywhere), file.path.c_str());
  try {
    publish(file, render(std::move(mine), file.workers, dropped, file.origin_ns));
  } catch (...) {
    close_unnamed(file);
    throw;
  }
  close_unnamed(file);
}

void become_worker() {
  close_unnamed(g_file);
  g_file = TraceFile{};
  g_hand_over.clear();
  g_buffer.next.store(0, std::memory_order_relaxed);
}

void start_recording() {
  ensure_buffer();
  g_buffer.next.store(0, std::memory_order_relaxed);
  detail::g_recording = true;
}

std::span<const std::byte> take_spans() {
  detail::g_recording = false;
  if (!g_buffer.events) {
    g_hand_over.assign(sizeof(HandOverHeader), std::byte{0});
    return g_hand_over;
  }
  HandOverHeader header{g_buffer.count(), g_buffer.dropped()};
  g_hand_over.resize(sizeof header + header.count * sizeof(Event));
  std::memcpy(g_hand_over.data(), &header, sizeof header);
  if (header.count) std::memcpy(g_hand_over.data() + sizeof header, g_buffer.events, header.count * sizeof(Event));
  g_buffer.next.store(0, std::memory_order_relaxed);
  return g_hand_over;
}

}  // namespace synk::rt::trace
