#!/bin/sh
# reshard.sh PROGRAM: a checkpoint saved under FULL_SHARD at 4 ranks resumes under SHARD_GRAD_OP
# at 2 ranks and on one process, sharded and FULL_STATE_DICT alike, and tensor-parallel slices
# and pipeline stages resume as flat pieces and back, each matching the run that never stopped.
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
# Tensor parallelism: slices over `model` saved on a (2, 2) mesh resume as FULL_SHARD's flat
# pieces at 2 ranks and as whole parameters on one process; FULL_SHARD's checkpoint from 4
# ranks resumes as slices on a (1, 2) mesh.
"$here/../mpirun.sh" 4 "$program" save "$dir/tp" SPMD_TP
"$here/../mpirun.sh" 2 "$program" resume "$dir/tp" FULL_SHARD
ACC_RANKS_PER_NODE= "$program" resume "$dir/tp" NO_SHARD
"$here/../mpirun.sh" 2 "$program" resume "$dir/sharded" SPMD_TP
# Pipeline stages: 4 stages' pieces (the tied wte on the first and the last) resume as
# FULL_SHARD's flat pieces at 2 ranks and as one stage on one process; FULL_SHARD's checkpoint
# from 4 ranks resumes as 2 stages.
"$here/../mpirun.sh" 4 "$program" save "$dir/pp" PIPELINE
"$here/../mpirun.sh" 2 "$program" resume "$dir/pp" FULL_SHARD
ACC_RANKS_PER_NODE= "$program" resume "$dir/pp" PIPELINE
"$here/../mpirun.sh" 2 "$program" resume "$dir/sharded" PIPELINE
# A grid of 2 stages x 2 replicas (each stage's parameters in ranges over its replicas) resumes
# as 2 whole stages, and the 4 stages' checkpoint as 1 stage on 2 replicas.
"$here/../mpirun.sh" 4 "$program" save "$dir/grid" PIPELINE_GRID
"$here/../mpirun.sh" 2 "$program" resume "$dir/grid" PIPELINE
"$here/../mpirun.sh" 2 "$program" resume "$dir/pp" PIPELINE_GRID
# Stages split over 2 tensor-parallel ranks each (2 x 2: slices of the stage's parameters)
# resume as FULL_SHARD's flat pieces at 2 ranks, and the 4 stages' checkpoint as 1 stage split
# over 2 ranks.
"$here/../mpirun.sh" 4 "$program" save "$dir/pp_tp" PIPELINE_TP
"$here/../mpirun.sh" 2 "$program" resume "$dir/pp_tp" FULL_SHARD
"$here/../mpirun.sh" 2 "$program" resume "$dir/pp" PIPELINE_TP
