#!/bin/sh
# bench/checkpoint/run.sh [--medium] [ARGS...]: bench_checkpoint for GPT-2 small at 1, 2 and 4
# ranks (and medium with --medium), each run adding its row to bench/results/checkpoint.json
# (a fresh file per invocation). The checkpoints go to a temporary directory under --dir DIR
# (default ${TMPDIR:-/tmp}; pass another to time another disk), removed at the end; it needs
# ~12 bytes per parameter free (1.5 GB for small, 4.3 GB for medium). Other ARGS go to every run.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ACC_BUILD_DIR:-$root/build}/bin/bench_checkpoint
cd "$root"
models=small
parent=${TMPDIR:-/tmp}
n=$#
while [ "$n" -gt 0 ]; do  # take out --medium and --dir DIR, keep the rest in order
  a=$1
  shift
  n=$((n - 1))
  case $a in
    --medium) models="small medium" ;;
    --dir) parent=$1; shift; n=$((n - 1)) ;;
    --dir=*) parent=${a#--dir=} ;;
    *) set -- "$@" "$a" ;;
  esac
done
out=bench/results/checkpoint.json
tmp_out=$(mktemp "${TMPDIR:-/tmp}/acc_bench_checkpoint_json.XXXXXX")
mkdir -p "$parent"
work=$(mktemp -d "$parent/acc_bench_checkpoint_run.XXXXXX")
trap 'rm -rf "$work" "$tmp_out"' EXIT
trap 'exit 130' INT TERM
rm -f "$tmp_out"
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
export ACC_COMM_TIMEOUT=${ACC_COMM_TIMEOUT:-120}
for model in $models; do
  for np in 1 2 4; do
    echo "=== GPT-2 $model, $np rank(s)" >&2
    if [ "$np" = 1 ]; then
      "$bin" --model "$model" --dir "$work" --out "$tmp_out" "$@"
    else
      ACC_NUM_THREADS=1 mpirun --oversubscribe --bind-to none $root_flag -np "$np" \
        "$bin" --model "$model" --dir "$work" --out "$tmp_out" "$@"
    fi
  done
done
mkdir -p bench/results
cp "$tmp_out" "$out.tmp"
mv "$out.tmp" "$out"
echo "results written to $out"
