#!/bin/sh
# bench/diloco/run.sh [STEPS]: GPT-2 tiny on Brown (data/brown, scripts/fetch-data) trained by
# train_gpt2 for STEPS steps [200] with the DiLoCo plugin (examples/diloco_plugin/diloco.yaml:
# 8 inner steps, outer lr 0.7, Nesterov 0.9) and with NO_SHARD, on the same global batches, at 2
# and 4 ranks. The plugin is built against an install of this build, as a third party builds it.
# Prints each run's final line and writes bench/results/diloco.json: final train and validation
# loss, tokens/s, and DiLoCo's validation loss relative to NO_SHARD's.
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
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)

# run NP CONFIG: the final line's train loss, val loss and tokens/s, space-separated
run() {
  out=$("$build/bin/accelerate" launch --num_processes "$1" --config_file "$2" "$build/bin/train_gpt2" \
    --config tiny --data "$root/data/brown" --steps "$steps" --val-every "$steps" --sample-tokens 0 \
    --run_dir "$work/run" 2>&1) || { echo "$out" >&2; exit 1; }
  line=$(echo "$out" | grep "final:")
  echo "np $1 $(basename "$2"): $line" >&2
  echo "$line" | sed -n 's/.*train loss \([0-9.]*\) .*val loss \([0-9.]*\) .*; \([0-9]*\) tokens\/s.*/\1 \2 \3/p'
}

rows=""
for np in 2 4; do
  set -- $(run "$np" "$root/configs/fsdp_no_shard.yaml")
  ns_train=$1 ns_val=$2 ns_tps=$3
  set -- $(run "$np" "$root/examples/diloco_plugin/diloco.yaml")
  dl_train=$1 dl_val=$2 dl_tps=$3
  ratio=$(awk -v a="$dl_val" -v b="$ns_val" 'BEGIN { printf "%.4f", a / b }')
  echo "np $np: DiLoCo val loss $dl_val, NO_SHARD $ns_val (ratio $ratio)" >&2
  rows="$rows${rows:+,
}    {\"ranks\": $np, \"no_shard\": {\"train_loss\": $ns_train, \"val_loss\": $ns_val, \"tokens_per_s\": $ns_tps}, \"diloco\": {\"train_loss\": $dl_train, \"val_loss\": $dl_val, \"tokens_per_s\": $dl_tps}, \"val_loss_ratio\": $ratio}"
done
cat > "$root/bench/results/diloco.json" <<JSON
{
  "bench": "bench/diloco/run.sh",
  "date": "$(date -u +%Y-%m-%d)",
  "cpu": "$cpu",
  "model": "gpt2 tiny, Brown, $steps steps, train_gpt2 defaults (batch 16 x 128, AdamW, lr 3e-3 cosine)",
  "diloco": "examples/diloco_plugin/diloco.yaml (inner_steps 8, outer_lr 0.7, outer_momentum 0.9, Nesterov)",
  "runs": [
$rows
  ]
}
JSON
echo "wrote bench/results/diloco.json" >&2
