// The layout of a process group's control segment, private to runtime/group: the command line
// the master writes and every worker polls, the per-rank slots (completion, inline results,
// errors), the sleepers' words, the group barrier and the ring of retired segment names, then
// the payload area. process_group.cpp runs the protocol over it; rank_context.cpp gives command
// code its view of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/group/futex.h"
#include "runtime/group/process_group.h"

namespace synk::rt {

inline constexpr size_t kPayloadCapacity = size_t(1) << 20;
inline constexpr size_t kErrorCapacity = 4000;
inline constexpr size_t kRetireSlots = 256;
inline constexpr size_t kRetireNameMax = 128;

inline size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

struct alignas(64) RankSlot {
  // The line the master reads for a completion, written by the rank alone during a command: its
  // completion and error marks, and small results (RankContext::inline_results), so that a
  // completion and what it carries reach the master in one cache-line transfer.
  // Commands are marked by their 32-bit sequence number where the previous command's is the only
  // other value the word can hold (done_seq), else by their 64-bit count since the fork, which
  // never comes round again (a mark left from 2^32 commands ago must not pass for a new one).
  std::atomic<uint32_t> done_seq{0};
  uint32_t reserved = 0;
  std::atomic<uint64_t> error_command{0};   // the command that failed here
  std::atomic<uint64_t> inline_command{0};  // the command whose inline results peers may read
  std::byte inline_results[kInlineResultBytes];
  // Read by the master only for errors, timeouts and result segments: `waiting`, which the rank
  // changes around every wait inside a command, must not share the line the master polls.
  alignas(64) std::atomic<int32_t> pid{0};
  std::atomic<uint32_t> waiting{0};       // > 0 while the rank waits for its peers (RankContext::Waiting)
  uint32_t error_len = 0;
  std::atomic<uint64_t> results_gen{0};
  uint64_t results_size = 0;
  char results_name[kRetireNameMax];      // of generation results_gen (names are random)
  char error[kErrorCapacity];
};
static_assert(offsetof(RankSlot, pid) == 64, "a completion's line holds nothing else");

// What a worker reads when a command arrives, in the line it polls: the sequence number, the kind,
// and the payload itself when it is short (else it lies in the payload area).
struct alignas(64) CommandLine {
  FutexWord word;                         // the command's sequence number, bumped by the master
  uint32_t kind = 0;
  uint32_t commit_pending = 1;
  uint32_t payload_len = 0;
  char inline_payload[kInlinePayloadBytes];
};
static_assert(sizeof(CommandLine) == 64, "a command fits one cache line");

struct ControlBlock {
  uint64_t magic = 0;
  uint32_t nranks = 0;
  int32_t master_pid = 0;
  CommandLine command;
  // Completions are the ranks' done_seq marks; the master sleeps on `done`, which a worker bumps
  // only when it sleeps. Workers sleep on `exchange` for a peer's inline results the same way.
  WaitWord done;
  WaitWord exchange;
  SharedBarrier barrier;                  // over every rank, for rank handlers
  alignas(64) std::atomic<uint32_t> abort{0};
  // Set by a rank that left the group barrier because a peer ended the command without reaching
  // it; the master then clears the barrier's arrival count before the next command.
  std::atomic<uint32_t> barrier_broken{0};
  alignas(64) std::atomic<uint64_t> retired_count{0};
  char retired[kRetireSlots][kRetireNameMax];

  static size_t slots_offset() { return align64(sizeof(ControlBlock)); }
  static size_t payload_offset(int n) { return slots_offset() + align64(sizeof(RankSlot) * size_t(n)); }
  static size_t bytes(int n) { return payload_offset(n) + kPayloadCapacity; }
  RankSlot& slot(int r) {
    return reinterpret_cast<RankSlot*>(reinterpret_cast<char*>(this) + slots_offset())[r];
  }
  char* payload() { return reinterpret_cast<char*>(this) + payload_offset(int(nranks)); }
  // Where the current command's payload lies: in the command line when it fits.
  char* payload_of_command() { return command.payload_len <= kInlinePayloadBytes ? command.inline_payload : payload(); }
};

}  // namespace synk::rt
