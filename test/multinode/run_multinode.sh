#!/usr/bin/env bash
# Runs test/multinode/multinode_run on NODES "nodes" of RANKS ranks under mpirun on localhost and
# checks the outcome (CMakeLists.txt says what each mode checks).
#   run_multinode.sh same|kill|kill-leader|stop|mismatch|shape-mismatch|shape-mismatch-checked|synkc-run|bad-timeout|close-early PROGRAM MPIRUN NODES RANKS
#   run_multinode.sh fashion FASHION_MNIST MPIRUN NODES RANKS
set -euo pipefail
mode=$1 program=$2 mpirun=$3 nodes=$4 ranks=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# OpenMPI's TCP transport skips 127.0.0.1 unless told to use lo; vader (shared memory) is left
# out so that no byte crosses a "node" except through the network path.
launch=("$mpirun" --allow-run-as-root --oversubscribe -np "$nodes" --mca btl tcp,self
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
# Segments of this job's leaders (their names start with synk-<pid>-) still in /dev/shm; other
# tests running at the same time have segments of their own.
leftovers() {
  local pidfile
  for pidfile in "$work"/multi.pid*; do
    [[ -e $pidfile ]] || continue
    ls /dev/shm | grep "^synk-$(cat "$pidfile")-" || true
  done
}
# Runs the job that must fail (arguments after the program's own two), its output into $work/log
# and shown; sets $status and $took (seconds).
run_failing() {
  local start
  start=$(date +%s.%N)
  set +e
  "$@" > "$work/log" 2>&1
  status=$?
  set -e
  took=$(echo "$(date +%s.%N) - $start" | bc)
  cat "$work/log"
}
# No /dev/shm entry of the job's leaders (their rank 1 or segment guard removes them after a kill;
# on a loaded host that can take more than a second: a CI run saw Data segments still there after 1 s).
expect_no_segments() {
  for _ in $(seq 50); do [[ -z $(leftovers) ]] && break; sleep 0.1; done
  [[ -z $(leftovers) ]] || { echo "FAIL: /dev/shm entries left behind:"; leftovers; exit 1; }
}
# That, and no live process of the program (zombies wait for whoever adopted them and hold nothing).
expect_nothing_left() {
  expect_no_segments
  live=$(ps -C "$(basename "$program")" -o pid=,stat= | awk '$2 !~ /^Z/' || true)
  [[ -z $live ]] || { echo "FAIL: processes left behind: $live"; exit 1; }
}
case $mode in
  same)
    SYNK_MPI=0 "$program" $((nodes * ranks)) "$work/one"
    OMPI_MCA_rmaps_base_oversubscribe=1 "${launch[@]}" "$program" "$ranks" "$work/multi"
    for ((n = 0; n < nodes; n++)); do
      if ! cmp -s "$work/one.node0" "$work/multi.node$n"; then
        echo "FAIL: node $n of $nodes x $ranks differs from one node of $((nodes * ranks)) ranks:"
        diff "$work/one.node0" "$work/multi.node$n" | head -20
        exit 1
      fi
    done
    echo "PASS: $nodes nodes x $ranks ranks give the bits of 1 node x $((nodes * ranks)) ranks ($(wc -l < "$work/one.node0") results)"
    ;;
  mismatch)
    "${launch[@]}" "$program" "$ranks" "$work/multi" --mismatch
    for ((n = 0; n < nodes; n++)); do
      grep -q "mismatch caught: stats: the nodes' leaders made different calls.*node 1 called stats(f32\[37, 3\]), batch: count 19" \
        "$work/multi.node$n" || { echo "FAIL: node $n did not report the mismatch:"; grep mismatch "$work/multi.node$n"; exit 1; }
      grep -q "^local mistake caught" "$work/multi.node$n" ||
        { echo "FAIL: node $n did not fail node 1's call:"; grep "local mistake" "$work/multi.node$n"; exit 1; }
      # The call after it pairs with the same call everywhere: node 0's 20 rows, the count step's result.
      diff <(grep "^after the mistake" "$work/multi.node$n" | cut -d' ' -f4-) \
           <(grep "^count" "$work/multi.node$n" | cut -d' ' -f2-) > /dev/null ||
        { echo "FAIL: node $n's call after the mistake differs from the same call before it"; exit 1; }
      grep -q "^front-door mistake caught" "$work/multi.node$n" ||
        { echo "FAIL: node $n did not fail the call node 1's front door refused"; exit 1; }
      diff <(grep "^after the front-door mistake" "$work/multi.node$n" | cut -d' ' -f5-) \
           <(grep "^count" "$work/multi.node$n" | cut -d' ' -f2-) > /dev/null ||
        { echo "FAIL: node $n's call after the front-door mistake differs from the same call before it"; exit 1; }
    done
    echo "PASS: every leader reported the different call of node 1 as a UsageError, failed the calls only node 1's checks refused (in the engine and at the API's front door), and stayed in step"
    ;;
  bad-timeout)
    # A malformed SYNK_NODE_TIMEOUT_S (nan once meant "wait forever") or SYNK_CHECK_NODES is
    # refused by fork() on every leader, before any step; so is SYNK_CHECK_NODES on one node only.
    for value in soon nan; do
      run_failing env SYNK_NODE_TIMEOUT_S=$value "${launch[@]}" -x SYNK_NODE_TIMEOUT_S "$program" "$ranks" "$work/multi"
      [[ $status -ne 0 ]] || { echo "FAIL: the job ran with SYNK_NODE_TIMEOUT_S=$value"; exit 1; }
      grep -q "SYNK_NODE_TIMEOUT_S: expected a number of seconds from 0 (wait forever) to 1e9, received '$value'" \
        "$work/log" || { echo "FAIL: no leader named the bad SYNK_NODE_TIMEOUT_S=$value"; exit 1; }
      expect_nothing_left
    done
    run_failing env SYNK_CHECK_NODES=2 "${launch[@]}" -x SYNK_CHECK_NODES "$program" "$ranks" "$work/multi"
    [[ $status -ne 0 ]] || { echo "FAIL: the job ran with SYNK_CHECK_NODES=2"; exit 1; }
    grep -q "SYNK_CHECK_NODES: expected 0 or 1, received '2'" "$work/log" ||
      { echo "FAIL: no leader named the bad SYNK_CHECK_NODES"; exit 1; }
    expect_nothing_left
    run_failing "$mpirun" --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
      --mca oob_tcp_if_include lo -np 1 -x SYNK_CHECK_NODES=1 "$program" "$ranks" "$work/multi" : \
      -np $((nodes - 1)) -x SYNK_CHECK_NODES=0 "$program" "$ranks" "$work/multi"
    [[ $status -ne 0 ]] || { echo "FAIL: the job ran with SYNK_CHECK_NODES on one node only"; exit 1; }
    grep -q "same SYNK_CHECK_NODES .*node 0 (.*) has $ranks cpu SYNK_CHECK_NODES=1, but node 1 (.*): $ranks cpu SYNK_CHECK_NODES=0" \
      "$work/log" || { echo "FAIL: no leader named SYNK_CHECK_NODES set on one node only"; exit 1; }
    expect_nothing_left
    echo "PASS: SYNK_NODE_TIMEOUT_S=soon and nan, SYNK_CHECK_NODES=2, and SYNK_CHECK_NODES on one node only were refused at fork(); nothing left behind"
    ;;
  shape-mismatch)
    # The leaders' point-to-point exchanges see the other length (2 nodes: the direct exchange; 3
    # to 16: the parts each leader reduces), so at least two leaders name it. Either ends the job
    # naming the variable, its shape there and the likely cause.
    run_failing "${launch[@]}" "$program" "$ranks" "$work/multi" --shape-mismatch
    [[ $status -ne 0 ]] || { echo "FAIL: the job went on although the nodes' values differ in length"; exit 1; }
    grep -q "synk: node [0-9] of $nodes .*all_reduce across nodes: .*hold 'parts' as f64\[[34]\]: either it has another shape on another node" \
      "$work/log" || { echo "FAIL: no leader named 'parts' and its shape"; exit 1; }
    [[ $(grep -c "the leaders passed different lengths" "$work/log") -ge 2 ]] ||
      { echo "FAIL: fewer than two leaders named the other length"; exit 1; }
    if [[ $nodes == 2 ]]; then
      # 1000 and 1001 doubles (8 KB) likewise.
      run_failing "${launch[@]}" "$program" "$ranks" "$work/multi" --shape-mismatch 1000
      [[ $status -ne 0 ]] || { echo "FAIL: the job went on although 1000 and 1001 values were exchanged"; exit 1; }
      grep -q "synk: node [01] of 2 .*all_reduce across nodes: node [01] sent .*bytes.*the leaders passed different lengths.*hold 'parts' as f64\[100[01]\]: either it has another shape on another node" \
        "$work/log" || { echo "FAIL: no leader named the other node's length and 'parts'"; exit 1; }
      ! grep -q "shape mismatch not detected" "$work"/multi.node* ||
        { echo "FAIL: a leader computed with values of different lengths"; exit 1; }
    fi
    if grep -q "shape mismatch not detected" "$work"/multi.node*; then
      echo "note: a leader computed with the shorter value before the job ended (MPI gives it no error)"
    fi
    expect_nothing_left
    echo "PASS: values of different lengths on the nodes ended the job in ${took}s naming 'parts'; nothing left behind"
    ;;
  synkc-run)
    # synkc run under mpirun (PROGRAM is synkc): --set reaches every node's ranks and --all-ranks
    # prints every global rank's copy, as one node with all the ranks does.
    src=$(cd "$(dirname "$0")/../.." && pwd)
    python3 "$src/test/run/Inputs/npy.py" write "$work/x.npy" f32 5,2 1 1 2 2 3 3 4 4 5 5
    python3 "$src/test/run/Inputs/npy.py" write "$work/s.npy" f32 2 2 0.5
    args=(run "$src/examples/shared_variable.synk" --fn f --arg "x=$work/x.npy" --set "s=$work/s.npy" --all-ranks)
    SYNK_MPI=0 "$program" "${args[@]}" --ranks $((nodes * ranks)) > "$work/one.txt"
    "${launch[@]}" "$program" "${args[@]}" --ranks "$ranks" > "$work/multi.txt"
    if ! cmp -s "$work/one.txt" "$work/multi.txt"; then
      echo "FAIL: synkc run on $nodes nodes x $ranks ranks differs from one node:"; diff "$work/one.txt" "$work/multi.txt"
      exit 1
    fi
    echo "PASS: synkc run --set --all-ranks on $nodes x $ranks prints what one node of $((nodes * ranks)) ranks prints"
    ;;
  shape-mismatch-checked)
    # With SYNK_CHECK_NODES=1 the leaders compare the all_reduce (shapes included) before any
    # value moves: every leader catches a UsageError naming each node's shape, and the job goes on.
    SYNK_CHECK_NODES=1 "${launch[@]}" -x SYNK_CHECK_NODES "$program" "$ranks" "$work/multi" --shape-mismatch
    for ((n = 0; n < nodes; n++)); do
      grep -q "shape mismatch caught: all_reduce: the nodes' leaders make different collectives.*node 0: all_reduce(op sum) of 'parts' f64\[3\]; node 1: all_reduce(op sum) of 'parts' f64\[4\]" \
        "$work/multi.node$n" || { echo "FAIL: node $n did not name both shapes:"; cat "$work/multi.node$n"; exit 1; }
    done
    expect_nothing_left
    echo "PASS: SYNK_CHECK_NODES=1 refused values of different lengths on every leader, and the job went on"
    ;;
  fashion)
    # A training run: K nodes x R ranks save the bits of 1 node x K*R ranks (deterministic steps).
    args=(--epochs 1 --limit 3000 --holdout 500 --deterministic 64)
    SYNK_MPI=0 "$program" --ranks $((nodes * ranks)) "${args[@]}" --out "$work/one" > "$work/one.log"
    "${launch[@]}" "$program" --ranks "$ranks" "${args[@]}" --out "$work/multi" > "$work/multi.log"
    grep "test accuracy" "$work/one.log" "$work/multi.log"
    grep -q "on $nodes nodes" "$work/multi.log" || { echo "FAIL: node 0 does not say it runs on $nodes nodes"; exit 1; }
    [[ $(ls "$work/one"/*.npy | wc -l) -gt 0 ]] || { echo "FAIL: nothing saved"; exit 1; }
    for f in "$work/one"/*.npy; do
      cmp -s "$f" "$work/multi/$(basename "$f")" || { echo "FAIL: $(basename "$f") differs"; exit 1; }
    done
    echo "PASS: fashion_mnist on $nodes nodes x $ranks ranks saved the parameters of 1 node x $((nodes * ranks)) ranks, bit for bit"
    ;;
  close-early)
    # Node 1 calls synk::close() while node 0 makes its next call: both end the job at once with
    # an error saying so (the 60 s timeout would say "no answer from the other nodes").
    run_failing env SYNK_NODE_TIMEOUT_S=60 "${launch[@]}" -x SYNK_NODE_TIMEOUT_S "$program" "$ranks" "$work/multi" \
      --close-early 1
    [[ $status -ne 0 ]] || { echo "FAIL: the job succeeded although node 1 closed early"; exit 1; }
    grep -q "synk: node 0 of $nodes.*node 1 called synk::close() while this leader was still making calls" "$work/log" ||
      { echo "FAIL: node 0 did not say that node 1 closed"; exit 1; }
    grep -q "synk: node 1 of $nodes.*node(s) 0 were still making calls when this leader called synk::close()" \
      "$work/log" || { echo "FAIL: node 1 did not say that node 0 was still making calls"; exit 1; }
    ! grep -q "no answer from the other nodes" "$work/log" || { echo "FAIL: a leader waited for the timeout"; exit 1; }
    expect_nothing_left
    echo "PASS: a leader that closed while the other called ended the job in ${took}s, both naming it; nothing left"
    ;;
  stop|stop-in-transfer)
    run_failing env SYNK_NODE_TIMEOUT_S=3 "${launch[@]}" -x SYNK_NODE_TIMEOUT_S "$program" "$ranks" "$work/multi" \
      "$([[ $mode == stop ]] && echo --stop-leader || echo --stop-in-transfer)" 1
    [[ $status -ne 0 ]] || { echo "FAIL: the job succeeded although node 1 stopped"; exit 1; }
    grep -q "node 0 of $nodes.*no answer from the other nodes within SYNK_NODE_TIMEOUT_S=3" "$work/log" \
      || { echo "FAIL: node 0 did not report the silent node"; exit 1; }
    expect_no_segments
    echo "PASS: a stopped leader became an error on node 0 after the 3 s timeout (job ended in ${took}s)"
    ;;
  kill)
    run_failing "${launch[@]}" "$program" "$ranks" "$work/multi" --kill-worker 1
    [[ $status -ne 0 ]] || { echo "FAIL: the job succeeded although a worker of node 1 was killed"; exit 1; }
    grep -q "node 1" "$work/log" || { echo "FAIL: no error names node 1"; exit 1; }
    # The surviving leader says why too (node 1's notice, raised from the exchange it waited in).
    grep -q "synk: node 0 of [0-9]* .*node 1 ended the job: global rank [0-9]* (local rank 1) lost" "$work/log" ||
      { echo "FAIL: the leader of node 0 did not report node 1's error"; exit 1; }
    ls "$work"/multi.pid* > /dev/null || { echo "FAIL: the leaders wrote no pid files"; exit 1; }
    expect_nothing_left
    echo "PASS: a killed worker on node 1 ended the job in ${took}s with an error naming node 1; nothing left behind"
    ;;
  kill-leader)
    # SIGKILL of node 1's leader (no handler runs). With one rank per node it has no rank 1 to
    # clean up after it: its segment guard does (runtime/group/segment_guard.h).
    run_failing "${launch[@]}" "$program" "$ranks" "$work/multi" --kill-leader 1
    [[ $status -ne 0 ]] || { echo "FAIL: the job succeeded although node 1's leader was killed"; exit 1; }
    [[ -e $work/multi.pid1 ]] || { echo "FAIL: node 1 wrote no pid file"; exit 1; }
    expect_nothing_left
    guards=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep "synk segment guard" | grep -F "/dev/shm/synk-$(cat "$work/multi.pid1")-" || true)
    [[ -z $guards ]] || { echo "FAIL: node 1's segment guard still runs: $guards"; exit 1; }
    echo "PASS: a SIGKILLed leader of $ranks rank(s) on node 1 ended the job in ${took}s; nothing left behind"
    ;;
esac
