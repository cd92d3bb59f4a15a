// The MPI transport between node leaders (runtime/node/cluster.h), built as the plugin
// libsynk_mpi.so and loaded with dlopen only under mpirun, so that programs started without MPI
// never load an MPI library. It uses nothing of synk but the Cluster interface (no synk library
// is linked in: the host program's copies are the only ones).
//
// Every wait is a non-blocking MPI operation tested in a loop that calls Cluster::poll between
// tests (liveness of the local workers, Ctrl-C, the cross-node timeout): a blocking MPI call
// could neither notice a dead worker nor be interrupted. Messages longer than INT_MAX elements
// travel in pieces.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/node/cluster.h"

namespace synk::rt {
namespace {

std::string mpi_error(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return std::string(what) + " failed: " + std::string(text, size_t(len));
}

void check(const char* what, int code) {
  if (code != MPI_SUCCESS) throw std::runtime_error(mpi_error(what, code));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8:
    case DType::Bool: return MPI_UINT8_T;
    default: throw std::runtime_error("the MPI transport cannot reduce 16-bit floating-point values");
  }
}

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 1;
  }
}

MPI_Op mpi_op(NodeOp op) {
  switch (op) {
    case NodeOp::Sum: return MPI_SUM;
    case NodeOp::Prod: return MPI_PROD;
    case NodeOp::Max: return MPI_MAX;
    case NodeOp::Min: return MPI_MIN;
  }
  throw std::runtime_error("the MPI transport reduces with sum, prod, max or min only");
}

class MpiCluster final : public Cluster {
 public:
  MpiCluster() : watchdog_([this] { watch(); }) {
    // Serialized: the overlapped gradient all-reduce calls MPI from its helper thread while the
    // main thread computes (never both at once). OpenMPI takes no locks below THREAD_MULTIPLE.
    check("MPI_Init_thread", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided_));
    // Errors come back as codes (then exceptions) instead of ending the process silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    // synk's own communicator: a program that also uses MPI (on MPI_COMM_WORLD) can neither
    // receive synk's point-to-point messages (MPI_ANY_TAG) nor interleave its collectives with
    // synk's. The same nodes, in the same order.
    check("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check("MPI_Comm_rank", MPI_Comm_rank(comm_, &node_));
    check("MPI_Comm_size", MPI_Comm_size(comm_, &nodes_));
    heard_.assign(size_t(nodes_), false);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS) host_.assign(name, size_t(len));
  }
  ~MpiCluster() override {
    stop_.store(true);
    watchdog_.join();
    finalize();
  }

  int node() const override { return node_; }
  bool serialized_threads() const override { return provided_ >= MPI_THREAD_SERIALIZED; }
  int nodes() const override { return nodes_; }
  std::string host() const override { return host_; }

  // One round for the usual small messages (a call's description or its results): every node
  // sends a fixed slot of its length and first kSlot bytes; only when some node's message is
  // longer does a second round carry the rest.
  std::vector<std::string> all_gather(const std::string& mine) override {
    ++exchanges_;
    constexpr size_t kSlot = sizeof(SlotBuffer::head);
    using Slot = SlotBuffer;
    fill_slot(mine);
    const uint64_t at = slot_out_.exchange;   // all_gather_equal counts one more
    slots_.resize(static_cast<size_t>(nodes_));
    static_assert(sizeof(Slot) == sizeof(slot_out_));
    all_gather_equal(&slot_out_, sizeof(Slot), slots_.data());
    for (int n = 0; n < nodes_; ++n)
      if (slots_[size_t(n)].length == kClosing)
        throw std::runtime_error("node " + std::to_string(n) + " called synk::close() while this leader was still "
                                 "making calls (every leader must make the same calls and collectives, in the same "
                                 "order, before it closes)");
    for (int n = 0; n < nodes_; ++n) check_in_step(slots_[size_t(n)], n, at);
    std::vector<std::string> all(static_cast<size_t>(nodes_));
    std::vector<int64_t> rest(static_cast<size_t>(nodes_));
    bool longer = false;
    for (int n = 0; n < nodes_; ++n) {
      const auto& slot = slots_[size_t(n)];
      all[size_t(n)].assign(slot.head, size_t(std::min<int64_t>(slot.length, int64_t(kSlot))));
      rest[size_t(n)] = std::max<int64_t>(0, slot.length - int64_t(kSlot));
      longer |= rest[size_t(n)] > 0;
    }
    if (!longer) return all;
    // The rest of the long messages: one broadcast per node that has more.
    for (int n = 0; n < nodes_; ++n) {
      if (!rest[size_t(n)]) continue;
      std::string tail = n == node_ ? mine.substr(kSlot) : std::string(size_t(rest[size_t(n)]), '\0');
      broadcast_bytes(tail.data(), tail.size(), n);
      all[size_t(n)] += tail;
    }
    return all;
  }

  // Small exchanges go point to point, every node sending to every other at once (one round),
  // while each message fits OpenMPI's eager limit over TCP (64 KiB with its header): for 1 KiB
  // between 2 leaders that took 0.7 us less than MPI_Iallgather (libnbc), and on 3 and 4
  // oversubscribed leaders no more. Larger or wider ones use the collective.
  void all_gather_equal(const void* mine, size_t bytes, void* all) override {
    ++exchanges_;
    char* out = static_cast<char*>(all);
    std::memcpy(out + size_t(node_) * bytes, mine, bytes);
    if (nodes_ == 1) return;
    if (!direct_exchange(bytes)) {
      MPI_Request req;
      check("MPI_Iallgather", MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, int(bytes), MPI_BYTE,
                                             comm_, &req));
      wait(req);
      return;
    }
    exchange_with_peers(kExchangeTag, [&](int n) { return Buffer{out + size_t(n) * bytes, bytes}; },
                        [&](int) { return Buffer{const_cast<void*>(mine), bytes}; });
  }

  // Between 2 leaders over TCP (docs/performance/collectives.md, "Point-to-point exchanges"), one
  // exchange and a local reduction took 10.3 us for 4 KiB where MPI_Allreduce took 18.3 and
  // MPI_Iallreduce 15.7, and 25 us for 60 KiB against 30 and 31; up to 2 KiB they tie, and the
  // exchange is kept there too, since it sees a peer that passed another length (MPI_Allreduce
  // lets one of the two compute on). Past the eager limit (64 KiB) the exchange took 1.7x. On 3
  // leaders (oversubscribed, the only wider case measurable here) MPI's collectives did as well
  // or better.
  bool gather_beats_all_reduce(size_t bytes) const override { return nodes_ == 2 && direct_exchange(bytes); }

  // Up to 16 nodes the root sends its length and first bytes (a slot, as all_gather's) to every
  // node directly: one round where the length's and the bytes' MPI_Ibcast took two. Only a longer
  // message needs a second round, for its tail.
  void broadcast(std::string& bytes, int root) override {
    ++exchanges_;
    constexpr size_t kSlot = sizeof(SlotBuffer::head);
    if (nodes_ > kDirectMaxNodes) {
      int64_t len = int64_t(bytes.size());
      MPI_Request req;
      check("MPI_Ibcast", MPI_Ibcast(&len, 1, MPI_INT64_T, root, comm_, &req));
      wait(req);
      bytes.resize(size_t(len));
      broadcast_bytes(bytes.data(), bytes.size(), root);
      return;
    }
    requests_.clear();
    peers_.clear();
    SlotBuffer& slot = slot_out_;
    if (node_ == root) {
      const int used = int(fill_slot(bytes));
      for (int n = 0; n < nodes_; ++n)
        if (n != root)
          check("MPI_Isend", MPI_Isend(&slot, used, MPI_BYTE, n, kBroadcastTag, comm_,
                                       &requests_.emplace_back()));
      wait_all(0);
    } else {
      check("MPI_Irecv", MPI_Irecv(&slot, int(sizeof(SlotBuffer)), MPI_BYTE, root, kBroadcastTag, comm_,
                                   &requests_.emplace_back()));
      wait_all(0);
      if (slot.length < 0) throw std::runtime_error("broadcast: node " + std::to_string(root) + " sent a bad length");
      check_in_step(slot, root, exchanges_);
      bytes.assign(slot.head, std::min(size_t(slot.length), kSlot));
    }
    const size_t length = size_t(slot.length);
    if (length <= kSlot) return;
    bytes.resize(length);
    broadcast_bytes(bytes.data() + kSlot, length - kSlot, root);
  }

  // The lengths by one broadcast, then point to point from the root (a scatterv would need the
  // parts in one buffer, and its int counts and offsets cap it at 2 GiB).
  std::string scatter(const std::vector<std::string>& parts, int root) override {
    ++exchanges_;
    std::vector<int64_t> lengths(size_t(nodes_), 0);
    if (node_ == root)
      for (int n = 0; n < nodes_; ++n) lengths[size_t(n)] = int64_t(parts.at(size_t(n)).size());
    MPI_Request req;
    check("MPI_Ibcast", MPI_Ibcast(lengths.data(), nodes_, MPI_INT64_T, root, comm_, &req));
    wait(req);
    const size_t piece = size_t(INT_MAX) / 2;
    if (node_ != root) {
      std::string mine(size_t(lengths[size_t(node_)]), '\0');
      std::vector<MPI_Request> reqs;
      for (size_t at = 0; at < mine.size(); at += piece)
        check("MPI_Irecv", MPI_Irecv(mine.data() + at, int(std::min(piece, mine.size() - at)), MPI_BYTE, root, kScatterTag,
                                     comm_, &reqs.emplace_back()));
      for (MPI_Request& r : reqs) wait(r);
      return mine;
    }
    std::vector<MPI_Request> reqs;
    for (int n = 0; n < nodes_; ++n) {
      if (n == root) continue;
      const std::string& part = parts[size_t(n)];
      for (size_t at = 0; at < part.size(); at += piece)
        check("MPI_Isend", MPI_Isend(part.data() + at, int(std::min(piece, part.size() - at)), MPI_BYTE, n, kScatterTag,
                                     comm_, &reqs.emplace_back()));
    }
    for (MPI_Request& r : reqs) wait(r);
    return parts[size_t(root)];
  }

  // Every node's part this node reduces, and then every reduced part to every node: point to
  // point, all at once (the direct exchange's limit of 16 nodes), the arithmetic being the
  // caller's, in node order.
  bool splits_over_nodes(size_t bytes) const override {
    return nodes_ >= 3 && nodes_ <= kDirectMaxNodes && bytes / size_t(nodes_) + 64 <= size_t(INT_MAX);
  }

  void exchange_parts(const void* data, std::span<const size_t> bounds, void* gathered) override {
    ++exchanges_;
    const char* in = static_cast<const char*>(data);
    char* out = static_cast<char*>(gathered);
    const size_t mine = bounds[size_t(node_) + 1] - bounds[size_t(node_)];
    std::memcpy(out + size_t(node_) * mine, in + bounds[size_t(node_)], mine);
    exchange_with_peers(kPartsTag, [&](int n) { return Buffer{out + size_t(n) * mine, mine}; },
                        [&](int n) { return part(const_cast<char*>(in), bounds, n); });
  }

  void all_gather_parts(void* data, std::span<const size_t> bounds) override {
    ++exchanges_;
    char* bytes = static_cast<char*>(data);
    exchange_with_peers(kGatherPartsTag, [&](int n) { return part(bytes, bounds, n); },
                        [&](int) { return part(bytes, bounds, node_); });
  }

  // Blocking: OpenMPI's MPI_Iallreduce (libnbc) reached half the bandwidth of MPI_Allreduce over
  // TCP here (bench/multinode_bench, 2 x 1 ranks, 4-64 MiB), and took 1.7x its time for 1 KiB
  // (0.57x MPI's bandwidth against 0.92x blocking), so those go through the tuned blocking call,
  // and the watchdog thread enforces the deadline meanwhile. From 4 to 64 KiB the non-blocking one
  // measured 1.15-1.3x MPI_Allreduce (blocking: 0.96-0.98x), and polls (liveness, abort notices
  // and Ctrl-C are checked while waiting).
  void all_reduce(void* data, size_t count, DType dtype, NodeOp op) override {
    ++exchanges_;
    const MPI_Datatype type = mpi_type(dtype);
    const MPI_Op mop = mpi_op(op);
    const size_t elem = dtype_bytes(dtype);
    const size_t piece = size_t(INT_MAX) / 8;
    for (size_t at = 0; at < count; at += piece) {
      int n = int(std::min(piece, count - at));
      char* part = static_cast<char*>(data) + at * elem;
      const size_t bytes = size_t(n) * elem;
      if (bytes >= kPollingMinBytes && bytes < kBlockingBytes) {
        MPI_Request req;
        check("MPI_Iallreduce", MPI_Iallreduce(MPI_IN_PLACE, part, n, type, mop, comm_, &req));
        wait(req);
        continue;
      }
      if (poll) poll();
      blocking_.store(true);
      const int code = MPI_Allreduce(MPI_IN_PLACE, part, n, type, mop, comm_);
      blocking_.store(false);
      check("MPI_Allreduce", code);
    }
  }

  void announce_abort(const std::string& message, double wait_s) override {
    announcing_ = true;
    notice_out_ = message;
    std::vector<MPI_Request> sends;
    for (int n = 0; n < nodes_; ++n)
      if (n != node_ &&
          MPI_Isend(notice_out_.data(), int(std::min(notice_out_.size(), size_t(1) << 20)), MPI_BYTE, n, kAbortTag,
                    comm_, &sends.emplace_back()) != MPI_SUCCESS)
        sends.pop_back();
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    while (std::chrono::steady_clock::now() < end) {
      receive_notices();
      int heard = 0;
      for (int n = 0; n < nodes_; ++n) heard += n != node_ && heard_[size_t(n)];
      if (heard == nodes_ - 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
  }

  void agree_to_close() override {
    ++exchanges_;
    fill_slot(std::string());
    const uint64_t at = slot_out_.exchange;
    slot_out_.length = kClosing;
    slots_.resize(static_cast<size_t>(nodes_));
    all_gather_equal(&slot_out_, sizeof(SlotBuffer), slots_.data());
    std::string busy;
    for (int n = 0; n < nodes_; ++n)
      if (slots_[size_t(n)].length != kClosing) busy += (busy.empty() ? "" : ", ") + std::to_string(n);
    if (!busy.empty())
      throw std::runtime_error("node(s) " + busy + " were still making calls when this leader called synk::close() "
                               "(every leader must make the same calls and collectives, in the same order, before "
                               "it closes)");
    for (int n = 0; n < nodes_; ++n) check_in_step(slots_[size_t(n)], n, at);
  }

  void finalize() override {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return;
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

 private:
  void broadcast_bytes(char* data, size_t bytes, int root) {
    const size_t piece = size_t(INT_MAX) / 2;
    for (size_t at = 0; at < bytes; at += piece) {
      MPI_Request req;
      check("MPI_Ibcast", MPI_Ibcast(data + at, int(std::min(piece, bytes - at)), MPI_BYTE, root, comm_, &req));
      wait(req);
    }
  }

  // Tests `req` until it completes (poll_until). OpenMPI advances a
  // non-blocking collective only inside MPI calls, so a long message needs tests all along: spin,
  // then yield the CPU between tests; only a wait past 2 s (a peer far behind) sleeps, in 100 us
  // slices, so that a leader waiting for a slow peer costs little. (Measured: sleeping 200 us
  // between tests halved the bandwidth of a 64 MiB all-reduce over TCP.)
  void wait(MPI_Request& req) {
    poll_until([&] {
      int done = 0;
      check("MPI_Test", MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      return done != 0;
    });
  }

  struct Buffer {
    void* data;
    size_t bytes;
  };
  static Buffer part(char* base, std::span<const size_t> bounds, int n) {
    return Buffer{base + bounds[size_t(n)], bounds[size_t(n) + 1] - bounds[size_t(n)]};
  }

  // One round with every other node at once: a receive from each (into `receive_from(n)`, whose
  // length that node must send), then a send to each (`send_to(n)`), then the wait.
  template <class ReceiveFrom, class SendTo>
  void exchange_with_peers(int tag, ReceiveFrom&& receive_from, SendTo&& send_to) {
    requests_.clear();
    peers_.clear();
    expected_.clear();
    for (int n = 0; n < nodes_; ++n) {
      if (n == node_) continue;
      const Buffer into = receive_from(n);
      check("MPI_Irecv", MPI_Irecv(into.data, int(into.bytes), MPI_BYTE, n, tag, comm_, &requests_.emplace_back()));
      peers_.push_back(n);
      expected_.push_back(into.bytes);
    }
    for (int n = 0; n < nodes_; ++n) {
      if (n == node_) continue;
      const Buffer what = send_to(n);
      check("MPI_Isend", MPI_Isend(what.data, int(what.bytes), MPI_BYTE, n, tag, comm_, &requests_.emplace_back()));
    }
    wait_all_expected();
  }

  // Waits for requests_ (first the receives from peers_, `bytes` each, then the rest) and checks
  // that every peer sent exactly `bytes`: leaders that passed different lengths get an error
  // naming the node, where a collective would have hung or read past the message.
  void wait_all(size_t bytes) {
    expected_.assign(peers_.size(), bytes);
    wait_all_expected();
  }

  // The same with expected_[i] bytes from peers_[i].
  void wait_all_expected() {
    statuses_.resize(requests_.size());
    poll_until([&] {
      int done = 0;
      const int code = MPI_Testall(int(requests_.size()), requests_.data(), &done, statuses_.data());
      if (code == MPI_ERR_IN_STATUS) {
        for (size_t i = 0; i < peers_.size(); ++i)
          if (statuses_[i].MPI_ERROR == MPI_ERR_TRUNCATE)
            throw LengthMismatch("node " + std::to_string(peers_[i]) + " sent more than the " +
                                     std::to_string(expected_[i]) + " bytes this node exchanges (the leaders "
                                     "passed different lengths)");
      }
      check("MPI_Testall", code);
      return done != 0;
    });
    for (size_t i = 0; i < peers_.size(); ++i) {
      int count = 0;
      MPI_Get_count(&statuses_[i], MPI_BYTE, &count);
      if (size_t(count) != expected_[i])
        throw LengthMismatch("node " + std::to_string(peers_[i]) + " sent " + std::to_string(count) +
                                 " bytes where this node exchanges " + std::to_string(expected_[i]) +
                                 " (the leaders passed different lengths)");
    }
  }

  // Calls done_now() until it says true, with poll() and the abort notices checked between tries.
  template <class Done>
  void poll_until(Done&& done_now) {
    const auto start = std::chrono::steady_clock::now();
    for (int tries = 0;; ++tries) {
      if (done_now()) return;
      if (tries % 64 == 63) {
        if (poll) poll();
        receive_notices();
        if (notice_from_ >= 0 && !announcing_)
          throw std::runtime_error("node " + std::to_string(notice_from_) + " ended the job: " + notice_in_);
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(2)) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          continue;
        }
      }
      if (tries >= 4096) std::this_thread::yield();
    }
  }

  static constexpr size_t kPollingMinBytes = size_t(4) << 10, kBlockingBytes = size_t(64) << 10;
  static constexpr size_t kEagerBytes = size_t(60) << 10;
  static constexpr int kDirectMaxNodes = 16;
  bool direct_exchange(size_t bytes) const { return nodes_ <= kDirectMaxNodes && bytes <= kEagerBytes; }
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
  std::vector<int> peers_;
  std::vector<size_t> expected_;   // bytes from each of peers_

  // The watchdog thread: a blocking transfer past the step's deadline ends the process
  // (on_stuck), since the transfer itself cannot be interrupted.
  void watch() {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int64_t deadline = deadline_ns.load();
      if (!blocking_.load() || deadline == 0 || !on_stuck) continue;
      const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch()).count();
      if (now > deadline) on_stuck();
    }
  }

  std::atomic<bool> stop_{false}, blocking_{false};
  std::thread watchdog_;
  int node_ = 0, nodes_ = 1;
  int provided_ = MPI_THREAD_SINGLE;   // the thread level MPI granted
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string host_;
  // Point-to-point tags (the collectives use none): scatter's parts, abort notices, the direct
  // exchanges (all_gather_equal) and broadcasts' slots.
  static constexpr int kScatterTag = 4242, kAbortTag = 4343, kExchangeTag = 4444, kBroadcastTag = 4545,
                       kPartsTag = 4646, kGatherPartsTag = 4747;
  // Abort notices (announce_abort): which nodes sent one, the first one's text.
  std::vector<bool> heard_;
  int notice_from_ = -1;
  std::string notice_in_, notice_out_;
  bool announcing_ = false;

  void receive_notices() {
    for (;;) {
      int flag = 0, count = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, comm_, &flag, &status) != MPI_SUCCESS || !flag) return;
      MPI_Get_count(&status, MPI_BYTE, &count);
      std::string text(size_t(std::max(count, 0)), '\0');
      MPI_Recv(text.data(), count, MPI_BYTE, status.MPI_SOURCE, kAbortTag, comm_, MPI_STATUS_IGNORE);
      heard_[size_t(status.MPI_SOURCE)] = true;
      if (notice_from_ < 0) {
        notice_from_ = status.MPI_SOURCE;
        notice_in_ = std::move(text);
      }
    }
  }
  static constexpr int64_t kClosing = -1;   // a slot's length from agree_to_close
  struct SlotBuffer {
    int64_t length;
    uint64_t exchange;   // the sender's exchanges_ (check_in_step)
    char head[1024 - 2 * sizeof(int64_t)];
  } slot_out_;   // this node's slot (all_gather, a broadcast's root), or a broadcast's received one
  // slot_out_ holds `message`'s length and first bytes; returns the bytes of the slot they use.
  size_t fill_slot(const std::string& message) {
    const size_t head = std::min(message.size(), sizeof(slot_out_.head));
    slot_out_.length = int64_t(message.size());
    slot_out_.exchange = exchanges_;
    std::memcpy(slot_out_.head, message.data(), head);
    return 2 * sizeof(int64_t) + head;
  }
  // Every leader counts the exchanges it makes (each method above that moves data), and slots
  // carry the count: a leader that made a call, collective or checkpoint call the others did not
  // is found at the next slot (every call's first exchange is one), instead of its messages being
  // taken for the others' next exchange's, which computed with another collective's values.
  uint64_t exchanges_ = 0;
  void check_in_step(const SlotBuffer& slot, int from, uint64_t mine) const {
    if (slot.exchange == mine) return;
    throw std::runtime_error("the leaders are out of step: node " + std::to_string(from) + " is at its cross-node "
                             "exchange #" + std::to_string(slot.exchange) + ", node " + std::to_string(node_) +
                             " at #" + std::to_string(mine) + " (one leader made a call, collective, "
                             "get_value with a rank or checkpoint call that the others did not make; every leader "
                             "must make the same ones in the same order; SYNK_CHECK_NODES=1 names it where it "
                             "happens, docs/multinode.md)");
  }
  std::vector<SlotBuffer> slots_;
};

}  // namespace
}  // namespace synk::rt

// The plugin's entry point (dlsym): a new cluster, or null with the reason in *error.
extern "C" __attribute__((visibility("default"))) synk::rt::Cluster* synk_mpi_cluster_create(std::string* error) {
  try {
    return new synk::rt::MpiCluster();
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
