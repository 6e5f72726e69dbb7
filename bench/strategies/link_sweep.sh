#!/bin/sh
# bench/strategies/link_sweep.sh GBPS... : the levers for many machines against the speed of the
# link between machines. GPT-2 small, global batch 8 x 512, bf16, 4 ranks x 1 thread as 2
# simulated nodes of 2 (ACC_RANKS_PER_NODE=2), one warm-up and one timed step per case: first
# with no link (one machine's speed), then with the cross-node link simulated at each GBPS
# (ACC_SIM_CROSS_NODE_GBPS, 50 us latency); at each, every lever of bench_strategies --cases
# levers with one lane (ACC_URGENT_LANE=0) and with the urgent lane. Writes
# bench/results/link_sweep.json (one bench_strategies report per setting) and
# bench/results/link_sweep.png (tokens/s against link speed per lever; gnuplot).
# Every timing with a GBPS is simulated.
set -eu
. "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || { echo "usage: $0 GBPS... (e.g. 3 1 0.3)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# case NAME [VAR=VALUE...]: one bench_strategies run of the levers into $work/NAME.json
case_run() {
  name=$1
  shift
  env ACC_NUM_THREADS=1 ACC_RANKS_PER_NODE=2 "$@" mpirun --oversubscribe --bind-to none $root_flag -np 4 \
    "$bin" --cases levers --precision bf16 --steps 1 --out "$work/$name.json" | grep -v "^\[" >&2
}

settings=""
for gbps in none "$@"; do
  for lanes in 0 1; do
    name="link_${gbps}_lanes_$((lanes + 1))"
    if [ "$gbps" = none ]; then
      case_run "$name" ACC_URGENT_LANE=$lanes
    else
      case_run "$name" ACC_URGENT_LANE=$lanes ACC_SIM_CROSS_NODE_GBPS="$gbps" ACC_SIM_CROSS_NODE_LATENCY_US=50
    fi
    settings="$settings${settings:+,
}  {\"link_gbps\": \"$gbps\", \"urgent_lane\": $lanes, \"report\": $(cat "$work/$name.json")}"
  done
done
printf '{\n"bench": "bench/strategies/link_sweep.sh", "simulated": true,\n"settings": [\n%s\n]}\n' "$settings" \
  > bench/results/link_sweep.json

# The plot: one line per lever (rows "<lever> bf16 tokens/s"), x the link speed.
python3 - "$work" "$@" <<'PY'
import json, sys
work, speeds = sys.argv[1], sys.argv[2:]
report = json.load(open("bench/results/link_sweep.json"))
series = {}
for s in report["settings"]:
    if s["link_gbps"] == "none":
        continue
    for row in s["report"]["rows"]:
        if not row["name"].endswith(" bf16 tokens/s"):
            continue
        lever = row["name"][: -len(" bf16 tokens/s")]
        if s["urgent_lane"] == 0 and lever != "FULL_SHARD":
            continue  # one lane: only plain FULL_SHARD, the baseline
        label = lever + (" (one lane)" if s["urgent_lane"] == 0 else "")
        series.setdefault(label, []).append((float(s["link_gbps"]), row["value"]))
with open(f"{work}/plot.dat", "w") as f:
    for label, points in series.items():
        f.write(f'"{label}"\n')
        for x, y in sorted(points):
            f.write(f"{x} {y}\n")
        f.write("\n\n")
with open(f"{work}/plot.gp", "w") as f:
    f.write('set terminal png size 900,560\nset output "bench/results/link_sweep.png"\n')
    f.write('set title "GPT-2 small bf16, 4 ranks as 2 simulated nodes: tokens/s against the simulated link"\n')
    f.write('set logscale x\nset xlabel "simulated cross-node link (Gb/s)"\nset ylabel "tokens/s"\nset key left top\n')
    f.write(f'plot for [i=0:{len(series) - 1}] "{work}/plot.dat" index i using 1:2 with linespoints title columnheader(1)\n')
PY
gnuplot "$work/plot.gp"
echo "wrote bench/results/link_sweep.json and bench/results/link_sweep.png" >&2
