#!/bin/sh
# larger_than_memory.sh ACCELERATE TRAIN_GPT2: a GPT-2 whose training state is 2.4x the memory
# each rank may use trains and resumes on 2 ranks with fsdp_offload_dir.
#
# The limit is RLIMIT_DATA (ulimit -d), which counts a process's private writable memory (its heap
# and anonymous mappings) but not the shared file mappings of the offload tier: what a rank holds
# outside the files must fit, the files need not. The model: 12 blocks of width 1024 and a
# 1024-token vocabulary, 152M parameters: f32 masters, gradients and AdamW's two moments are 16
# bytes each, 1.22 GB per rank at 2 ranks, against a limit of 480 MiB per rank (at 430 MiB the
# offloaded run stops at its first validation products, with an out-of-memory error naming the
# product since oneDNN's kernels are checked for room; before, the rank now and then crashed).
# The same run with the state in memory must die of the limit (so the limit is real); with the
# state in files it trains 2 steps saving after each, and resuming from step 1 under the same
# limit ends exactly where it ended: the validation loss after the resumed step is where the
# restored optimizer state shows. (Steps are few on purpose: each one rewrites the offload files,
# ~1.2 GB a rank, and this test must stay a small share of the suite.)
set -eu
accelerate=$1 program=$2
limit_kib=491520  # 480 MiB
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(dirname "$0")/token_files.sh" "$dir/data"
mkdir "$dir/offload"
cat >"$dir/model.yaml" <<EOF
n_embd: 1024
n_layer: 12
n_head: 16
n_positions: 64
vocab_size: 1024
EOF
config() {  # config [KEY: VALUE]: FULL_SHARD bf16 with every memory lever but the files, plus KEY
  cat >"$dir/config.yaml" <<EOF
distributed_type: FSDP
mixed_precision: bf16
num_processes: 2
fsdp_config:
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_activation_checkpointing: true
  fsdp_cpu_ram_efficient_loading: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  $*
EOF
}
run() {  # under the limit; program options
  (ulimit -d "$limit_kib" && "$accelerate" launch --config_file "$dir/config.yaml" "$program" \
    --config "$dir/model.yaml" --data "$dir/data" --steps 2 --batch 2 --seq 16 --val-every 2 \
    --val-batches 1 --sample-tokens 0 --threads 1 --run_dir "$dir/run" "$@" 2>&1)
}
final() { echo "$1" | grep -o "final: train loss [0-9.]*.*val loss [0-9.]*"; }

config
if in_memory=$(run); then
  echo "$in_memory"; echo "FAIL: the state in memory trained under the limit: the limit is not real"; exit 1
fi
echo "$in_memory" | grep -q "out of memory" || { echo "$in_memory"; echo "FAIL: not stopped by the limit"; exit 1; }
echo "in memory: stopped by the limit ($(echo "$in_memory" | grep -o "out of memory[^(]*" | head -1))"

config "fsdp_offload_dir: $dir/offload"
trained=$(run --save_every 1 --checkpoint_dir "$dir/ckpt") || { echo "$trained"; echo "FAIL: offloaded run"; exit 1; }
echo "$trained" | grep -q "152270848 parameters" || { echo "$trained"; echo "FAIL: not the 152M model"; exit 1; }
echo "files: $(final "$trained")"
echo "$trained" | grep "offload files" || true
resumed=$(run --resume "$dir/ckpt/step_000001") || { echo "$resumed"; echo "FAIL: resumed run"; exit 1; }
echo "$resumed" | grep -q "resumed from .*step_000001 at step 1" || { echo "$resumed"; echo "FAIL: did not resume"; exit 1; }
echo "resumed: $(final "$resumed")"
[ -n "$(final "$trained")" ] && [ "$(final "$resumed")" = "$(final "$trained")" ] ||
  { echo "FAIL: the resumed run ended elsewhere"; exit 1; }
[ -z "$(ls -A "$dir/offload")" ] || { ls -la "$dir/offload"; echo "FAIL: files left in the offload directory"; exit 1; }
