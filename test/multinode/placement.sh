#!/usr/bin/env bash
# Where the leaders' ranks run under mpirun (runtime/node/placement.h), on a host of C CPUs:
# - 1 leader, mpirun's default binding (one core when it starts 2 or fewer processes): fork(0)
#   starts C ranks, not 1;
# - 2 leaders, default binding or --bind-to none: each takes half of the CPUs (at least one), and
#   their ranks 0 run on different CPUs;
# - 1 leader with --bind-to core, the user's own choice: kept, so fork(0) starts 1 rank.
#   placement.sh PROGRAM MPIRUN
set -euo pipefail
program=$1 mpirun=$2
cpus=$(nproc)
launch=("$mpirun" --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo
        --mca oob_tcp_if_include lo)
fail() { echo "FAIL: $*"; exit 1; }
out=$("${launch[@]}" -np 1 "$program")
echo "1 leader, default binding: $out"
[[ $out == "node 0 local_size $cpus cpu "* ]] || fail "fork(0) should start $cpus ranks (the host's CPUs)"
if ((cpus >= 2)); then
  for bind in "" "--bind-to none"; do
    out=$("${launch[@]}" -np 2 $bind "$program" | sort)
    echo "2 leaders ${bind:-default binding}: $(echo $out)"
    half=$((cpus / 2))
    [[ $(grep -c "local_size $half " <<< "$out") == 2 ]] || fail "each of 2 leaders should start $half ranks"
    [[ $(awk '{print $6}' <<< "$out" | sort -u | wc -l) == 2 ]] || fail "the leaders' ranks 0 share a CPU"
  done
fi
out=$("${launch[@]}" -np 1 --bind-to core "$program")
echo "1 leader, --bind-to core: $out"
[[ $out == "node 0 local_size 1 cpu "* ]] || fail "an explicit --bind-to core must be kept"
echo "PASS: fork(0) under mpirun uses the leader's share of the host's $cpus CPUs"
