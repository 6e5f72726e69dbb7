#!/bin/sh
# launch_signal.sh ACCELERATE: signals to `accelerate launch` stop every rank within seconds,
# leave no process behind, and give the shell's statuses:
#   SIGINT: 130; SIGTERM (a preemption notice) to ranks that do not handle it: 143;
#   SIGTERM to ranks that ignore the notice, then a second SIGTERM: 143 at once;
#   SIGTERM to ranks that ignore it, and --preempt_grace_s 2 passing: 143.
set -u
accelerate=$1
marker=3600.25  # the ranks sleep this long: a name no other process has
out=$(mktemp)
trap 'pkill -9 -f "sleep $marker"; rm -f "$out"' EXIT

# check LABEL WANT RANK_SCRIPT LAUNCH_OPTS SIGNAL...: the signals, 1 s apart, then the status.
check() {
  label=$1 want=$2 script=$3 opts=$4
  shift 4
  # shellcheck disable=SC2086 # opts holds separate words
  "$accelerate" launch --num_processes 2 $opts sh -c "$script" >"$out" 2>&1 &
  launcher=$!
  for _ in $(seq 1 100); do
    [ "$(pgrep -fc "sleep $marker")" -ge 2 ] && break
    sleep 0.1
  done
  [ "$(pgrep -fc "sleep $marker")" -ge 2 ] || { echo "FAIL: $label: the ranks did not start"; cat "$out"; kill -9 $launcher; exit 1; }
  first=1
  for sig in "$@"; do
    [ $first = 1 ] || sleep 1  # separate deliveries: two pending SIGTERMs would merge into one
    first=0
    kill -"$sig" $launcher
  done
  for _ in $(seq 1 100); do
    kill -0 $launcher 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 $launcher 2>/dev/null; then
    echo "FAIL: $label: accelerate launch still runs 10 s after the last signal"; cat "$out"; kill -9 $launcher; exit 1
  fi
  wait $launcher
  status=$?
  [ "$status" -eq "$want" ] || { echo "FAIL: $label: accelerate launch exited $status, expected $want"; cat "$out"; exit 1; }
  sleep 0.5
  if pgrep -f "sleep $marker" >/dev/null; then
    echo "FAIL: $label: ranks survived"; exit 1
  fi
  echo "$label: every rank stopped, status $status"
}

plain="exec sleep $marker"
deaf="trap '' USR1; exec sleep $marker"  # ignores the preemption notice (inherited by sleep)
check "SIGTERM" 143 "$plain" "" TERM
check "SIGINT" 130 "$plain" "" INT
check "SIGTERM twice" 143 "$deaf" "" TERM TERM
check "SIGTERM and the grace period" 143 "$deaf" "--preempt_grace_s 2" TERM
grep -q "preemption notice" "$out" || { echo "FAIL: launch did not say it passed the notice on"; cat "$out"; exit 1; }
echo PASS
