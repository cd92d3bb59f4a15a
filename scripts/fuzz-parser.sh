#!/usr/bin/env bash
# Fuzzes the synk front end (lexer, parser, AST printer, sema, IR printer round trip) with
# libFuzzer for SECONDS seconds on one core: configures a separate build directory build-fuzz with
# clang++-14 and -DSYNK_FUZZ=ON, builds dsl_parser_fuzz, seeds a corpus from examples/ and every
# test/**/*.synk (test/helpers/ seeds helpers: def, return, let a, b = ...), runs, then prints the
# number of executions and any crash/leak/timeout file.
# Not part of CI. Exit status: 0 when the run found nothing, 1 when it left a finding.
#   scripts/fuzz-parser.sh 600          # ten minutes
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/fuzz-lib.sh
source "$root/scripts/fuzz-lib.sh"
check_seconds "${1:-}"
seconds=$1
build=$root/build-fuzz
corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts/$(date +%Y%m%d-%H%M%S)  # this run's findings only
log=$build/fuzz.log

mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DSYNK_FUZZ=ON \
  -DSYNK_BUILD_TESTS=OFF -DSYNK_BUILD_BENCH=OFF -DSYNK_ENABLE_CUDA=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 2; }
cmake --build "$build" --target dsl_parser_fuzz -j"${FUZZ_BUILD_JOBS:-2}"

# Seeds: every example and every .synk test (valid and malformed alike), named by content hash so
# that re-running the script does not duplicate them.
mkdir -p "$corpus" "$artifacts"
while IFS= read -r -d '' seed; do
  cp "$seed" "$corpus/seed-$(sha1sum "$seed" | cut -c1-16)"
done < <(find "$root/examples" "$root/test" -name '*.synk' -type f -print0)

# The language's words and punctuation, so that mutations produce plausible programs quickly.
dict=$build/synk.dict
{
  for word in fn shared let out update scatter bcast minibatch sliceable true false def return _ \
    f32 f64 i32 i64 u8 bool f16 bf16 avg sum prod max min gather none zeros ones const normal \
    uniform load seed mean std low high axis keepdims inf nan where exp log sqrt tanh sigmoid \
    relu abs neg pow maximum minimum argmax matmul transpose reshape flatten cast softmax \
    log_softmax cross_entropy one_hot take concat slice grad cumsum reverse dtype n k rows; do
    echo "\"$word\""
  done
  for punct in '(' ')' '[' ']' '{' '}' ',' ';' ':' '=' '+' '-' '*' '/' '**' '@' '==' '!=' '<' \
    '<=' '>' '>=' '&&' '||' '!' '//' '/*' '*/' '\"' '1e-3' '.5' '9223372036854775807'; do
    printf '"%s"\n' "${punct//\"/\\\"}"
  done
} >"$dict"

run_fuzzer "$build/dsl/dsl_parser_fuzz" "$dict"
