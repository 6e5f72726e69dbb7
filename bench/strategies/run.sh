#!/bin/sh
# bench/strategies/run.sh [ARGS...]: the single-process baseline (one process, every core),
# then every FSDP setting on 2 ranks x 1 thread on the same global batches, writing
# bench/results/strategies.json. ARGS go to both runs (e.g. --model tiny --seq 256).
set -eu
. "$(dirname "$0")/common.sh"
single=$("$bin" "$@" | tee /dev/stderr)
f32=$(echo "$single" | sed -n 's/^NO_SHARD f32: \([0-9.]*\) tokens\/s$/\1/p')
bf16=$(echo "$single" | sed -n 's/^NO_SHARD bf16: \([0-9.]*\) tokens\/s$/\1/p')
ACC_NUM_THREADS=1 mpirun --oversubscribe --bind-to none $root_flag -np 2 "$bin" "$@" \
  --baseline-f32 "$f32" --baseline-bf16 "$bf16"
