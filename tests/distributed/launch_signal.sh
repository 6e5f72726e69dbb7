#!/bin/sh
# launch_signal.sh ACCELERATE: SIGTERM (and SIGINT) to `accelerate launch` stops every rank
# within seconds, leaves no process behind, and exits 128 + the signal (143, 130).
set -u
accelerate=$1
marker=3600.25  # the ranks sleep this long: a name no other process has
for sig in TERM INT; do
  "$accelerate" launch --num_processes 2 sh -c "exec sleep $marker" >/dev/null 2>&1 &
  launcher=$!
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(pgrep -fc "sleep $marker")" -ge 2 ] && break
    sleep 0.5
  done
  [ "$(pgrep -fc "sleep $marker")" -ge 2 ] || { echo "FAIL: the ranks did not start"; kill -9 $launcher; exit 1; }
  kill -$sig $launcher
  for _ in $(seq 1 20); do
    kill -0 $launcher 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 $launcher 2>/dev/null; then
    echo "FAIL: accelerate launch still runs 10 s after SIG$sig"; pkill -9 -f "sleep $marker"; kill -9 $launcher; exit 1
  fi
  wait $launcher
  status=$?
  case $sig in TERM) want=143 ;; INT) want=130 ;; esac  # 128 + the signal, the shell's convention
  [ "$status" -eq "$want" ] || { echo "FAIL: accelerate launch exited $status after SIG$sig, expected $want"; exit 1; }
  sleep 0.5
  if pgrep -f "sleep $marker" >/dev/null; then
    echo "FAIL: ranks survived SIG$sig"; pkill -9 -f "sleep $marker"; exit 1
  fi
  echo "SIG$sig: every rank stopped"
done
