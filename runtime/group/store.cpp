// The append-only shared-memory key-value store (see store.h).
#include "runtime/group/store.h"

#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"

namespace synk::rt {

struct Store::Header {
  uint64_t magic;
  uint64_t capacity;                 // bytes of the log area
  WaitWord version;                  // bumped after every set, for wait()
  alignas(64) std::atomic<uint32_t> lock;
  alignas(64) std::atomic<uint64_t> used;   // bytes of the log in use, published with release
};

namespace {
constexpr uint64_t kStoreMagic = 0x53594e4b53544f52ull;   // "SYNKSTOR"

struct EntryHead {
  uint32_t key_len;
  uint32_t reserved;
  uint64_t value_len;
};

size_t align8(size_t n) { return (n + 7) & ~size_t(7); }
constexpr size_t log_offset() { return 256; }   // the header fits in the first 256 bytes
}  // namespace

WaitWord& Store::version() const { return header()->version; }

Store Store::create(const std::string& segment_name, size_t capacity) {
  static_assert(sizeof(Header) <= 256);
  Store store;
  // Filled lazily: a log of metadata of which a few KiB are usually written.
  store.segment_ = shm::Segment::create(segment_name, log_offset() + capacity, "the rendezvous store",
                                        shm::Reserve::Lazily);
  Header* h = new (store.segment_.data()) Header{};
  h->capacity = capacity;
  h->used.store(0, std::memory_order_relaxed);
  h->magic = kStoreMagic;
  return store;
}

Store Store::open(const std::string& segment_name) {
  Store store;
  store.segment_ = shm::Segment::open(segment_name);
  if (store.header()->magic != kStoreMagic)
    throw InternalError("shared-memory segment " + segment_name + " is not a synk store");
  return store;
}

void Store::set(std::string_view key, std::string_view value) {
  Header* h = header();
  // Writers are rare and short; a dead holder means the whole group is being torn down.
  uint32_t me = uint32_t(getpid());
  int64_t deadline = now_ns() + 10'000'000'000;
  for (uint32_t expected = 0; !h->lock.compare_exchange_weak(expected, me); expected = 0) {
    _mm_pause();
    if (now_ns() > deadline)
      throw InternalError(fmt::format("store lock held by pid {} for over 10 s", h->lock.load()));
  }
  uint64_t used = h->used.load(std::memory_order_relaxed);
  size_t need = align8(sizeof(EntryHead) + key.size() + value.size());
  if (used + need > h->capacity) {
    h->lock.store(0, std::memory_order_release);
    // What fills it: every function and module registered after fork() (their code or text).
    throw UsageError(fmt::format("the process group's store is full ({} bytes used of {}; entry '{}' needs {}): "
                                 "it keeps every function and module made after synk::fork() until close(); make "
                                 "them before fork() (the workers then inherit them), or close() and fork() again",
                                 used, h->capacity, key, need));
  }
  try {   // the log's pages are filled lazily: a full /dev/shm is an error here, not a SIGBUS below
    segment_.reserve(log_offset() + used, need, fmt::format("the process group's store (entry '{}')", key));
  } catch (...) {
    h->lock.store(0, std::memory_order_release);
    throw;
  }
  std::byte* at = segment_.bytes() + log_offset() + used;
  EntryHead head{uint32_t(key.size()), 0, value.size()};
  std::memcpy(at, &head, sizeof head);
  std::memcpy(at + sizeof head, key.data(), key.size());
  std::memcpy(at + sizeof head + key.size(), value.data(), value.size());
  h->used.store(used + need, std::memory_order_release);
  h->lock.store(0, std::memory_order_release);
  h->version.add(1);
}

std::optional<std::string> Store::get(std::string_view key) const {
  const Header* h = header();
  uint64_t used = h->used.load(std::memory_order_acquire);
  const std::byte* base = segment_.bytes() + log_offset();
  std::lock_guard lock(index_->mutex);
  for (uint64_t& off = index_->read; off < used;) {
    EntryHead head;
    std::memcpy(&head, base + off, sizeof head);
    index_->latest[std::string(reinterpret_cast<const char*>(base + off + sizeof head), head.key_len)] = off;
    off += align8(sizeof head + head.key_len + head.value_len);
  }
  auto it = index_->latest.find(std::string(key));
  if (it == index_->latest.end()) return std::nullopt;
  EntryHead head;
  std::memcpy(&head, base + it->second, sizeof head);
  return std::string(reinterpret_cast<const char*>(base + it->second + sizeof head + head.key_len), head.value_len);
}

size_t Store::used_bytes() const { return header()->used.load(std::memory_order_acquire); }

}  // namespace synk::rt
