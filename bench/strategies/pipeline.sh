#!/bin/sh
# bench/strategies/pipeline.sh [ARGS...]: PIPELINE (1F1B, GPipe, interleaved 1F1B and zero
# bubble, a stage per rank, one-row microbatches) against FULL_SHARD on GPT-2 small, global
# batch 8 x 512, at 2 ranks and at 4 ranks as 2 simulated nodes of 2 (ACC_RANKS_PER_NODE=2),
# 1 thread each, where 1F1B also runs on 2 stages x 2 replicas; then that grid's 1F1B step and
# a zero-bubble step on 2 ranks drawn as timelines (bench/results/pipeline_timeline.png and
# pipeline_timeline_zero_bubble.png: the last case of each run writes the files). Writes
# bench/results/pipeline_np2.json and pipeline_np4.json. ARGS go to bench_strategies
# (e.g. --precision bf16).
set -eu
. "$(dirname "$0")/common.sh"
for np in 2 4; do
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 mpirun --oversubscribe --bind-to none $root_flag -np $np \
    "$bin" --cases pipeline --out "bench/results/pipeline_np$np.json" "$@" >&2
done
timeline=$(mktemp -d)
trap 'rm -rf "$timeline"' EXIT
env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 ACC_PIPELINE_TIMELINE="$timeline/step" mpirun --oversubscribe \
  --bind-to none $root_flag -np 4 "$bin" --cases pipeline --schedules 1F1B --precision bf16 --steps 1 \
  --out "$timeline/report.json" "$@" >/dev/null
"$(dirname "$0")/plot_pipeline_timeline.py" bench/results/pipeline_timeline.png \
  "1F1B, 2 stages x 2 replicas (ranks 0-1: stage 0), GPT-2 small bf16, 8 x 512, 2 cores" \
  "$timeline/step"
rm -f "$timeline"/step.rank*.tsv
env ACC_NUM_THREADS=1 ACC_PIPELINE_TIMELINE="$timeline/step" mpirun --oversubscribe --bind-to none $root_flag -np 2 \
  "$bin" --cases pipeline --schedules zero_bubble --precision bf16 --steps 1 --out "$timeline/report.json" "$@" >/dev/null
"$(dirname "$0")/plot_pipeline_timeline.py" bench/results/pipeline_timeline_zero_bubble.png \
  "zero bubble, 2 stages, GPT-2 small bf16, 8 x 512, 2 cores" "$timeline/step"
