#!/bin/sh
# help_all.sh ACCELERATE: every command `accelerate --help` lists answers `--help` with its own
# usage line on stdout and exit status 0.
set -eu
accelerate=$1
commands=$("$accelerate" --help | sed -n 's/^  \([a-z-]*\)\t.*/\1/p')
[ -n "$commands" ] || { echo "FAIL: accelerate --help lists no commands"; exit 1; }
for c in $commands; do
  out=$("$accelerate" "$c" --help) || { echo "FAIL: accelerate $c --help exits $?"; exit 1; }
  echo "$out" | head -1 | grep -q "^usage: accelerate $c\b" ||
    { echo "$out"; echo "FAIL: accelerate $c --help does not print its usage first"; exit 1; }
  echo "accelerate $c --help: ok"
done
