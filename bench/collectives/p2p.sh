#!/bin/sh
# bench/collectives/p2p.sh: bench_p2p at 2 ranks through the shared-memory mailbox and through
# MPI messages on the comm thread (ACC_SHM_P2P=0, the path before the mailbox), with the ranks
# unbound and bound to a core each (as accelerate launch binds ranks that fit the cores).
# Writes bench/results/p2p_{mailbox,messages}_{unbound,bound}.json.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ACC_BUILD_DIR:-$root/build}/bin/bench_p2p
cd "$root"
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
mkdir -p bench/results
for binding in unbound bound; do
  if [ $binding = bound ]; then placement="--map-by slot:PE=1 --bind-to core"; else placement="--bind-to none"; fi
  for transport in mailbox messages; do
    if [ $transport = messages ]; then p2p=0; else p2p=1; fi
    # shellcheck disable=SC2086
    ACC_NUM_THREADS=1 ACC_SHM_P2P=$p2p mpirun $placement $root_flag -np 2 \
      "$bin" "bench/results/p2p_${transport}_${binding}.json"
  done
done
