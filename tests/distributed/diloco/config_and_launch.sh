#!/bin/sh
# config_and_launch.sh SOURCE_DIR ACCELERATE TRAIN_GPT2: the DiLoCo plugin (on ACC_PLUGIN_PATH)
# goes through accelerate's commands as a built-in strategy does: `accelerate env` lists its
# option section, `accelerate estimate-memory` its row, `accelerate config` asks its questions, `config validate` checks the shipped
# examples/diloco_plugin/diloco.yaml (and names ACC_PLUGIN_PATH without the plugin), and
# `accelerate launch` takes its keys on the command line and trains train_gpt2 with it on 2 ranks.
set -eu
source_dir=$1 accelerate=$2 program=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; exit 1; }
shipped="$source_dir/examples/diloco_plugin/diloco.yaml"

env_out=$("$accelerate" env)
echo "$env_out" | grep -q "option section diloco_config (strategies: DILOCO)" || { echo "$env_out"; fail "env lacks the section"; }
echo "$env_out" | grep -q "inner_steps: 8" || { echo "$env_out"; fail "env lacks inner_steps"; }

# ranks, distributed type (the plugin's strategy), its four questions, mixed precision
printf '2\nDILOCO\n4\n\n0\n\nno\n' | "$accelerate" config --config_file "$dir/asked.yaml" >/dev/null
grep -q "strategy: DILOCO" "$dir/asked.yaml" || { cat "$dir/asked.yaml"; fail "config did not choose DILOCO"; }
grep -q "inner_steps: 4" "$dir/asked.yaml" || { cat "$dir/asked.yaml"; fail "config did not ask inner_steps"; }
grep -q "outer_momentum: 0$" "$dir/asked.yaml" || { cat "$dir/asked.yaml"; fail "config did not ask outer_momentum"; }
"$accelerate" config validate "$dir/asked.yaml" | grep -q ": valid" || fail "the asked config is not valid"
"$accelerate" config validate "$shipped" | grep -q ": valid" || fail "the shipped config is not valid"
sed 's/inner_steps: 8/inner_steps: 0/' "$shipped" > "$dir/bad.yaml"
bad=$("$accelerate" config validate "$dir/bad.yaml") && fail "inner_steps 0 passed validate"
echo "$bad" | grep -q "diloco_config.inner_steps: bad value '0' (expected an integer >= 1)" || { echo "$bad"; fail "bad value not named"; }
missing=$(env -u ACC_PLUGIN_PATH "$accelerate" config validate "$shipped") && fail "valid without the plugin"
echo "$missing" | grep -q "unknown key 'diloco_config'.*ACC_PLUGIN_PATH" || { echo "$missing"; fail "no hint at ACC_PLUGIN_PATH"; }

est=$("$accelerate" estimate-memory gpt2 --num_processes 2) || { echo "$est"; fail "estimate-memory failed"; }
echo "$est" | grep -q "^DILOCO (inner_steps 8) " || { echo "$est"; fail "estimate-memory lacks DiLoCo's row"; }

dry=$("$accelerate" launch --dry_run --config_file "$shipped" --inner_steps 4 --diloco_config.outer_lr 0.5 true) ||
  { echo "$dry"; fail "launch with the plugin's keys failed"; }
echo "$dry" | grep -q "inner_steps: 4" && echo "$dry" | grep -q "outer_lr: 0.5" || { echo "$dry"; fail "keys not applied"; }

"$(dirname "$0")/../token_files.sh" "$dir/data"
out=$("$accelerate" launch --config_file "$shipped" "$program" --config tiny --data "$dir/data" --steps 8 \
  --batch 4 --seq 16 --val-every 8 --val-batches 2 --sample-tokens 0 --threads 1 --run_dir "$dir/run" 2>&1) ||
  { echo "$out"; fail "launch failed"; }
echo "$out" | grep -q "DILOCO over 2 ranks" || { echo "$out"; fail "not DILOCO on 2 ranks"; }
echo "$out" | grep "final:" || { echo "$out"; fail "no final line"; }
