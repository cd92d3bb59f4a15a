// The helper thread of the overlapped gradient all-reduce (runtime/call/gradient_stream.h): one
// per rank and streamed call. The update is cut into buckets of bucket_bytes from its end (the
// backward pass finishes the last layers first); the thread takes them in that fixed order, the
// same on every rank, waits until the rank's own thread has reported all of a bucket's bytes
// final, and averages it in place through rsag over the collectives' staging area. rsag reduces
// element i as x_0[i] + ... + x_{N-1}[i] whatever the chunking, so the buckets give the bits of one
// all_reduce of the whole variable. Across nodes the leader's helper then reduces the bucket
// with the other leaders (MPI from this thread: the main thread makes no MPI call meanwhile) and
// hands it back to its node's ranks, as the one-buffer all_reduce across nodes does.
//
// Ending: the rank's thread hands over every bucket on every way out (finish, or abandon after a
// failure, whose buckets then carry whatever the update held), so the peers' helpers never wait
// for a bucket that will not come. A helper stops early only when the group is being lost: the
// watchdog's cancellation request, a peer that marked the staging area failed, or the group's
// teardown, which joins the helper before it unmaps the segment (register_teardown_prologue).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/cancel.h"
#include "base/errors.h"
#include "runtime/call/gradient_stream.h"
#include "runtime/coll/across_nodes.h"
#include "runtime/coll/bucket_stream.h"
#include "runtime/coll/ops.h"
#include "runtime/coll/rsag.h"
#include "runtime/coll/staging.h"
#include "runtime/group/process_group.h"
#include "runtime/node/cluster.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

namespace {

class Stopped : public Error {
 public:
  Stopped() : Error("the gradient all-reduce stopped: the process group is being shut down") {}
};

class BucketStream;
BucketStream* g_active = nullptr;   // this process's running helper (at most one call at a time)

class BucketStream final : public GradientStream {
 public:
  BucketStream(RankContext& ctx, const StreamPlan& plan, std::span<std::byte> segment)
      : ctx_(ctx), staging_(ctx, segment.data(), segment.size()), dtype_(plan.dtype), total_(plan.total_bytes),
        weighted_(!plan.rank_scale.empty()),
        across_(plan.across_nodes != 0), share_(weighted_ ? plan.rank_scale.at(size_t(ctx.rank())) : 1.0) {
    const size_t elem = dtype_size(dtype_);
    size_t bucket = std::max<size_t>(size_t(plan.bucket_bytes) / elem, 1) * elem;
    for (size_t hi = total_; hi > 0;) {
      const size_t lo = hi > bucket ? hi - bucket : 0;
      buckets_.push_back(Bucket{lo, hi});
      hi = lo;
    }
    ready_ = std::make_unique<std::atomic<size_t>[]>(buckets_.size());
    for (size_t k = 0; k < buckets_.size(); ++k) ready_[k].store(0, std::memory_order_relaxed);
    bucket_bytes_ = bucket;
    // The helper shares its rank's core: spinning in a barrier would take the time the rank
    // computes in (measured: ~10 ms per ResNet-50 step of 1 MiB buckets at the 50 us default).
    const bool master = ctx.rank() == 0;
    staging_.set_helper_thread([this, master] {
      if (stop_.load(std::memory_order_acquire) || cancellation_requested()) throw Stopped();
      if (!master) ctx_.poll();   // a worker's poll only exits when the master is gone
    });
    g_active = this;
    thread_ = std::thread([this] { run(); });
  }

  ~BucketStream() override {
    abandon();
    if (g_active == this) g_active = nullptr;
  }

  void begin(std::byte* data, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes == total_) {
      data_ = data;
    } else {   // not the shape the master planned: the call fails on this rank; the buckets still go
      scratch_.assign(total_, std::byte{0});
      data_ = scratch_.data();
    }
    begun_ = true;
  }

  void ready(size_t offset, size_t bytes) override {
    if (bytes == 0 || offset >= total_) return;
    const size_t end = std::min(total_, offset + bytes);
    bool completed = false;
    // Bucket k holds [total - (k+1) b, total - k b).
    for (size_t k = (total_ - end) / bucket_bytes_; k < buckets_.size(); ++k) {
      const Bucket& b = buckets_[k];
      if (b.hi <= offset) break;
      const size_t overlap = std::min(b.hi, end) - std::max(b.lo, offset);
      if (overlap == 0) continue;
      if (ready_[k].fetch_add(overlap, std::memory_order_acq_rel) + overlap == b.hi - b.lo) completed = true;
    }
    if (completed) wake();
  }

  void finish() override {
    hand_over_all();
    const bool master = ctx_.rank() == 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (cv_done_.wait_for(lock, std::chrono::milliseconds(2), [this] { return done_; })) break;
      }
      // The rank's own checks, as in any wait for peers: a dead worker or a timeout ends the group
      // on the master (whose teardown stops this helper first); a worker exits when the master died.
      if (master) cancellation_point();
      ctx_.poll();
    }
    join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  void abandon() noexcept override {
    hand_over_all();
    join();
  }

  bool begun() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return begun_;
  }

  // The group's teardown (the master's thread): the helper must be gone before the segment is.
  void stop() noexcept {
    stop_.store(true, std::memory_order_release);
    wake();
    join();
  }

 private:
  struct Bucket {
    size_t lo, hi;
  };

  void hand_over_all() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!begun_) {
        scratch_.assign(total_, std::byte{0});
        data_ = scratch_.data();
        begun_ = true;
      }
      all_ready_ = true;
    }
    cv_ready_.notify_all();
  }

  void wake() {
    { std::lock_guard<std::mutex> lock(mutex_); }
    cv_ready_.notify_all();
  }

  void join() noexcept {
    if (thread_.joinable()) thread_.join();
  }

  // Waits until bucket k may be reduced; returns where the update lives.
  std::byte* wait_for(size_t k) {
    std::unique_lock<std::mutex> lock(mutex_);
    const size_t size = buckets_[k].hi - buckets_[k].lo;
    cv_ready_.wait(lock, [&] {
      return stop_.load(std::memory_order_acquire) || all_ready_ ||
             (begun_ && ready_[k].load(std::memory_order_acquire) >= size);
    });
    if (stop_.load(std::memory_order_acquire)) throw Stopped();
    return data_;
  }

  // The one-buffer step's arithmetic on one bucket, element by element: unequal rows are scaled
  // by the rank's share and summed (all_reduce_weighted), equal ones averaged (all_reduce avg);
  // across nodes, the node's result is then reduced between the leaders (a sum, and for the
  // average a division by the node count, as all_reduce_values_across_nodes does) and goes back
  // to the node's ranks. Across nodes only the leader needs the node's result.
  void reduce_bucket(std::byte* bucket, size_t count) {
    const size_t bytes = count * dtype_size(dtype_);
    const bool local = staging_.size() > 1, leader = ctx_.rank() == 0;
    if (weighted_) scale_values(dtype_, bucket, count, share_);
    Pieces values;
    values.add(bucket, bytes);
    if (local) {
      const ReducePack pack{dtype_, count, &values, across_ && !leader ? nullptr : &values};
      rsag_reduce(staging_, std::span(&pack, 1), ReduceParams{weighted_ ? CollOp::Sum : CollOp::Avg});
    }
    if (!across_) return;
    if (leader) {
      trace::Span span(trace::Category::Collective, "bucket across nodes");
      if (span.active()) span.set_detail(fmt::format("{} bytes between the nodes' leaders", bytes), int64_t(bytes));
      cross_node_off_main("the overlapped gradient all-reduce", [&] {
        reduce_over_nodes(bucket, count, dtype_, CollOp::Sum);
      }, &poll_off_main);
      if (!weighted_) scale_values(dtype_, bucket, count, 1.0 / cluster_nodes());
    }
    broadcast_from_first(staging_, bucket, bytes);   // the leader's bucket to the node's ranks
  }

  // While a leader's helper waits for the other node: the group is being torn down, or a worker
  // died (the main thread ends the job and names the rank).
  static void poll_off_main() {
    if (cancellation_requested() || (g_active && g_active->stop_.load(std::memory_order_acquire))) throw Stopped();
  }

  void run() noexcept {
    trace::set_track(trace::kCommunicationTrack);
    try {
      const size_t elem = dtype_size(dtype_);
      for (size_t k = 0; k < buckets_.size(); ++k) {
        std::byte* data = wait_for(k);
        const Bucket& b = buckets_[k];
        trace::Span span(trace::Category::Collective, "gradient bucket");
        if (span.active())
          span.set_detail(fmt::format("bucket {} of {}, bytes [{}, {})", k + 1, buckets_.size(), b.lo, b.hi),
                          int64_t(b.hi - b.lo));
        reduce_bucket(data + b.lo, (b.hi - b.lo) / elem);
      }
    } catch (const CollectiveAborted&) {
      error_ = std::current_exception();   // a peer failed the staging area: it reports why
    } catch (const Stopped&) {
      error_ = std::current_exception();
    } catch (...) {
      error_ = std::current_exception();
      staging_.fail();   // no peer may wait for this rank's buckets
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_done_.notify_all();
  }

  RankContext& ctx_;
  Staging staging_;
  DType dtype_;
  size_t total_ = 0, bucket_bytes_ = 1;
  bool weighted_ = false;   // the plan's rank_scale: scale each bucket by share_, then sum
  bool across_ = false;     // the plan's across_nodes
  double share_ = 1.0;
  std::vector<Bucket> buckets_;                   // from the end of the update
  std::unique_ptr<std::atomic<size_t>[]> ready_;  // per bucket: bytes reported final
  mutable std::mutex mutex_;
  std::condition_variable cv_ready_, cv_done_;
  bool begun_ = false, all_ready_ = false, done_ = false;
  std::byte* data_ = nullptr;
  std::vector<std::byte> scratch_;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

std::string prepare(ProcessGroup& group) {
  shm::Segment& staging = group.collective_staging();
  Staging::reset(staging.bytes(), group.size());
  return staging.name();
}

std::unique_ptr<GradientStream> start(RankContext& ctx, const StreamPlan& plan) {
  return std::make_unique<BucketStream>(ctx, plan, ctx.map_writable(plan.staging));
}

void stop_active() {
  if (g_active) g_active->stop();
}

}  // namespace

bool register_bucket_stream() {
  register_stream_hooks(StreamHooks{&prepare, &start});
  register_teardown_prologue(&stop_active);
  return true;
}

}  // namespace synk::rt
