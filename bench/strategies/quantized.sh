#!/bin/sh
# bench/strategies/quantized.sh [STEPS]: GPT-2 tiny on Brown (data/brown, scripts/fetch-data)
# trained by train_gpt2 for STEPS steps [300] under FULL_SHARD on 2 ranks as 2 simulated nodes
# of one rank (ACC_RANKS_PER_NODE=1, so the gradient reductions cross nodes), on the same global
# batches, in f32 and in bf16: exact, with int8 weight gathers (fsdp_quantize_weights: int8),
# with int8 gradient reductions (fsdp_quantize_gradients: int8) and with int4 ones. Prints each
# run's final line and writes bench/results/quantized.json: final train and validation loss,
# tokens/s, and each quantized run's validation loss relative to the exact run's (target: within
# 1% for int8; int4 states what it reaches).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ACC_BUILD_DIR:-$root/build}
steps=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/bench/support/train_runs.sh"
export ACC_RANKS_PER_NODE=1  # every rank a node of its own: the reductions cross nodes
config="$root/configs/fsdp_full_shard.yaml"

rows=""
for precision in no bf16; do
  exact=$(train_run 2 "$config" --mixed_precision "$precision")
  gathers=$(train_run 2 "$config" --mixed_precision "$precision" --fsdp_quantize_weights int8)
  gradients=$(train_run 2 "$config" --mixed_precision "$precision" --fsdp_quantize_gradients int8)
  int4=$(train_run 2 "$config" --mixed_precision "$precision" --fsdp_quantize_gradients int4)
  echo "mixed_precision $precision: val loss exact $(val "$exact"), int8 gathers $(val "$gathers")" \
       "($(ratio "$gathers" "$exact")x), int8 gradients $(val "$gradients") ($(ratio "$gradients" "$exact")x)," \
       "int4 gradients $(val "$int4") ($(ratio "$int4" "$exact")x)" >&2
  rows="$rows${rows:+,
}    {\"mixed_precision\": \"$precision\", \"exact\": $exact,
     \"int8_gathers\": $gathers, \"int8_gathers_val_loss_ratio\": $(ratio "$gathers" "$exact"),
     \"int8_gradients\": $gradients, \"int8_gradients_val_loss_ratio\": $(ratio "$gradients" "$exact"),
     \"int4_gradients\": $int4, \"int4_gradients_val_loss_ratio\": $(ratio "$int4" "$exact")}"
done
cat > "$root/bench/results/quantized.json" <<JSON
{
  "bench": "bench/strategies/quantized.sh",
  "date": "$(date -u +%Y-%m-%d)",
  "cpu": "$cpu",
  "model": "gpt2 tiny, Brown, $steps steps, FULL_SHARD on 2 ranks as 2 simulated nodes, train_gpt2 defaults (batch 16 x 128, AdamW, lr 3e-3 cosine)",
  "runs": [
$rows
  ]
}
JSON
cat "$root/bench/results/quantized.json"
