#!/bin/sh
# bench/strategies/quantized.sh [STEPS]: GPT-2 tiny on Brown (data/brown, scripts/fetch-data)
# trained by train_gpt2 for STEPS steps [300] under FULL_SHARD on 2 ranks as 2 simulated nodes
# of one rank (ACC_RANKS_PER_NODE=1, so the gradient reductions cross nodes), on the same global
# batches, in f32 and in bf16: exact, with int8 weight gathers (fsdp_quantize_weights: int8) and
# with int8 gradient reductions (fsdp_quantize_gradients: int8). Prints each run's final line
# and writes bench/results/quantized.json: final train and validation loss, tokens/s, and each
# int8 run's validation loss relative to the exact run's (target: within 1%).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ACC_BUILD_DIR:-$root/build}
steps=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)

# run [KEY VALUE...]: a JSON object of the final line's train loss, val loss and tokens/s; the
# config keys go on accelerate launch's command line
run() {
  out=$(ACC_RANKS_PER_NODE=1 "$build/bin/accelerate" launch --num_processes 2 \
    --config_file "$root/configs/fsdp_full_shard.yaml" "$@" \
    "$build/bin/train_gpt2" --config tiny --data "$root/data/brown" --steps "$steps" \
    --val-every "$steps" --sample-tokens 0 --run_dir "$work/run" 2>&1) || { echo "$out" >&2; exit 1; }
  line=$(echo "$out" | grep "final:")
  echo "$*: $line" >&2
  echo "$line" | sed -n 's/.*train loss \([0-9.]*\) .*val loss \([0-9.]*\) .*; \([0-9]*\) tokens\/s.*/{"train_loss": \1, "val_loss": \2, "tokens_per_s": \3}/p'
}
val() { echo "$1" | sed 's/.*"val_loss": \([0-9.]*\).*/\1/'; }
ratio() { awk -v a="$(val "$1")" -v b="$(val "$2")" 'BEGIN { printf "%.4f", a / b }'; }

rows=""
for precision in no bf16; do
  exact=$(run --mixed_precision "$precision")
  gathers=$(run --mixed_precision "$precision" --fsdp_quantize_weights int8)
  gradients=$(run --mixed_precision "$precision" --fsdp_quantize_gradients int8)
  echo "mixed_precision $precision: val loss exact $(val "$exact"), int8 gathers $(val "$gathers")" \
       "($(ratio "$gathers" "$exact")x), int8 gradients $(val "$gradients") ($(ratio "$gradients" "$exact")x)" >&2
  rows="$rows${rows:+,
}    {\"mixed_precision\": \"$precision\", \"exact\": $exact,
     \"int8_gathers\": $gathers, \"int8_gathers_val_loss_ratio\": $(ratio "$gathers" "$exact"),
     \"int8_gradients\": $gradients, \"int8_gradients_val_loss_ratio\": $(ratio "$gradients" "$exact")}"
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
