#!/bin/sh
# bench/strategies/no_link.sh [ROUNDS] [SETTING...]: do the levers for many machines cost
# anything where the network is not slow? GPT-2 small, global batch 8 x 512, bf16, 4 ranks x 1
# thread, no simulated link, in two settings: one_machine (one node of 4 ranks, what a user on
# one machine runs) and two_nodes (ACC_RANKS_PER_NODE=2: 2 simulated nodes of 2, the levers'
# work across nodes over a link as fast as this machine's memory); both unless named. Every
# lever runs ROUNDS times (default 3) in turn with plain FULL_SHARD, two warm-up steps and two timed
# steps each, each round starting one lever later; the rows are medians, and each lever's
# spread over its rounds is the noise to judge a ratio by. Writes
# bench/results/no_link_SETTING.json.
set -eu
. "$(dirname "$0")/common.sh"
rounds=${1:-3}
[ $# -gt 0 ] && shift
settings=${*:-one_machine two_nodes}
for setting in $settings; do
  case $setting in
    one_machine) per_node=4 ;;
    two_nodes) per_node=2 ;;
    *) echo "no_link.sh: unknown setting '$setting'; expected one_machine or two_nodes" >&2; exit 2 ;;
  esac
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=$per_node mpirun --oversubscribe --bind-to none $root_flag -np 4 \
    "$bin" --cases levers --levers plain,hybrid,node_copies,int8_gathers,int8_gradients,all --precision bf16 \
    --steps 2 --rounds "$rounds" --out "bench/results/no_link_$setting.json" >&2
  echo "wrote bench/results/no_link_$setting.json" >&2
done
