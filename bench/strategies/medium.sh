#!/bin/sh
# bench/strategies/medium.sh [ARGS...]: GPT-2 medium (355M parameters) on 4 ranks x 1 thread,
# FULL_SHARD bf16 with activation checkpointing, fsdp_offload_dir and deferred initialisation,
# against plain FULL_SHARD: tokens/s and the highest per-rank peak resident memory against a
# budget of 1536 MB per rank. Writes bench/results/strategies_medium.json. ARGS go to the bench.
set -eu
. "$(dirname "$0")/common.sh"
ACC_NUM_THREADS=1 mpirun --oversubscribe --bind-to none $root_flag -np 4 "$bin" --model medium \
  --batch 4 --seq 512 --steps 2 --rss-budget 1536 --out bench/results/strategies_medium.json "$@"
