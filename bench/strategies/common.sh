# Sourced by bench/strategies' scripts: sets root (the repository, also the working directory),
# bin (bench_strategies of $ACC_BUILD_DIR, else build/) and root_flag (mpirun's
# --allow-run-as-root when run as root).
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ACC_BUILD_DIR:-$root/build}/bin/bench_strategies
cd "$root"
root_flag=""
if [ "$(id -u)" = 0 ]; then root_flag=--allow-run-as-root; fi
