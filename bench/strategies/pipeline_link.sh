#!/bin/sh
# bench/strategies/pipeline_link.sh GBPS [ARGS...]: PIPELINE against FULL_SHARD over a simulated
# link of GBPS gigabits per second (50 us latency) between 2 simulated nodes of 2 ranks each:
# GPT-2 small bf16, global batch 8 x 512, 1 thread per rank, 1F1B with a stage per rank, on 2
# stages x 2 replicas (target: >= 1.5x FULL_SHARD's tokens/s at the slowest link of
# link_sweep.sh, 0.08 Gb/s) and on 2 stages x 2 tensor-parallel ranks. Collectives across the
# nodes and messages from the other node are paced to the link (plugins/mpi/sim_link.h): every
# timing is simulated. Writes bench/results/pipeline_link_GBPS.json. ARGS go to bench_strategies.
set -eu
. "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || { echo "usage: $0 GBPS [ARGS...] (e.g. 0.08)" >&2; exit 2; }
gbps=$1
shift
env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 ACC_SIM_CROSS_NODE_GBPS="$gbps" ACC_SIM_CROSS_NODE_LATENCY_US=50 \
  mpirun --oversubscribe --bind-to none $root_flag -np 4 "$bin" --cases pipeline --schedules 1F1B \
  --precision bf16 --out "bench/results/pipeline_link_$gbps.json" "$@" >&2
