// Named POSIX shared-memory segments (Boost.Interprocess underneath): creation with mode 0600 and
// an unguessable name, mapping, removal, and removal of every segment with a given name prefix.
//
// Naming: every segment of one master process starts with "synk-<token>-", where <token> is 128
// random bits in hex drawn once per process (getrandom). Segments that belong to a process group
// add "g<group id>-", those owned by one process (Data objects) add "p<pid>-". Removing a prefix is
// how a group is cleaned up after any failure, whoever created its segments.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace boost::interprocess { class mapped_region; }

namespace synk::rt::shm {

// `bytes` random bytes from getrandom(), as lowercase hex.
std::string random_hex(size_t bytes);

// "synk-<token>-", the prefix every segment of this master process carries.
const std::string& session_prefix();
// "synk-<token>-p<pid>-": segments owned by this process alone (Data objects).
std::string process_prefix();
// A fresh name under `prefix`: prefix + kind + a counter unique in this process.
std::string unique_name(const std::string& prefix, std::string_view kind);

// A mapped segment. Move-only; the destructor unmaps, and removes the name when this object
// created the segment and still owns its name (see release_name()), in the process that created
// it only: a copy inherited by a forked child (a process the user forked with fork() or Python's
// os.fork(), which may run its destructors at exit) never removes the parent's names.
class Segment {
 public:
  Segment();
  // Creates a new segment of `bytes` bytes (> 0), mode 0600; fails if the name exists.
  static Segment create(const std::string& name, size_t bytes);
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
  pid_t owner_pid_ = 0;   // the process that created the segment
};

// Segments that other processes may have mapped are announced when their owner drops them, so
// the process group can tell its workers to unmap them (see ProcessGroup). Owners call
// announce_retired(name); at most one listener (the active group) hears it.
void set_retire_listener(void (*listener)(const std::string& name));
void announce_retired(const std::string& name);

// Removes the named segment; true when it existed.
bool remove(const std::string& name);
// Names in /dev/shm starting with `prefix`.
std::vector<std::string> list(std::string_view prefix);
// Removes every segment whose name starts with `prefix`; returns how many were removed.
size_t remove_all(std::string_view prefix);

}  // namespace synk::rt::shm
