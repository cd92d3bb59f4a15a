// Shared-memory segments over Boost.Interprocess (see shm.h for the naming scheme and the space
// rules).
#include "runtime/group/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/group/cleanup.h"

namespace bip = boost::interprocess;

namespace synk::rt::shm {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InternalError(fmt::format("getrandom failed: {}", std::strerror(errno)));
    }
    got += size_t(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : buf) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

uint64_t pid_namespace() {
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

namespace {
struct Session {
  pid_t pid;
  std::string prefix;
};
// Never destroyed: exit handlers that clean up run after static destructors may have. A process
// forked from one that had a session gets its own (its pid is in the name).
std::atomic<const Session*> g_session{nullptr};

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!pred(c)) return false;
  return true;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }
}  // namespace

const std::string& session_prefix() {
  const pid_t me = getpid();
  const Session* s = g_session.load(std::memory_order_acquire);
  if (s && s->pid == me) return s->prefix;
  auto* fresh = new Session{me, fmt::format("synk-{}-{}-{}-", me, pid_namespace(), random_hex(8))};
  const Session* seen = s;
  if (g_session.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel)) return fresh->prefix;
  if (seen && seen->pid == me) {
    delete fresh;   // another thread of this process won the race
    return seen->prefix;
  }
  g_session.store(fresh, std::memory_order_release);
  return fresh->prefix;
}

std::string process_prefix() { return session_prefix() + "p-"; }

std::string unique_name(const std::string& prefix, std::string_view kind) {
  return fmt::format("{}{}-{}", prefix, kind, random_hex(8));
}

std::optional<NameOwner> owner_of(std::string_view name) {
  // synk-<pid>-<pidns>-<16 hex>-...
  if (name.substr(0, 5) != "synk-") return std::nullopt;
  std::string_view rest = name.substr(5);
  std::string_view parts[3];
  for (std::string_view& part : parts) {
    size_t dash = rest.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    part = rest.substr(0, dash);
    rest = rest.substr(dash + 1);
  }
  if (!all_of(parts[0], is_digit) || parts[0].size() > 9 || !all_of(parts[1], is_digit) ||
      parts[1].size() > 19 || parts[2].size() != 16 || !all_of(parts[2], is_hex))
    return std::nullopt;
  NameOwner owner;
  owner.pid = pid_t(std::strtol(std::string(parts[0]).c_str(), nullptr, 10));
  owner.pid_namespace = std::strtoull(std::string(parts[1]).c_str(), nullptr, 10);
  return owner;
}

Space free_space() {
  Space space;
  struct statvfs vfs;
  if (::statvfs("/dev/shm", &vfs) == 0) {
    unsigned __int128 bytes = (unsigned __int128)vfs.f_bavail * vfs.f_frsize;
    space.free_bytes = bytes > (unsigned __int128)INT64_MAX ? INT64_MAX : int64_t(bytes);
  } else {
    space.free_bytes = INT64_MAX;   // cannot tell: posix_fallocate still catches a short tmpfs
  }
  if (const char* text = std::getenv("SYNK_SHM_LIMIT_BYTES"); text && *text) {
    char* end = nullptr;
    errno = 0;
    long long limit = std::strtoll(text, &end, 10);
    if (*end != '\0' || errno != 0 || limit < 0)
      throw UsageError(fmt::format("SYNK_SHM_LIMIT_BYTES must be a whole number of bytes (0 or more), got '{}'", text));
    space.limit = limit;
    space.free_bytes = std::min<int64_t>(space.free_bytes, limit);
  }
  return space;
}

namespace {
// posix_fallocate, again after a signal interrupted it; its error number (0 on success).
int reserve_pages(int fd, off_t offset, off_t bytes) {
  int rc;
  while ((rc = posix_fallocate(fd, offset, bytes)) == EINTR) {}
  return rc;
}

bool (*g_space_reclaimer)() = nullptr;
bool reclaim_space() { return g_space_reclaimer && g_space_reclaimer(); }

[[noreturn]] void throw_short(int64_t bytes, std::string_view what, const Space& space) {
  throw UsageError(fmt::format("{} needs {} bytes of shared memory, but /dev/shm has {} bytes free{}", what, bytes,
                               space.free_bytes,
                               space.limit >= 0 ? fmt::format(" (limited by SYNK_SHM_LIMIT_BYTES={})", space.limit)
                                                : std::string()));
}
}  // namespace

void check_space(int64_t bytes, std::string_view what) {
  Space space = free_space();
  if (bytes > space.free_bytes && reclaim_space()) space = free_space();
  if (bytes > space.free_bytes) throw_short(bytes, what, space);
}

Segment Segment::create(const std::string& name, size_t bytes, std::string_view what, Reserve reserve) {
  if (bytes == 0) throw InternalError("shm::Segment::create: zero-sized segment " + name);
  const std::string label = what.empty() ? "shared-memory segment /dev/shm/" + name : std::string(what);
  if (bytes > size_t(INT64_MAX)) throw_short(INT64_MAX, label, free_space());
  if (reserve == Reserve::Now) check_space(int64_t(bytes), label);
  // Before the name exists: a signal from now on removes it with everything else of ours.
  cleanup::prepare_process();
  Segment seg;
  try {
    bip::permissions perm(0600);
    bip::shared_memory_object obj(bip::create_only, name.c_str(), bip::read_write, perm);
    seg.name_ = name;
    seg.owns_name_ = true;
    seg.creator_ = getpid();
    obj.truncate(bip::offset_t(bytes));
    if (reserve == Reserve::Now) {
      // tmpfs allocates pages on first touch; reserving them now turns a full /dev/shm into an
      // error here instead of a SIGBUS at the first write.
      const int fd = obj.get_mapping_handle().handle;
      int rc = reserve_pages(fd, 0, off_t(bytes));
      if (rc == ENOSPC && reclaim_space()) rc = reserve_pages(fd, 0, off_t(bytes));
      if (rc == ENOSPC || rc == EFBIG) {
        bip::shared_memory_object::remove(name.c_str());
        seg.owns_name_ = false;
        throw_short(int64_t(bytes), label, free_space());
      }
      // Other failures (a file system without fallocate) leave the lazy behaviour.
    }
    seg.region_ = std::make_unique<bip::mapped_region>(obj, bip::read_write);
    seg.addr_ = seg.region_->get_address();
    seg.size_ = seg.region_->get_size();
  } catch (const bip::interprocess_exception& e) {
    if (seg.owns_name_) bip::shared_memory_object::remove(name.c_str());
    seg.owns_name_ = false;
    struct rlimit fsize {};
    const bool over_fsize = ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
                            bytes > fsize.rlim_cur;
    throw Error(fmt::format("cannot create shared-memory segment /dev/shm/{} of {} bytes: {}{}", name, bytes,
                            e.what(),
                            over_fsize ? fmt::format(" (the file-size limit, ulimit -f, allows {} bytes: raise it)",
                                                     uint64_t(fsize.rlim_cur))
                                       : std::string()));
  }
  return seg;
}

void Segment::reserve(size_t offset, size_t bytes, std::string_view what) const {
  const int fd = ::shm_open(("/" + name_).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return;   // the name is gone (the group is ending): the write is the caller's last
  const int rc = reserve_pages(fd, off_t(offset), off_t(bytes));
  ::close(fd);
  if (rc == ENOSPC || rc == EFBIG) throw_short(int64_t(bytes), what, free_space());
}

Segment Segment::open(const std::string& name) {
  Segment seg;
  try {
    bip::shared_memory_object obj(bip::open_only, name.c_str(), bip::read_write);
    seg.region_ = std::make_unique<bip::mapped_region>(obj, bip::read_write);
    seg.name_ = name;
    seg.addr_ = seg.region_->get_address();
    seg.size_ = seg.region_->get_size();
  } catch (const bip::interprocess_exception& e) {
    throw InternalError(
        fmt::format("cannot map shared-memory segment /dev/shm/{}: {}", name, e.what()));
  }
  return seg;
}

Segment::Segment() = default;

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    region_ = std::move(other.region_);
    addr_ = other.addr_;
    size_ = other.size_;
    owns_name_ = other.owns_name_;
    creator_ = other.creator_;
    other.addr_ = nullptr;
    other.size_ = 0;
    other.owns_name_ = false;
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::remove_name() {
  if (owns_name_ && creator_ == getpid()) bip::shared_memory_object::remove(name_.c_str());
  owns_name_ = false;
}

void Segment::reset() {
  region_.reset();
  addr_ = nullptr;
  size_ = 0;
  remove_name();
  name_.clear();
}

namespace {
void (*g_retire_listener)(const std::string&) = nullptr;
}

void set_retire_listener(void (*listener)(const std::string& name)) { g_retire_listener = listener; }
void set_space_reclaimer(bool (*reclaim)()) { g_space_reclaimer = reclaim; }

void announce_retired(const std::string& name) {
  if (g_retire_listener) g_retire_listener(name);
}

bool remove(const std::string& name) { return bip::shared_memory_object::remove(name.c_str()); }

std::vector<std::string> list(std::string_view prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return names;
  while (dirent* entry = readdir(dir)) {
    std::string_view n(entry->d_name);
    if (n.substr(0, prefix.size()) == prefix) names.emplace_back(n);
  }
  closedir(dir);
  return names;
}

size_t remove_all(std::string_view prefix) {
  size_t removed = 0;
  for (const std::string& n : list(prefix)) removed += remove(n) ? 1 : 0;
  return removed;
}

size_t remove_stale() {
  const uint64_t ns = pid_namespace();
  if (ns == 0) return 0;   // pids cannot be told apart from those of other namespaces
  const pid_t me = getpid();
  size_t removed = 0;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (dirent* entry = readdir(dir)) {
    std::optional<NameOwner> owner = owner_of(entry->d_name);
    if (!owner || owner->pid_namespace != ns || owner->pid == me || owner->pid <= 0) continue;
    struct stat st;
    if (fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
      continue;
    // Only a pid that does not exist at all: a live process (ours or anyone's) keeps its names.
    if (::kill(owner->pid, 0) == 0 || errno != ESRCH) continue;
    stale.emplace_back(entry->d_name);
  }
  closedir(dir);
  for (const std::string& n : stale) removed += remove(n) ? 1 : 0;
  return removed;
}

}  // namespace synk::rt::shm
