#!/bin/sh
# bench/diloco/run.sh [STEPS]: GPT-2 tiny on Brown (data/brown, scripts/fetch-data) trained by
# train_gpt2 for STEPS steps [200] with NO_SHARD and with the DiLoCo plugin at 8 inner steps, on
# the same global batches, at 2 and 4 ranks. DiLoCo runs three times: with the shipped
# examples/diloco_plugin/diloco.yaml (outer lr 0.8, no momentum), with the paper's outer step
# (lr 0.7, Nesterov momentum 0.9) and with plain averaging (outer lr 1, momentum 0), the last two
# set on accelerate launch's command line. The
# plugin is built against an install of this build, as a third party builds it. Prints each
# run's final line and writes bench/results/diloco.json: final train and validation loss,
# tokens/s, and each DiLoCo run's validation loss relative to NO_SHARD's.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ACC_BUILD_DIR:-$root/build}
steps=${1:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$root/examples/diloco_plugin" -B "$work/plugin" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/plugin" >/dev/null
export ACC_PLUGIN_PATH="$work/plugin"
. "$root/bench/support/train_runs.sh"

rows=""
diloco="$root/examples/diloco_plugin/diloco.yaml"
for np in 2 4; do
  no_shard=$(train_run "$np" "$root/configs/fsdp_no_shard.yaml")
  shipped=$(train_run "$np" "$diloco")
  paper=$(train_run "$np" "$diloco" --outer_lr 0.7 --outer_momentum 0.9 --outer_nesterov true)
  averaging=$(train_run "$np" "$diloco" --outer_lr 1 --outer_momentum 0)
  echo "np $np: val loss NO_SHARD $(val "$no_shard"), DiLoCo $(val "$shipped") ($(ratio "$shipped" "$no_shard")x), paper's outer step $(val "$paper") ($(ratio "$paper" "$no_shard")x), averaging $(val "$averaging") ($(ratio "$averaging" "$no_shard")x)" >&2
  rows="$rows${rows:+,
}    {\"ranks\": $np, \"no_shard\": $no_shard,
     \"diloco\": $shipped, \"diloco_val_loss_ratio\": $(ratio "$shipped" "$no_shard"),
     \"paper\": $paper, \"paper_val_loss_ratio\": $(ratio "$paper" "$no_shard"),
     \"averaging\": $averaging, \"averaging_val_loss_ratio\": $(ratio "$averaging" "$no_shard")}"
done
cat > "$root/bench/results/diloco.json" <<JSON
{
  "bench": "bench/diloco/run.sh",
  "date": "$(date -u +%Y-%m-%d)",
  "cpu": "$cpu",
  "model": "gpt2 tiny, Brown, $steps steps, train_gpt2 defaults (batch 16 x 128, AdamW, lr 3e-3 cosine)",
  "diloco": "examples/diloco_plugin/diloco.yaml: inner_steps 8, outer_lr 0.8, outer_momentum 0",
  "paper": "the same with the paper's outer step: outer_lr 0.7, outer_momentum 0.9, Nesterov",
  "averaging": "the same with outer_lr 1, outer_momentum 0: the replicas' parameters averaged every 8 steps",
  "runs": [
$rows
  ]
}
JSON
echo "wrote bench/results/diloco.json" >&2
