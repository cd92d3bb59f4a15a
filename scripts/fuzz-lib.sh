#!/usr/bin/env bash
# What the fuzz scripts (fuzz-parser.sh, fuzz-npy.sh) share, sourced by them: run_fuzzer runs a
# libFuzzer binary over the corpus for $seconds seconds with the sanitizers' options, then prints
# the number of executions, the corpus size and every crash/leak/timeout/oom file, and exits 1
# when libFuzzer failed or left a finding. It reads the caller's seconds, log, corpus, artifacts.

# check_seconds ARG: exits 2 with the usage line unless ARG is a whole number of seconds.
check_seconds() {
  if [[ ! ${1:-} =~ ^[0-9]+$ ]]; then
    echo "usage: $0 SECONDS" >&2
    exit 2
  fi
}

# run_fuzzer BINARY DICT
run_fuzzer() {
  local binary=$1 dict=$2 status
  echo "fuzzing for $seconds s (log: $log)"
  set +e
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$binary" "$corpus" -dict="$dict" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" </dev/null >"$log" 2>&1
  status=$?
  set -e

  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  echo "executions: $executions"
  echo "corpus: $(find "$corpus" -type f | wc -l) inputs"
  mapfile -t findings < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  echo "findings: ${#findings[@]}"
  for file in "${findings[@]}"; do echo "  $file"; done
  if [[ $status -ne 0 || ${#findings[@]} -gt 0 ]]; then
    echo "libFuzzer exited with status $status; the end of $log:"
    tail -n 40 "$log"
    exit 1
  fi
}
