#!/bin/sh
# launch_missing_program.sh ACCELERATE: a program that does not exist is named before any rank
# starts, and the launch exits 127 (the shell's "command not found"; mpirun's own status read as
# SIGILL).
set -u
out=$("$1" launch --num_processes 2 /no/such/program 2>&1)
status=$?
[ "$status" -eq 127 ] || { echo "$out"; echo "FAIL: exit status $status, expected 127"; exit 1; }
echo "$out" | grep -q "program '/no/such/program' not found" || { echo "$out"; echo "FAIL: not named"; exit 1; }
out=$("$1" launch --num_processes 2 no_such_command_on_path 2>&1)
[ $? -eq 127 ] || { echo "$out"; echo "FAIL: a command not on PATH"; exit 1; }
echo "ok: named, exit 127"
