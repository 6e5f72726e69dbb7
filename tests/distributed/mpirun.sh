#!/bin/sh
# mpirun.sh NP PROGRAM [ARGS...]: runs PROGRAM on NP ranks of this machine. Oversubscribes
# (tests run 4 ranks on 2 cores) and adds --allow-run-as-root only when we are root.
np=$1
shift
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
exec mpirun --oversubscribe --bind-to none $root_flag -np "$np" "$@"
