#!/usr/bin/env python3
"""plot_link_sweep.py PNG REPORT.json...: tokens/s against the simulated link speed, one line
per lever, from link_sweep.sh's reports (several may be merged; the settings without a link
are left out of the log-scale plot). Needs gnuplot."""
import json
import subprocess
import sys
import tempfile

png, reports = sys.argv[1], sys.argv[2:]
series = {}
for path in reports:
    for setting in json.load(open(path))["settings"]:
        if setting["link_gbps"] == "none":
            continue
        for row in setting["report"]["rows"]:
            if not row["name"].endswith(" bf16 tokens/s"):
                continue
            lever = row["name"][: -len(" bf16 tokens/s")]
            if lever == "FULL_SHARD":
                label = "FULL_SHARD + urgent lane" if setting["urgent_lane"] else "FULL_SHARD, one lane"
            else:
                label = lever + " (+ urgent lane)"
            series.setdefault(label, []).append((float(setting["link_gbps"]), row["value"]))
with tempfile.TemporaryDirectory() as work:
    with open(f"{work}/plot.dat", "w") as f:
        for label, points in series.items():
            f.write(f'"{label}"\n')
            for x, y in sorted(points):
                f.write(f"{x} {y}\n")
            f.write("\n\n")
    script = f"""set terminal png size 960,600 noenhanced
set output "{png}"
set title "GPT-2 small bf16, 8 x 512, 4 ranks as 2 simulated nodes: tokens/s against a simulated link"
set logscale x
set xrange [0.06:1.5]
set xlabel "simulated cross-node link per rank (Gb/s)"
set ylabel "tokens/s"
set key right bottom
plot for [i=0:{len(series) - 1}] "{work}/plot.dat" index i using 1:2 with linespoints title columnheader(1)
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
print(f"wrote {png}", file=sys.stderr)
