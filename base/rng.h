// Random numbers in graphs (docs/language.md, "Random numbers"): the counters a random op's draws
// depend on besides its salt, as the runtime hands them to a compiled function for each part of a
// call, and the text of base/philox.h for the code generators, whose CPU and CUDA preludes paste
// it into every translation unit so that kernels draw exactly what the host computes.
#pragma once

#include <cstdint>
#include <string>

namespace synk {

// A draw is philox(seed, salt, step, row, element) (base/philox.h). `first_row` is the call's row
// index of the first row this run() computes: a part's first position in the call's scattered
// batch, so that every split of the rows over ranks and slices draws the same numbers.
struct RngState {
  uint64_t seed = 0;
  uint64_t step = 0;
  int64_t first_row = 0;
  friend bool operator==(const RngState&, const RngState&) = default;
};

// philox.h, verbatim (generated at configure time from base/philox.h: base/philox_text.cpp.in).
const std::string& philox_source_text();
// The same for a generated prelude, which defines SYNK_RNG_STD_INCLUDES 0 first: without the
// host's `#include <cstdint>` (generated CUDA has no #include at all).
const std::string& philox_kernel_text();

}  // namespace synk
