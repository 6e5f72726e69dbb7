#!/bin/sh
# bench/strategies/link_sweep.sh GBPS... : the levers for many machines against the speed of the
# link between machines. GPT-2 small, global batch 8 x 512, bf16, 4 ranks x 1 thread as 2
# simulated nodes of 2 (ACC_RANKS_PER_NODE=2), two warm-up steps and one timed step per case: first
# with no link (one machine's speed), then with the cross-node link simulated at each GBPS
# (ACC_SIM_CROSS_NODE_GBPS, 50 us latency); at each, plain FULL_SHARD with one lane
# (ACC_URGENT_LANE=0, the baseline) and every lever of bench_strategies --cases levers with
# the urgent lane (plain FULL_SHARD then shows what the lane alone buys). Writes
# $SWEEP_OUT.json (one bench_strategies report per setting) and $SWEEP_OUT.png (tokens/s
# against link speed per lever, plot_link_sweep.py); SWEEP_OUT defaults to
# bench/results/link_sweep. SWEEP_LEVERS (default every lever) picks the urgent-lane levers.
# Every timing with a GBPS is simulated.
set -eu
. "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || { echo "usage: $0 GBPS... (e.g. 3 1 0.3)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${SWEEP_OUT:-bench/results/link_sweep}

# case_run NAME LEVERS [VAR=VALUE...]: one bench_strategies run of LEVERS into $work/NAME.json
case_run() {
  name=$1 levers=$2
  shift 2
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 "$@" mpirun --oversubscribe --bind-to none $root_flag -np 4 \
    "$bin" --cases levers --levers "$levers" --precision bf16 --steps 1 --out "$work/$name.json" >&2
}

settings=""
for gbps in none "$@"; do
  for lanes in 0 1; do
    name="link_${gbps}_lanes_$((lanes + 1))"
    levers=plain
    [ "$lanes" = 0 ] || levers=${SWEEP_LEVERS:-plain,hybrid,node_copies,int8_gathers,int8_gradients,all}
    if [ "$gbps" = none ]; then
      case_run "$name" "$levers" ACC_URGENT_LANE=$lanes
    else
      case_run "$name" "$levers" ACC_URGENT_LANE=$lanes ACC_SIM_CROSS_NODE_GBPS="$gbps" ACC_SIM_CROSS_NODE_LATENCY_US=50
    fi
    settings="$settings${settings:+,
}  {\"link_gbps\": \"$gbps\", \"urgent_lane\": $lanes, \"report\": $(cat "$work/$name.json")}"
  done
done
printf '{\n"bench": "bench/strategies/link_sweep.sh", "simulated": true,\n"settings": [\n%s\n]}\n' "$settings" \
  > "$out.json"

python3 "$root/bench/strategies/plot_link_sweep.py" "$out.png" "$out.json"
echo "wrote $out.json and $out.png" >&2
