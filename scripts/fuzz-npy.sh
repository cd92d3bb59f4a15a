#!/usr/bin/env bash
# Fuzzes both .npy readers (the runtime's npy::read_header / npy::read and the compile-time
# read_npy_header) with libFuzzer for SECONDS seconds on one core: compiles runtime/data/npy_fuzz.cpp
# and the few sources the readers need with clang++-14 -fsanitize=fuzzer,address,undefined into
# build-fuzz-npy/npy_fuzz, seeds a corpus with valid and hostile files (every dtype, scalars, empty
# arrays, versions 1-3, overflowing shapes), runs, then prints the number of executions and any
# crash/leak/timeout/oom file. Not part of CI. Exit status: 0 when the run found nothing, 1 when it
# left a finding, 2 on a usage or build error.
#   scripts/fuzz-npy.sh 600          # ten minutes
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/fuzz-lib.sh
source "$root/scripts/fuzz-lib.sh"
check_seconds "${1:-}"
seconds=$1
build=$root/build-fuzz-npy
corpus=$build/corpus
artifacts=$build/artifacts/$(date +%Y%m%d-%H%M%S)  # this run's findings only
log=$build/fuzz.log
mkdir -p "$build" "$corpus" "$artifacts"

sources=(runtime/data/npy_fuzz.cpp runtime/data/npy.cpp runtime/data/dtype.cpp runtime/call/descriptor.cpp
         base/npy_format.cpp base/checked_math.cpp base/dtype.cpp base/errors.cpp)
echo "building $build/npy_fuzz"
(cd "$root" && clang++-14 -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. "${sources[@]}" \
  -lfmt -o "$build/npy_fuzz") >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 2; }

# Seeds, named by content so that re-running does not duplicate them.
python3 - "$corpus" <<'PY'
import hashlib, os, sys
out = sys.argv[1]
def npy(descr, shape, data=b"", major=1, order="False"):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, order, shape)
    pre = 10 if major == 1 else 12
    h += " " * ((64 - (pre + len(h) + 1) % 64) % 64) + "\n"
    n = len(h).to_bytes(2 if major == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([major, 0]) + n + h.encode() + data
seeds = [npy("<f4", "(2, 3)", bytes(24)), npy("<f8", "()", bytes(8)), npy("<i4", "(0,)"),
         npy("<i8", "(3,)", bytes(24), 2), npy("|u1", "(4, 1)", bytes(4), 3), npy("|b1", "(2,)", b"\x01\x00"),
         npy("<f4", "(4611686018427387905, 4)", bytes(16)), npy("<f4", "(99999999999999999999,)"),
         npy("<f4", "(3037000500, 3037000500)"), npy(">f4", "(1,)", bytes(4)), npy("<f4", "(2,)", bytes(8), 1, "True"),
         npy("<f4", "(0, 4611686018427387904, 4611686018427387904)")]
for s in seeds:
    with open(os.path.join(out, "seed-" + hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
        f.write(s)
PY
dict=$build/npy.dict
{
  for word in "\\x93NUMPY" descr fortran_order shape True False "<f4" "<f8" "<i4" "<i8" "|u1" "|b1" ">f4" \
    "(" ")" "," "{" "}" ":" "'" "9223372036854775807" "9223372036854775808" "4611686018427387904"; do
    echo "\"$word\""
  done
} >"$dict"

run_fuzzer "$build/npy_fuzz" "$dict"
