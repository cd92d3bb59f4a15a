// The collectives' staging area: one fixed-size shared-memory segment per process group through
// which every collective moves its data in chunks, whatever the size of the variables (memory use
// never grows with the data). It holds a barrier that knows about failures (a rank that throws
// marks the collective failed, and every rank waiting in or arriving at a barrier leaves with
// CollectiveAborted instead of waiting forever), and the double-buffered slot layout the
// algorithms share: two buffers, each of `slots` slots of `slot_bytes`; round k uses buffer k % 2,
// so a rank may fill round k+1's slot while slower peers still read round k's.
//
// Also here: Pieces (a list of byte ranges read or written as one flat stream, which is how
// several variables travel in one pack without an extra copy) and exchange(), the one data-moving
// primitive of every non-reducing collective.
#pragma once

#include <atomic>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/coll/ops.h"
#include "runtime/call/descriptor.h"
#include "base/errors.h"
#include "runtime/group/futex.h"
#include "runtime/group/process_group.h"

namespace synk::rt {

class RankContext;

// Thrown on ranks that leave a collective because another rank failed; the master reports the
// rank that failed, not these.
class CollectiveAborted : public Error {
 public:
  explicit CollectiveAborted(int failed_rank);
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};
// Throws the RankError of collective `what` whose ranks reported `messages` ("" for success): it
// names the ranks that failed for a reason of their own, or, when none did, those that abandoned
// (CollectiveAborted). Returns when every rank succeeded.
void throw_collective_errors(const char* what, std::span<const std::string> messages);


class Staging {
 public:
  // `base`/`bytes`: the mapped segment (the same on every rank).
  Staging(RankContext& ctx, std::byte* base, size_t bytes);
  // After a failed collective, clears the failure flag and the ranks' barrier counts (ranks that
  // failed or abandoned passed fewer barriers than the others); the master calls it before every
  // collective, when no rank is inside one. Without a failure it writes nothing.
  static void reset(std::byte* base, int nranks);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Waits until every rank arrived. Throws CollectiveAborted if a rank failed (before or during
  // the wait), RankError on the master when a worker died or the command timed out.
  void barrier();
  // For a helper thread of the rank (runtime/coll/bucket_stream.cpp), whose rank's own thread
  // computes meanwhile. Its barriers call `poll` instead of RankContext::poll (which may tear the
  // group down from under the rank's thread), sleep at once instead of spinning on the core the
  // rank computes on, and do not mark the rank as waiting for its peers (a timeout must still
  // blame a rank whose own thread computes); the timeline keeps their wait spans.
  void set_helper_thread(std::function<void()> poll) { helper_poll_ = std::move(poll); }
  // Marks this rank failed (first failure wins) and wakes every waiter.
  void fail() noexcept;
  // Marks the collective failed by a rank that finished the command without arriving at barrier
  // number `count` (a worker that could not decode the collective or map the staging area, a
  // master whose part ended early): it will never arrive, and no rank may wait for it.
  void abandon_if_left(uint64_t count);
  // Throws CollectiveAborted if some rank failed.
  void check() const;

  // The slot layout for `slots` slots per buffer, each at most `cap` bytes (0: no cap): slot sizes
  // are multiples of 64 bytes, so chunks hold whole elements of every dtype.
  size_t slot_bytes(int slots, size_t cap) const;
  std::byte* slot(int buffer, int slot, int slots, size_t slot_bytes) const {
    return data_ + (size_t(buffer) * size_t(slots) + size_t(slot)) * slot_bytes;
  }
  size_t data_bytes() const { return data_bytes_; }

  // Rounds used so far in this collective; round k uses buffer k % 2. Shared by every phase of
  // one collective so that consecutive phases keep the double-buffering invariant.
  uint64_t round = 0;

 private:
  struct Header;
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  static std::atomic<uint64_t>& arrivals_of(std::byte* base, int rank);
  std::atomic<uint64_t>& arrivals(int rank) const { return arrivals_of(base_, rank); }
  RankContext& ctx_;
  std::function<void()> helper_poll_;   // set: a helper thread's staging
  std::byte* base_;
  std::byte* data_;
  size_t data_bytes_;
  int rank_, size_;
};

// A flat byte stream made of several ranges of memory (e.g. the variables of one pack).
class Pieces {
 public:
  void add(std::byte* data, size_t bytes);
  void add(const std::byte* data, size_t bytes) { add(const_cast<std::byte*>(data), bytes); }
  void clear() {
    ranges_.clear();
    total_ = 0;
  }
  size_t total() const { return total_; }
  bool empty() const { return total_ == 0; }
  // Copies stream bytes [offset, offset + n) out to `dst` / in from `src`.
  void read(size_t offset, size_t n, std::byte* dst) const;
  void write(size_t offset, size_t n, const std::byte* src) const;
  // The address of stream bytes [offset, offset + n) when they lie in one range, else null.
  std::byte* contiguous(size_t offset, size_t n) const;
  // Calls f(address, offset_within_request, bytes) for each range piece of [offset, offset + n).
  template <class F>
  void visit(size_t offset, size_t n, F&& f) const;

 private:
  size_t find(size_t offset) const;   // index of the range holding stream byte `offset`
  [[noreturn]] void throw_past_end(size_t offset, size_t n) const;
  struct Range {
    std::byte* data;
    size_t bytes;
    size_t start;   // offset of the range in the stream
  };
  std::vector<Range> ranges_;
  size_t total_ = 0;
};

template <class F>
void Pieces::visit(size_t offset, size_t n, F&& f) const {
  if (n == 0) return;
  if (offset + n > total_) throw_past_end(offset, n);
  auto it = ranges_.begin() + ptrdiff_t(find(offset));
  size_t done = 0;
  while (done < n) {
    size_t within = offset + done - it->start;
    size_t take = std::min(it->bytes - within, n - done);
    f(it->data + within, done, take);
    done += take;
    ++it;
  }
}

// Moves data between ranks through the staging area: rank s contributes a stream of
// `lengths[s]` bytes (its own stream through `mine`); every rank receives, for each source s
// with wants(s), the chunks of s's stream through consume(s, offset, bytes, data). Every rank must
// call it with the same lengths. One barrier per round; ranks with nothing to send take no slot.
struct ExchangeSpec {
  std::span<const uint64_t> lengths;       // per rank
  const Pieces* mine = nullptr;            // this rank's stream (lengths[rank] bytes)
  std::function<bool(int source)> wants;
  std::function<void(int source, size_t offset, size_t bytes, const std::byte* data)> consume;
  size_t chunk_cap = 0;                    // 0: the staging default
};
void exchange(Staging& staging, const ExchangeSpec& spec);
// Rank 0's `bytes` at `data` into every other rank's `data` (the same length on every rank).
void broadcast_from_first(Staging& staging, std::byte* data, size_t bytes, size_t chunk_cap = 0);

// The default cap on one slot (bytes): a round's slots stay in the last-level cache, and rounds
// are few enough that barriers cost little (1 MiB measured best of 32 KiB to 4 MiB on the
// development VM; see docs/performance/collectives.md).
inline constexpr size_t kDefaultChunkBytes = size_t(1) << 20;
// Below this many bytes (and within one slot) a reduction is done by every rank over the whole
// buffer after one barrier, instead of a reduce-scatter and an all-gather after two.
inline constexpr size_t kDefaultSmallBytes = size_t(16) << 10;

// One flat buffer of a reducing collective (a pack): `count` elements of `dtype` read from
// `input` on every rank; the result goes to `output` on the ranks that want it (null elsewhere).
// `output` may be the same memory as `input` (in place).
struct ReducePack {
  DType dtype = DType::F32;
  size_t count = 0;
  const Pieces* input = nullptr;
  const Pieces* output = nullptr;
};

struct ReduceParams {
  CollOp op = CollOp::Sum;
  size_t chunk_cap = 0;      // 0: kDefaultChunkBytes
  size_t small_bytes = 0;    // 0: kDefaultSmallBytes
  int group_size = 0;        // hierarchical: ranks per group (0: about sqrt(N))
};

}  // namespace synk::rt
