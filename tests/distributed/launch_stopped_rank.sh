#!/bin/sh
# launch_stopped_rank.sh ACCELERATE DIST_FAILURE: one of 2 ranks is stopped (kill -STOP) while
# the job communicates; `accelerate launch` must end non-zero within 1.5 x ACC_COMM_TIMEOUT of
# the stop plus the job's teardown, every time, and leave no rank behind.
set -u
accelerate=$1
program=$2
timeout=4
bound=10  # 1.5 x 4 s, and up to 4 s for mpirun to stop the ranks
out=$(mktemp)
# On any exit: no rank of this test may outlive it (a stopped one ignores SIGTERM).
trap 'pkill -9 -f "$program busy"; rm -f "$out"' EXIT
for run in 1 2 3; do
  ACC_COMM_TIMEOUT=$timeout ACC_NUM_THREADS=1 "$accelerate" launch --num_processes 2 "$program" busy >"$out" 2>&1 &
  launcher=$!
  pid=""
  for _ in $(seq 1 100); do  # up to 10 s for the ranks to start
    pid=$(sed -n 's/.*rank 1 pid \([0-9]*\).*/\1/p' "$out")
    [ -n "$pid" ] && grep -q "rank 0 pid" "$out" && break
    sleep 0.1
  done
  [ -n "$pid" ] || { echo "FAIL: the ranks did not start"; cat "$out"; kill $launcher; exit 1; }
  kill -STOP "$pid"
  start=$(date +%s)
  while kill -0 $launcher 2>/dev/null && [ $(( $(date +%s) - start )) -le $((bound + 5)) ]; do
    sleep 0.2
  done
  elapsed=$(( $(date +%s) - start ))
  if kill -0 $launcher 2>/dev/null; then
    echo "FAIL: run $run: launch still runs ${elapsed}s after rank 1 stopped"; cat "$out"
    kill $launcher; exit 1
  fi
  wait $launcher
  status=$?
  # Gone, or a zombie waiting to be reaped: not stopped, not running.
  state=$(ps -o stat= -p "$pid" 2>/dev/null)
  case "$state" in ""|Z*) ;; *) echo "FAIL: run $run: the stopped rank survived ($state)"; exit 1 ;; esac
  [ "$status" -ne 0 ] || { echo "FAIL: run $run: exit status 0"; exit 1; }
  [ "$elapsed" -le "$bound" ] || { echo "FAIL: run $run: the job ended ${elapsed}s after the stop, bound ${bound}s"; cat "$out"; exit 1; }
  grep -q "timed out after $timeout s .*\[1\]" "$out" || { echo "FAIL: run $run: no timeout naming rank 1"; cat "$out"; exit 1; }
  echo "run $run: the job ended ${elapsed}s after rank 1 stopped (status $status)"
done
echo PASS
