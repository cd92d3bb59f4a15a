// RankContext (process_group.h): what command code sees of its rank and of the control segment:
// segment mappings, the results area, inline results and the peers' ones, the group barrier, and
// the mark of a rank that waits for its peers.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/group/control_block.h"
#include "runtime/group/process_group.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

const std::byte* RankContext::map(const std::string& name) {
  auto it = mapped_.find(name);
  if (it == mapped_.end()) it = mapped_.emplace(name, shm::Segment::open(name)).first;
  return it->second.bytes();
}

std::span<std::byte> RankContext::map_writable(const std::string& name) {
  auto it = mapped_.find(name);
  if (it == mapped_.end()) it = mapped_.emplace(name, shm::Segment::open(name)).first;
  return {it->second.bytes(), it->second.size()};
}

std::byte* RankContext::results(size_t bytes) {
  RankSlot& slot = ctl_->slot(rank_);
  slot.results_size = bytes;
  if (rank_ == 0) {
    if (local_results_.size() < bytes) local_results_.resize(bytes);
    return local_results_.data();
  }
  if (!results_segment_.valid() || results_segment_.size() < bytes) {
    size_t want = std::max({bytes, results_segment_.size() * 2, size_t(64) << 10});
    shm::Segment fresh = shm::Segment::create(shm::unique_name(group_prefix_, fmt::format("r{}", rank_)), want,
                                              fmt::format("the results of rank {}", rank_));
    results_segment_ = std::move(fresh);   // unlinks the old one: the master maps by generation
    ++results_gen_;
    std::snprintf(slot.results_name, sizeof slot.results_name, "%s", results_segment_.name().c_str());
    slot.results_gen.store(results_gen_, std::memory_order_release);
  }
  return results_segment_.bytes();
}

std::span<std::byte> RankContext::inline_results() {
  return {ctl_->slot(rank_).inline_results, kInlineResultBytes};
}

void RankContext::publish_inline() {
  ctl_->slot(rank_).inline_command.store(command_, std::memory_order_seq_cst);
  ctl_->exchange.bump_if_waiting();
}

std::span<const std::byte> RankContext::peer_inline(int rank) {
  if (rank_ == 0 || rank <= 0 || rank >= size_ || rank == rank_)
    throw InternalError(fmt::format("peer_inline({}) on rank {} of {}: a worker reads another worker's", rank, rank_,
                                    size_));
  RankSlot& peer = ctl_->slot(rank);
  auto published = [&peer, command = command_] {
    return peer.inline_command.load(std::memory_order_acquire) == command;
  };
  if (!published()) {
    Waiting waiting(*this);
    // A peer that finished the command without publishing never will (its completion is in the
    // line we poll).
    wait_for(ctl_->exchange, [&] { return published() || finished(rank); }, policy_, poll_);
  }
  if (!published() || peer.error_command.load(std::memory_order_acquire) == command_) return {};   // it failed instead
  return {peer.inline_results, kInlineResultBytes};
}

bool RankContext::finished(int rank) const {
  return ctl_->slot(rank).done_seq.load(std::memory_order_seq_cst) == seq_;
}

void RankContext::barrier() {
  Waiting waiting(*this);
  // The generation of the barrier we arrive at: it cannot complete without us.
  const uint32_t generation = ctl_->barrier.generation.value.load(std::memory_order_acquire);
  ctl_->barrier.arrive_and_wait(policy_, [this, generation] {
    poll_();
    // A rank that finished the command while the barrier is still open skipped it: it will never
    // arrive. (One that arrived cannot finish before the barrier completes.)
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && finished(r) &&
          ctl_->barrier.generation.value.load(std::memory_order_seq_cst) == generation) {
        ctl_->barrier_broken.store(1, std::memory_order_seq_cst);
        throw Error(fmt::format("rank {} ended the command without reaching the barrier", r));
      }
  });
}

RankContext::Waiting::Waiting(RankContext& ctx) : ctx_(ctx), trace_start_ns_(trace::on() ? trace::now_ns() : 0) {
  ctx_.ctl_->slot(ctx_.rank_).waiting.fetch_add(1, std::memory_order_relaxed);
}

RankContext::Waiting::~Waiting() {
  if (trace_start_ns_ != 0) trace::record(trace::Category::Wait, "wait for peers", trace_start_ns_, trace::now_ns());
  // The master's context loses its control block when a dead worker made it tear the group down.
  if (ctx_.ctl_) ctx_.ctl_->slot(ctx_.rank_).waiting.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace synk::rt
