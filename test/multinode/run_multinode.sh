#!/usr/bin/env bash
# Runs test/multinode/multinode_run on NODES "nodes" of RANKS ranks under mpirun on localhost and
# checks the outcome (CMakeLists.txt says what each mode checks).
#   run_multinode.sh same|kill PROGRAM MPIRUN NODES RANKS
set -euo pipefail
mode=$1 program=$2 mpirun=$3 nodes=$4 ranks=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# OpenMPI's TCP transport skips 127.0.0.1 unless told to use lo; vader (shared memory) is left
# out so that no byte crosses a "node" except through the network path.
launch=("$mpirun" --allow-run-as-root --oversubscribe -np "$nodes" --mca btl tcp,self
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
shm_before=$(ls /dev/shm | grep -c '^synk' || true)
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
  kill)
    start=$(date +%s.%N)
    set +e
    "${launch[@]}" "$program" "$ranks" "$work/multi" --kill-worker 1 > "$work/log" 2>&1
    status=$?
    set -e
    took=$(echo "$(date +%s.%N) - $start" | bc)
    cat "$work/log"
    [[ $status -ne 0 ]] || { echo "FAIL: the job succeeded although a worker of node 1 was killed"; exit 1; }
    grep -q "node 1" "$work/log" || { echo "FAIL: no error names node 1"; exit 1; }
    sleep 1
    left=$(ls /dev/shm | grep -c '^synk' || true)
    [[ $left -le $shm_before ]] || { echo "FAIL: /dev/shm entries left behind:"; ls /dev/shm; exit 1; }
    # Live processes of the program (zombies wait for whoever adopted them and hold nothing).
    live=$(ps -C "$(basename "$program")" -o pid=,stat= | awk '$2 !~ /^Z/' || true)
    [[ -z $live ]] || { echo "FAIL: processes left behind: $live"; exit 1; }
    echo "PASS: a killed worker on node 1 ended the job in ${took}s with an error naming node 1; nothing left behind"
    ;;
esac
