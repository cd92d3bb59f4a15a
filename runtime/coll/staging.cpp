// The collectives' staging area, its failure-aware barrier, Pieces and exchange() (see
// coll_staging.h).
#include "runtime/coll/staging.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/group/process_group.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

CollectiveAborted::CollectiveAborted(int failed_rank)
    : Error(fmt::format("collective abandoned because rank {} failed", failed_rank)),
      failed_rank_(failed_rank) {}

namespace {
bool is_abandon_message(std::string_view message) {
  return message.rfind("collective abandoned because rank", 0) == 0;
}
}  // namespace

void throw_collective_errors(const char* what, std::span<const std::string> messages) {
  bool any = false, real_error = false;
  for (const std::string& m : messages) {
    any |= !m.empty();
    real_error |= !m.empty() && !is_abandon_message(m);
  }
  if (!any) return;
  std::vector<int> ranks;
  std::vector<std::string> parts;
  for (size_t r = 0; r < messages.size(); ++r) {
    const std::string& m = messages[r];
    if (m.empty() || (real_error && is_abandon_message(m))) continue;
    ranks.push_back(int(r));
    parts.push_back(fmt::format("rank {}: {}", r, m));
  }
  throw RankError(fmt::format("{} failed on {}", what, fmt::join(parts, "; ")), ranks);
}

// The header: the sleepers' word, the failure word, then one line per rank holding the count of
// barriers the rank has arrived at. A rank arrives with one store to its own line and waits by
// reading the others': no line is written by several ranks (a shared arrival counter moved
// between every rank at every barrier), and each rank learns of the last arrival in one
// cache-line transfer.
struct Staging::Header {
  WaitWord generation;                           // bumped to wake sleepers: a barrier completed, or a failure
  alignas(64) std::atomic<uint32_t> failed{0};   // 0, or 1 + the first rank that failed
};


namespace {
// Bit added to the generation by a failure: it changes the word (so no sleeper misses it) without
// looking like a completed barrier to anyone who checks the failure flag afterwards.
constexpr uint32_t kFailureBump = 1u << 31;

struct alignas(64) ArrivalLine {
  std::atomic<uint64_t> count{0};
};
}  // namespace

std::atomic<uint64_t>& Staging::arrivals_of(std::byte* base, int rank) {
  static_assert(sizeof(Header) == 128, "collective_staging_header_bytes counts two lines before the ranks'");
  return reinterpret_cast<ArrivalLine*>(base + sizeof(Header))[rank].count;
}

Staging::Staging(RankContext& ctx, std::byte* base, size_t bytes)
    : ctx_(ctx), base_(base), data_(base + collective_staging_header_bytes(ctx.size())),
      data_bytes_(bytes - collective_staging_header_bytes(ctx.size())), rank_(ctx.rank()), size_(ctx.size()) {
  if (bytes <= collective_staging_header_bytes(ctx.size()))
    throw InternalError("collectives: staging segment too small");
}

void Staging::reset(std::byte* base, int nranks) {
  // The segment starts zeroed, which is a valid header.
  auto* h = reinterpret_cast<Header*>(base);
  if (h->failed.load(std::memory_order_acquire) == 0) return;
  for (int r = 0; r < nranks; ++r) arrivals_of(base, r).store(0, std::memory_order_relaxed);
  h->failed.store(0, std::memory_order_seq_cst);
}

void Staging::check() const {
  uint32_t f = header()->failed.load(std::memory_order_acquire);
  if (f != 0) throw CollectiveAborted(int(f) - 1);
}

void Staging::barrier() {
  Header& h = *header();
  check();
  if (size_ == 1) return;
  const bool helper = bool(helper_poll_);
  std::optional<RankContext::Waiting> waiting;
  std::optional<trace::Span> helper_wait;
  if (helper) helper_wait.emplace(trace::Category::Wait, "wait for peers");
  else waiting.emplace(ctx_);
  WaitPolicy policy = ctx_.policy();
  if (helper) policy.spin_ns = policy.yield_ns = 0;
  const uint64_t mine = arrivals(rank_).load(std::memory_order_relaxed) + 1;
  arrivals(rank_).store(mine, std::memory_order_seq_cst);
  int next = 0;   // the first rank not seen arrived
  auto all_arrived = [&] {
    while (next < size_ && (next == rank_ || arrivals(next).load(std::memory_order_seq_cst) >= mine)) ++next;
    return next == size_;
  };
  // Sequentially consistent stores and loads: the last rank to arrive sees every other arrival at
  // once, and only it wakes sleepers (one wake-up per barrier, not one per arrival).
  if (all_arrived()) {
    h.generation.bump_if_waiting();
  } else {
    wait_for(
        h.generation, [&] { return h.failed.load(std::memory_order_relaxed) != 0 || all_arrived(); }, policy,
        [this, helper, mine] {
          if (helper) helper_poll_();
          else ctx_.poll();
          abandon_if_left(mine);
        });
  }
  check();
}

void Staging::abandon_if_left(uint64_t count) {
  for (int r = 0; r < size_; ++r) {
    // A rank's arrival is stored before its completion: one that finished and arrived is not gone.
    if (r == rank_ || !ctx_.finished(r) || arrivals(r).load(std::memory_order_seq_cst) >= count) continue;
    uint32_t expected = 0;
    header()->failed.compare_exchange_strong(expected, uint32_t(r) + 1);
    header()->generation.add(kFailureBump);
    return;
  }
}

void Staging::fail() noexcept {
  Header& h = *header();
  uint32_t expected = 0;
  h.failed.compare_exchange_strong(expected, uint32_t(rank_) + 1);
  h.generation.add(kFailureBump);
}

size_t Staging::slot_bytes(int slots, size_t cap) const {
  size_t per = data_bytes_ / (2 * size_t(std::max(slots, 1)));
  if (cap > 0) per = std::min(per, cap);
  per &= ~size_t(63);
  if (per == 0)
    throw InternalError(fmt::format("collectives: a staging area of {} bytes cannot hold {} slots",
                                    data_bytes_, 2 * slots));
  return per;
}

// ---------------------------------------------------------------------------------------------

void Pieces::add(std::byte* data, size_t bytes) {
  if (bytes == 0) return;
  ranges_.push_back(Range{data, bytes, total_});
  total_ += bytes;
}

size_t Pieces::find(size_t offset) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), offset,
                             [](size_t off, const Range& r) { return off < r.start; });
  return size_t(it - ranges_.begin()) - 1;   // ranges_ starts at stream offset 0
}

void Pieces::throw_past_end(size_t offset, size_t n) const {
  throw InternalError(fmt::format("collectives: stream range [{}, {}) past its end {}", offset,
                                  offset + n, total_));
}

void Pieces::read(size_t offset, size_t n, std::byte* dst) const {
  visit(offset, n, [dst](std::byte* p, size_t at, size_t take) { copy_bytes(dst + at, p, take); });
}

void Pieces::write(size_t offset, size_t n, const std::byte* src) const {
  visit(offset, n, [src](std::byte* p, size_t at, size_t take) { copy_bytes(p, src + at, take); });
}

std::byte* Pieces::contiguous(size_t offset, size_t n) const {
  if (n == 0 || offset + n > total_) return nullptr;
  const Range& r = ranges_[find(offset)];
  size_t within = offset - r.start;
  return within + n <= r.bytes ? r.data + within : nullptr;
}

// ---------------------------------------------------------------------------------------------

void exchange(Staging& staging, const ExchangeSpec& spec) {
  const int n = staging.size(), me = staging.rank();
  std::vector<int> slot_of(size_t(n), -1);
  std::vector<int> producers;
  uint64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    if (spec.lengths[size_t(r)] == 0) continue;
    slot_of[size_t(r)] = int(producers.size());
    producers.push_back(r);
    longest = std::max(longest, spec.lengths[size_t(r)]);
  }
  if (producers.empty()) return;
  const int slots = int(producers.size());
  const size_t chunk = staging.slot_bytes(slots, spec.chunk_cap ? spec.chunk_cap : kDefaultChunkBytes);
  const uint64_t mine = spec.lengths[size_t(me)];
  if (mine > 0 && (!spec.mine || spec.mine->total() != mine))
    throw InternalError(fmt::format("collectives: rank {} should send {} bytes but holds {}", me, mine,
                                    spec.mine ? spec.mine->total() : 0));
  for (uint64_t offset = 0; offset < longest; offset += chunk) {
    const int buffer = int(staging.round & 1);
    if (mine > offset)
      spec.mine->read(offset, size_t(std::min<uint64_t>(chunk, mine - offset)),
                      staging.slot(buffer, slot_of[size_t(me)], slots, chunk));
    staging.barrier();
    for (int s : producers) {
      uint64_t len = spec.lengths[size_t(s)];
      if (len <= offset || (spec.wants && !spec.wants(s))) continue;
      spec.consume(s, size_t(offset), size_t(std::min<uint64_t>(chunk, len - offset)),
                   staging.slot(buffer, slot_of[size_t(s)], slots, chunk));
    }
    ++staging.round;
  }
}

void broadcast_from_first(Staging& staging, std::byte* data, size_t bytes, size_t chunk_cap) {
  if (staging.size() == 1) return;
  std::vector<uint64_t> lengths(size_t(staging.size()), 0);
  lengths[0] = bytes;
  const bool root = staging.rank() == 0;
  Pieces mine, dest;
  (root ? mine : dest).add(data, bytes);
  exchange(staging, ExchangeSpec{lengths, &mine, [root](int source) { return !root && source == 0; },
                                 [&dest](int, size_t offset, size_t length, const std::byte* from) {
                                   dest.write(offset, length, from);
                                 },
                                 chunk_cap});
}

}  // namespace synk::rt
