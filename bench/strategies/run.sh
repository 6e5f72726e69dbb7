#!/bin/sh
# bench/strategies/run.sh [ARGS...]: the single-process baseline (one process, every core),
# then every FSDP setting on 2 ranks x 1 thread on the same global batches, writing
# bench/results/strategies.json. ARGS go to both runs (e.g. --model tiny --seq 256).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ACC_BUILD_DIR:-$root/build}/bin/bench_strategies
cd "$root"
single=$("$bin" "$@" | tee /dev/stderr)
f32=$(echo "$single" | sed -n 's/^NO_SHARD f32: \([0-9.]*\) tokens\/s$/\1/p')
bf16=$(echo "$single" | sed -n 's/^NO_SHARD bf16: \([0-9.]*\) tokens\/s$/\1/p')
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
ACC_NUM_THREADS=1 mpirun --oversubscribe --bind-to none $root_flag -np 2 "$bin" "$@" \
  --baseline-f32 "$f32" --baseline-bf16 "$bf16"
