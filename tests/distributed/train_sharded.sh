#!/bin/sh
# train_sharded.sh SOURCE_DIR ACCELERATE PROGRAM [CONFIG [STRATEGY]]: the shipped
# configs/spmd_fsdp_tp.yaml (mesh (2, 2), FSDP x tensor parallel), or CONFIG, trains PROGRAM's tiny
# model (train_llama or train_gpt2) through accelerate launch on 4 ranks as STRATEGY (SPMD) and
# ends where the same run on one process ends (train and validation loss within 1e-3); resumed
# from its step-2 checkpoint (each rank's pieces), it ends exactly where it ended, and samples
# text from the joined model.
set -eu
source_dir=$1 accelerate=$2 program=$3 config=${4:-configs/spmd_fsdp_tp.yaml} strategy=${5:-SPMD}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(dirname "$0")/token_files.sh" "$dir/data"
cd "$source_dir"  # the config names its rules file relative to the repository
run() {  # launch options; program options after --
  opts=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts="$opts $1"; shift; done
  [ $# -gt 0 ] && shift
  # shellcheck disable=SC2086 # opts holds separate words
  "$accelerate" launch $opts "$program" --config tiny --data "$dir/data" --steps 4 --batch 4 \
    --seq 16 --val-every 2 --val-batches 2 --sample-tokens 0 --threads 1 --run_dir "$dir/run" "$@" 2>&1
}
final() { echo "$1" | grep -o "final: train loss [0-9.]*.*val loss [0-9.]*"; }
sharded=$(run --num_processes 4 --config_file "$config" -- --save_every 2 \
  --checkpoint_dir "$dir/ckpt") || { echo "$sharded"; exit 1; }
echo "$sharded" | grep -q "$strategy over 4 ranks" || { echo "$sharded"; echo "FAIL: not $strategy on 4 ranks"; exit 1; }
single=$(run --num_processes 1) || { echo "$single"; exit 1; }
echo "$strategy: $(final "$sharded")"
echo "single: $(final "$single")"
nums() { final "$1" | grep -o "[0-9]\+\.[0-9]\+" | tr '\n' ' '; }
# shellcheck disable=SC2046 # four numbers as four arguments
awk -v a="$(nums "$sharded")" -v b="$(nums "$single")" 'BEGIN {
  n = split(a, x, " "); split(b, y, " ")
  if (n < 2) { print "FAIL: no final losses"; exit 1 }
  for (i = 1; i <= n; i++) if (x[i] - y[i] > 1e-3 * y[i] || y[i] - x[i] > 1e-3 * y[i]) {
    print "FAIL: the sharded run ends at " x[i] ", one process at " y[i]; exit 1 }
}'
# MFU counts the whole model's FLOPs whatever each rank holds: the FLOPs a token that the final
# line's tokens/s, MFU and peak imply agree with one process's (within the rounding of MFU).
flops() {
  echo "$1" | sed -n 's/.*final: .*; \([0-9]*\) tokens\/s, MFU \([0-9.]*\)% of \([0-9.]*\) GFLOP\/s.*/\1 \2 \3/p' |
    awk '$1 > 0 && $2 > 0 { printf "%.0f", $2 / 100 * $3 * 1e9 / $1 }'
}
awk -v a="$(flops "$sharded")" -v b="$(flops "$single")" 'BEGIN {
  if (a == "" || b == "") { print "FAIL: no MFU to compare"; exit 1 }
  if (a > 1.25 * b || b > 1.25 * a) { print "FAIL: the sharded run counts " a " FLOPs a token, one process " b; exit 1 }
}'
resumed=$(run --num_processes 4 --config_file "$config" -- \
  --resume "$dir/ckpt/step_000002" --sample-tokens 8) || { echo "$resumed"; exit 1; }
# The text sample at the end goes through summon_full_params, which joins the slices.
echo "$resumed" | grep -q "] sample: \|no GPT-2 vocabulary" || { echo "$resumed"; echo "FAIL: no sample"; exit 1; }
echo "$resumed" | grep -q "resumed from .*step_000002 at step 2" || { echo "$resumed"; echo "FAIL: did not resume"; exit 1; }
echo "resumed: $(final "$resumed")"
[ "$(final "$resumed")" = "$(final "$sharded")" ] || { echo "FAIL: the resumed $strategy run ended elsewhere"; exit 1; }
