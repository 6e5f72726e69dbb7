#!/bin/sh
# expect_failure.sh SECONDS REGEX COMMAND...: passes when COMMAND exits non-zero within SECONDS
# and its output (stdout + stderr) matches the extended REGEX.
limit=$1
pattern=$2
shift 2
start=$(date +%s)
output=$("$@" 2>&1)
status=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$output"
echo "--- exit status $status after ${elapsed}s"
[ "$status" -ne 0 ] || { echo "FAIL: expected a non-zero exit status"; exit 1; }
[ "$elapsed" -le "$limit" ] || { echo "FAIL: took ${elapsed}s, bound ${limit}s"; exit 1; }
printf '%s\n' "$output" | grep -Eq "$pattern" || { echo "FAIL: no line matches: $pattern"; exit 1; }
echo "PASS"
