#!/bin/sh
# bench/strategies/pipeline.sh [ARGS...]: PIPELINE (1F1B, GPipe, interleaved 1F1B and zero
# bubble, a stage per rank, one-row microbatches) against FULL_SHARD on GPT-2 small, global
# batch 8 x 512, at 2 ranks and at 4 ranks as 2 simulated nodes of 2 (ACC_RANKS_PER_NODE=2),
# 1 thread each, where 1F1B also runs on 2 stages x 2 replicas; then that grid's 1F1B step
# (bench/results/pipeline_timeline.png) and a step of each schedule on 2 ranks
# (pipeline_timeline_{gpipe,1f1b,interleaved,zero_bubble}.png) drawn as timelines. Writes
# bench/results/pipeline_np2.json and pipeline_np4.json, and for 1F1B and interleaved on
# equal stages (gpt2_equal_stages.yaml) pipeline_equal_stages_np{2,4}.json. ARGS go to bench_strategies
# (e.g. --precision bf16).
set -eu
. "$(dirname "$0")/common.sh"
for np in 2 4; do
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 mpirun --oversubscribe --bind-to none $root_flag -np $np \
    "$bin" --cases pipeline --out "bench/results/pipeline_np$np.json" "$@" >&2
done
# The bubble on equal stages, where its formula holds: GPT-2 small's layers with a small head,
# over 6 steps (this VM's cores drift by a few percent against each other within a run).
for np in 2 4; do
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 mpirun --oversubscribe --bind-to none $root_flag -np $np \
    "$bin" "$@" --cases pipeline --model bench/strategies/gpt2_equal_stages.yaml --schedules 1F1B,interleaved_1F1B \
    --steps 6 --out "bench/results/pipeline_equal_stages_np$np.json" >&2
done
timeline=$(mktemp -d)
trap 'rm -rf "$timeline"' EXIT
env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 ACC_PIPELINE_TIMELINE="$timeline/step" mpirun --oversubscribe \
  --bind-to none $root_flag -np 4 "$bin" --cases pipeline --schedules 1F1B --precision bf16 --steps 1 \
  --out "$timeline/report.json" "$@" >/dev/null
"$(dirname "$0")/plot_pipeline_timeline.py" bench/results/pipeline_timeline.png \
  "1F1B, 2 stages x 2 replicas (ranks 0-1: stage 0), GPT-2 small bf16, 8 x 512, 2 cores" \
  "$timeline/step"
# A step of each schedule on 2 ranks, a stage each (interleaved: 2 chunks each).
for schedule in GPipe 1F1B interleaved_1F1B zero_bubble; do
  rm -f "$timeline"/step.rank*.tsv
  env ACC_NUM_THREADS=1 ACC_PIPELINE_TIMELINE="$timeline/step" mpirun --oversubscribe --bind-to none $root_flag -np 2 \
    "$bin" --cases pipeline --schedules $schedule --precision bf16 --steps 1 --out "$timeline/report.json" "$@" >/dev/null
  name=$(echo "$schedule" | tr 'A-Z' 'a-z' | sed 's/_1f1b$//')
  "$(dirname "$0")/plot_pipeline_timeline.py" "bench/results/pipeline_timeline_$name.png" \
    "$schedule, 2 ranks, GPT-2 small bf16, 8 x 512, 2 cores" "$timeline/step"
done
