#!/bin/sh
# bench/strategies/levers.sh [ARGS...]: the levers for many machines on 4 ranks x 1 thread as 2
# simulated nodes of 2 (ACC_RANKS_PER_NODE=2): FULL_SHARD, HYBRID_SHARD, FULL_SHARD with node
# copies (fsdp_reshard_after_forward: node), with int8 weight gathers (fsdp_quantize_weights:
# int8), with int8 gradient reductions (fsdp_quantize_gradients: int8) and with all three;
# tokens/s, exposed communication and bytes sent per step across nodes and within, writing
# bench/results/strategies_levers.json. ARGS go to bench_strategies (e.g. --steps 1). Set
# ACC_SIM_CROSS_NODE_GBPS to pace the cross-node messages like a real link.
set -eu
. "$(dirname "$0")/common.sh"
ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 mpirun --oversubscribe --bind-to none $root_flag -np 4 \
  -x ACC_NUM_THREADS -x ACC_RANKS_PER_NODE "$bin" --cases levers --out bench/results/strategies_levers.json "$@"
