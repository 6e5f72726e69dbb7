#!/bin/sh
# reshard.sh PROGRAM: a checkpoint saved under FULL_SHARD at 4 ranks resumes under SHARD_GRAD_OP
# at 2 ranks and on one process, sharded and FULL_STATE_DICT alike, each matching the run that
# never stopped.
set -eu
program=$1
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for type in sharded full; do
  "$here/../mpirun.sh" 4 "$program" save "$dir/$type" FULL_SHARD $type
  "$here/../mpirun.sh" 2 "$program" resume "$dir/$type" SHARD_GRAD_OP
  ACC_RANKS_PER_NODE= "$program" resume "$dir/$type" NO_SHARD
done
