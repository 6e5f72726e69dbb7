#!/bin/sh
# preempt_resume.sh ACCELERATE TRAIN_GPT2 [OPTION...]: SIGTERM to `accelerate launch` in the
# middle of a 2-rank run makes every rank save the same step and the job exit 75, naming the
# step and the checkpoint; `--resume auto` then ends with exactly the losses of an uninterrupted
# run. OPTIONs go to the runs that save. With --save_async (and --save_every 7) rank 1's second
# background save, at step 14, is held halfway through its shard file until the preemption
# notice (ACC_TEST_CHECKPOINT_FAULT=hold:1:2), so the notice surely comes while a background
# save writes. (launch_signal.sh checks a second SIGTERM and the grace period.)
set -u
accelerate=$1 program=$2
shift 2
dir=$(mktemp -d)
trap 'pkill -9 -f "$program --config tiny --data $dir" 2>/dev/null; rm -rf "$dir"' EXIT
"$(dirname "$0")/../token_files.sh" "$dir/data"
cd "$dir"
# Always called in a subshell (run ...): it becomes accelerate itself, so `(run ...) &` gives
# accelerate's pid to signal.
run() {
  exec "$accelerate" launch --num_processes 2 "$program" --config tiny --data "$dir/data" --steps 80 \
    --batch 4 --seq 16 --val-every 20 --val-batches 2 --sample-tokens 0 --threads 1 "$@"
}
final() { grep -o "final: train loss [0-9.]*.*val loss [0-9.]*" "$1"; }

(run) >straight.txt 2>&1 || { cat straight.txt; echo "FAIL: the uninterrupted run failed"; exit 1; }

hold=""
case " $* " in *" --save_async "*) hold=hold:1:2 ;; esac
(ACC_TEST_CHECKPOINT_FAULT=$hold run --checkpoint_dir ckpt --run_dir run "$@") >preempted.txt 2>&1 &
launcher=$!
for _ in $(seq 1 300); do  # up to 30 s for the run to pass step 20
  grep -q "step 20:" preempted.txt && break
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
grep -q "step 20:" preempted.txt || { cat preempted.txt; echo "FAIL: the run did not reach step 20"; exit 1; }
kill -TERM $launcher
wait $launcher
status=$?
cat preempted.txt | grep -v "train .*it/s"
[ $status -eq 75 ] || { echo "FAIL: exit status $status after SIGTERM, expected 75 (preempted)"; exit 1; }
step=$(sed -n 's/.*\[rank 0\] preempted at step \([0-9]*\), checkpoint at .*/\1/p' preempted.txt)
[ -n "$step" ] || { echo "FAIL: rank 0 did not say at which step it stopped"; exit 1; }
[ "$step" -lt 80 ] || { echo "FAIL: the run finished before the signal came; nothing was tested"; exit 1; }
grep -q "accelerate launch: preempted at step $step, checkpoint at ckpt/step_0*$step; resume with --resume auto" preempted.txt ||
  { echo "FAIL: launch did not report the preemption"; exit 1; }
[ "$(cat ckpt/latest)" = "$(printf 'step_%06d' "$step")" ] || { echo "FAIL: latest is '$(cat ckpt/latest)'"; exit 1; }
if [ -n "$hold" ]; then
  grep -q "\[rank 1\].*the held shard write goes on (preemption notice)" preempted.txt ||
    { echo "FAIL: the preemption notice did not come while rank 1's background save was held"; exit 1; }
fi
resumed=$( (run --checkpoint_dir ckpt --run_dir run --resume auto "$@") 2>&1) || { echo "$resumed"; exit 1; }
echo "$resumed" | grep -q "resumed from ckpt/step_0*$step at step $step" || { echo "$resumed"; echo "FAIL: did not resume"; exit 1; }
final straight.txt
echo "$resumed" > resumed.txt
final resumed.txt
[ "$(final straight.txt)" = "$(final resumed.txt)" ] || { echo "FAIL: the resumed run ended elsewhere"; exit 1; }

echo PASS
