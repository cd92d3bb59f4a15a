// A small rendezvous key-value store in shared memory, shared by every rank of a process group
// (in the spirit of Gloo's Store): set/get/wait on string keys with byte-string values. It
// carries what workers need to learn after the fork: functions registered later (kind and
// payload), module specifications, and anything a later component needs to exchange once.
//
// Implementation: an append-only log in one segment. A set appends an entry and then publishes
// the new end with a release store, so readers never lock; the latest entry for a key wins.
// Writers serialise on a spin lock. The log never shrinks; it is sized for metadata, not data.
// Each process indexes the log as far as it has read it, so a get reads only the entries added
// since its last one (a scan of the whole log per get made every module created after fork()
// slower than the last: 2 ms at first, 7 ms after 60,000 modules).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/group/futex.h"
#include "runtime/group/shm.h"

namespace synk::rt {

class Store {
 public:
  static constexpr size_t kDefaultCapacity = size_t(64) << 20;   // virtual; tmpfs fills lazily

  Store() = default;
  static Store create(const std::string& segment_name, size_t capacity = kDefaultCapacity);
  static Store open(const std::string& segment_name);

  void set(std::string_view key, std::string_view value);
  std::optional<std::string> get(std::string_view key) const;
  // Waits until `key` exists, calling poll() between sleep slices (poll may throw to give up).
  template <class Poll>
  std::string wait(std::string_view key, const WaitPolicy& policy, Poll poll) const;

  size_t used_bytes() const;
  const std::string& segment_name() const { return segment_.name(); }
  shm::Segment& segment() { return segment_; }

 private:
  struct Header;
  Header* header() const { return reinterpret_cast<Header*>(segment_.data()); }
  WaitWord& version() const;
  shm::Segment segment_;
  // This process's index of the log: the latest entry's offset by key, for the log's first `read`
  // bytes.
  struct Index {
    std::mutex mutex;
    uint64_t read = 0;
    std::unordered_map<std::string, uint64_t> latest;
  };
  std::unique_ptr<Index> index_ = std::make_unique<Index>();
};

template <class Poll>
std::string Store::wait(std::string_view key, const WaitPolicy& policy, Poll poll) const {
  for (;;) {
    uint32_t seen = version().value.load(std::memory_order_acquire);
    if (auto v = get(key)) return *v;
    wait_until(version(), [seen](uint32_t now) { return now != seen; }, policy, poll);
  }
}

}  // namespace synk::rt
