// Named POSIX shared-memory segments (Boost.Interprocess underneath): creation with mode 0600,
// O_EXCL and an unguessable name, the memory reserved up front; mapping; removal, also of every
// segment with a given name prefix and of segments whose process is gone.
//
// Naming: every segment of one process starts with its session prefix
// "synk-<pid>-<pid namespace>-<token>-", where <token> is 64 random bits drawn once per process;
// each segment then adds its kind and 64 fresh random bits ("...-d-1f0c...", from getrandom), so
// that another local user who can list /dev/shm cannot create the next name first. Segments of a
// process group add "g<group id>-" to the master's session prefix (workers create theirs under
// it too); Data objects add "p-". Removing a prefix is how a group or a process is cleaned up
// after any failure, whoever created its segments; the pid in every name lets a later fork()
// remove what a process that no longer exists left behind (remove_stale).
//
// Space: a segment is checked against the free space of /dev/shm (statvfs, capped by
// SYNK_SHM_LIMIT_BYTES, read here and nowhere else) before it is created, and its pages are
// reserved with posix_fallocate, so a full tmpfs is a UsageError naming the bytes asked and the
// bytes free at creation, never a SIGBUS at the first write.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::interprocess { class mapped_region; }

namespace synk::rt::shm {

// `bytes` random bytes from getrandom(), as lowercase hex.
std::string random_hex(size_t bytes);

// "synk-<pid>-<pidns>-<token>-", the prefix every segment of this process carries (computed
// afresh in a process forked from one that had it).
const std::string& session_prefix();
// session_prefix() + "p-": segments owned by this process alone (Data objects).
std::string process_prefix();
// A fresh name under `prefix`: prefix + kind + "-" + 16 random hex digits.
std::string unique_name(const std::string& prefix, std::string_view kind);

// The inode number of this process's pid namespace (0 when /proc cannot tell): pids in names
// are only compared within one namespace.
uint64_t pid_namespace();
// The pid and pid namespace a segment name was made under, when it follows the naming scheme.
struct NameOwner {
  pid_t pid = 0;
  uint64_t pid_namespace = 0;
};
std::optional<NameOwner> owner_of(std::string_view name);

// Free bytes of /dev/shm as synk sees them: statvfs's f_bavail, capped by SYNK_SHM_LIMIT_BYTES
// when that is set (a UsageError when it is not a whole number of bytes).
struct Space {
  int64_t free_bytes = 0;
  int64_t limit = -1;        // SYNK_SHM_LIMIT_BYTES, or -1
};
Space free_space();
// Throws UsageError "<what> needs N bytes of shared memory, but /dev/shm has M bytes free ..."
// when `bytes` does not fit.
void check_space(int64_t bytes, std::string_view what);

// Whether a new segment's pages are reserved now (and checked against the free space) or filled
// lazily as they are written (the store: a large log of which a few KiB are ever used).
enum class Reserve { Now, Lazily };

// A mapped segment. Move-only; the destructor unmaps, and removes the name when this object
// created the segment in this process and still owns its name (see release_name()).
class Segment {
 public:
  Segment();
  // Creates a new segment of `bytes` bytes (> 0), mode 0600; fails if the name exists. `what`
  // names it in the error when shared memory is short (default: the segment's name).
  static Segment create(const std::string& name, size_t bytes, std::string_view what = {},
                        Reserve reserve = Reserve::Now);
  // Maps an existing segment, whole. Throws InternalError naming the segment if it is missing.
  static Segment open(const std::string& name);

  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  void* data() const { return addr_; }
  std::byte* bytes() const { return static_cast<std::byte*>(addr_); }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool valid() const { return addr_ != nullptr; }

  // Reserves the pages of [offset, offset + bytes) of a segment made with Reserve::Lazily before
  // they are first written, so that a full /dev/shm is a UsageError naming `what` and the bytes
  // instead of a SIGBUS at the write.
  void reserve(size_t offset, size_t bytes, std::string_view what) const;
  // Removes the name now (the mapping stays valid until destruction).
  void remove_name();
  // Forgets ownership: the destructor will not remove the name (it belongs to someone else now).
  void release_name() { owns_name_ = false; }
  void reset();   // unmaps (and removes the name if owned)

 private:
  std::string name_;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
  void* addr_ = nullptr;
  size_t size_ = 0;
  bool owns_name_ = false;
  pid_t creator_ = 0;   // a copy in a child the user forked must not remove the creator's names
};

// Segments that other processes may have mapped are announced when their owner drops them, so
// the process group can tell its workers to unmap them (see ProcessGroup). Owners call
// announce_retired(name); at most one listener (the active group) hears it.
void set_retire_listener(void (*listener)(const std::string& name));
// Called when a segment does not fit in /dev/shm: gives back what it can (the active group has its
// workers unmap retired segments) and returns whether the space is worth checking again.
void set_space_reclaimer(bool (*reclaim)());
void announce_retired(const std::string& name);

// Removes the named segment; true when it existed.
bool remove(const std::string& name);
// Names in /dev/shm starting with `prefix`.
std::vector<std::string> list(std::string_view prefix);
// Removes every segment whose name starts with `prefix`; returns how many were removed.
size_t remove_all(std::string_view prefix);
// Removes segments left by processes that no longer exist: names of this scheme, owned by this
// user, made in this pid namespace under a pid that is not alive. Returns how many.
size_t remove_stale();

}  // namespace synk::rt::shm
