#!/bin/sh
# crash_resume.sh ACCELERATE TRAIN_GPT2 [OPTION]: a 2-rank training run whose rank 1 is killed
# in the middle of its second checkpoint leaves the first one as `latest`, intact; `--resume
# auto` continues from it and ends with exactly the losses of a run that was never interrupted;
# so does `accelerate launch --max_restarts 1` by itself. OPTION (--save_async) goes to every
# run: then rank 1 dies on its background writing thread while training goes on.
set -eu
accelerate=$1 program=$2 option=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(dirname "$0")/../token_files.sh" "$dir/data"
cd "$dir"
run() {
  # shellcheck disable=SC2086 # launch_opts holds separate words, option is one or none
  "$accelerate" launch --num_processes 2 ${launch_opts:-} "$program" --config tiny --data data --steps 6 --batch 4 \
    --seq 16 --val-every 3 --val-batches 2 --sample-tokens 0 --threads 1 $option "$@" 2>&1
}
final() { echo "$1" | grep -o "final: train loss [0-9.]*.*val loss [0-9.]*"; }

straight=$(run) || { echo "$straight"; exit 1; }
if crashed=$(ACC_TEST_CHECKPOINT_FAULT=kill:1:2 run --save_every 2 --checkpoint_dir ckpt --run_dir run); then
  echo "$crashed"; echo "FAIL: the run whose rank 1 was killed exited 0"; exit 1
fi
[ "$(cat ckpt/latest)" = step_000002 ] || { echo "FAIL: latest is '$(cat ckpt/latest)', expected step_000002"; exit 1; }
[ ! -e ckpt/step_000004 ] || { echo "FAIL: the interrupted step_000004 was committed"; exit 1; }
resumed=$(run --save_every 2 --checkpoint_dir ckpt --resume auto --run_dir run) || { echo "$resumed"; exit 1; }
echo "$resumed" | grep -q "resumed from ckpt/step_000002 at step 2" || { echo "$resumed"; echo "FAIL: did not resume"; exit 1; }
echo "straight: $(final "$straight")"
echo "resumed:  $(final "$resumed")"
[ "$(final "$straight")" = "$(final "$resumed")" ] || { echo "FAIL: the resumed run ended elsewhere"; exit 1; }
[ "$(cat ckpt/latest)" = step_000006 ] || { echo "FAIL: latest is not step_000006"; exit 1; }
# metrics.csv holds each step once: the rows the crashed run wrote after its checkpoint are
# replaced by the resumed run's; accelerate plot draws them.
steps=$(tail -n +2 run/metrics.csv | cut -d, -f1 | tr '\n' ' ')
[ "$steps" = "1 2 3 4 5 6 " ] || { cat run/metrics.csv; echo "FAIL: metrics.csv steps are '$steps'"; exit 1; }
# tokens/s is empty on each run's first step (1, and 3 after the resume), which the meter leaves out.
rates=$(tail -n +2 run/metrics.csv | cut -d, -f6 | sed 's/^$/-/' | tr '\n' ' ')
echo "$rates" | grep -q "^- [0-9.e+]* - [0-9.e+]* [0-9.e+]* [0-9.e+]* $" ||
  { cat run/metrics.csv; echo "FAIL: metrics.csv tokens_per_s are '$rates'"; exit 1; }
if command -v gnuplot >/dev/null; then
  "$accelerate" plot run
  [ -s run/loss.png ] && [ -s run/throughput.png ] || { echo "FAIL: accelerate plot drew nothing"; exit 1; }
fi
# Resumed once more, the finished run has nothing to train: it says so and reports the model's
# validation loss (the uninterrupted run's), not NaN.
if [ -z "$option" ]; then
  again=$(run --checkpoint_dir ckpt --resume auto --run_dir again) || { echo "$again"; exit 1; }
  echo "$again" | grep -q "at step 6 of --steps 6: nothing to train" || { echo "$again"; echo "FAIL: no word"; exit 1; }
  val() { echo "$1" | grep "final:" | grep -o "val loss [0-9.]*"; }
  [ "$(val "$again")" = "$(val "$straight")" ] && ! echo "$again" | grep -q "nan" ||
    { echo "$again"; echo "FAIL: the finished run's resume reports '$(val "$again")'"; exit 1; }
fi
# The finished run's checkpoint consolidates into one Hugging Face file.
"$accelerate" merge-weights ckpt/step_000006 merged.safetensors --dtype bf16
[ -s merged.safetensors ] || { echo "FAIL: merge-weights wrote nothing"; exit 1; }
# The same crash under accelerate launch --max_restarts 1: the job is started again, resumes
# from step_000002 by itself and ends where the uninterrupted run did.
rm -rf ckpt
restarted=$(ACC_TEST_CHECKPOINT_FAULT=kill:1:2 launch_opts="--max_restarts 1" run --save_every 2 --checkpoint_dir ckpt) ||
  { echo "$restarted"; echo "FAIL: the restarted job failed"; exit 1; }
echo "$restarted" | grep -q "restart 1 of 1" || { echo "$restarted"; echo "FAIL: no restart"; exit 1; }
echo "restarted: $(final "$restarted")"
[ "$(final "$straight")" = "$(final "$restarted")" ] || { echo "FAIL: the restarted run ended elsewhere"; exit 1; }
