// philox.h compiled the way synk's generated CPU kernels are: clang, no standard library, no
// standard headers but the compiler's own <stdint.h>/<stddef.h>, a prelude that declares it
// (SYNK_RNG_STD_INCLUDES 0). The Makefile builds it twice, plain -O2 and with -O3, AVX2, FMA,
// -ffp-contract=fast and -fno-math-errno (so that every loop vectorises), and philox_test.cpp
// checks that both give the host build's bits. FS_ENTRY names the entry point, so the two
// objects link into one test binary.
#include <stddef.h>
#include <stdint.h>
#define SYNK_RNG_STD_INCLUDES 0
#include "philox.h"

#include "fs_abi.h"

#define FILL_FN static inline
#define FILL_LOOP(e) for (uint64_t e = 0; e < cols; ++e)
#include "fill_rows.h"

extern "C" void FS_ENTRY(const FsRequest* rq, const void* x, void* out) {
  const synk_rng_stream s = synk_rng_make_stream(rq->seed, rq->salt, rq->step);
  for (uint64_t row = rq->row0; row < rq->row0 + rq->rows; ++row) fill_row(rq, s, row, x, out);
}
