// What a user of the process group hands it, without the group itself: the options of a fork
// (waiting, pinning, timeouts, the collectives' staging size) and the type of a named rank-wide
// operation. The public face (synk/synk.h) includes this, not process_group.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace synk::rt {

class RankContext;

struct GroupOptions {
  int64_t spin_ns = -1;              // busy-wait before sleeping; -1: 50 µs if every rank has a core
  int64_t yield_ns = -1;             // then poll yielding the CPU; -1: 2 ms if every rank has a core,
                                     // else 50 µs (0: sleep at once)
  int64_t poll_ns = 20'000'000;      // sleep slice between liveness checks (death seen within it)
  double call_timeout_s = 0;         // > 0: a command still running after this is fatal
  bool pin = true;                   // pin rank r to the r-th allowed core (round-robin)
  // Size of the collectives' staging segment (created on the first collective): every
  // collective moves data through it in chunks, so it never grows with the data.
  size_t collective_staging_bytes = size_t(8) << 20;
};

// A named operation every rank can be asked to run (the Handler command: collectives in tests,
// users' rank-wide operations); registered before fork() in the master.
using RankHandler = std::function<void(RankContext& ctx, std::string_view payload)>;

}  // namespace synk::rt
