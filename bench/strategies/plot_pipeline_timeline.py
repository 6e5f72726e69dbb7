#!/usr/bin/env python3
"""plot_pipeline_timeline.py PNG TITLE PREFIX: one training step of the PIPELINE strategy as
each stage ran it, from the files ACC_PIPELINE_TIMELINE=PREFIX wrote (PREFIX.rank<R>.tsv: the
step's start on the machine's steady clock, then F, B or W, microbatch, chunk, start and end in
seconds): a row per rank, lined up by the ranks' step starts, forwards, backwards and
zero_bubble's weight parts as boxes numbered by microbatch (microbatch.chunk when interleaved);
the gaps are the bubble and the waits. Needs gnuplot."""
import glob
import re
import subprocess
import sys
import tempfile

png, title, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
files = sorted(glob.glob(prefix + ".rank*.tsv"), key=lambda f: int(re.search(r"rank(\d+)\.tsv$", f).group(1)))
if not files:
    sys.exit(f"plot_pipeline_timeline.py: no {prefix}.rank*.tsv files")
ranks = len(files)

def step_start(path):
    first = open(path).readline().split()
    return float(first[2]) if first[:2] == ["#", "step_start_s"] else 0.0


# Each rank's times are from its own step's start; the earliest rank's start is 0.
starts = [step_start(path) for path in files]
origin = min(starts)
with tempfile.TemporaryDirectory() as work:
    end = 0.0
    kinds = {"F": ("forward", "#4477aa"), "B": ("backward", "#ee8866"), "W": ("weight gradients", "#bbcc33")}
    files_of = {kind: open(f"{work}/{kind}.dat", "w") for kind in kinds}
    for rank, path in enumerate(files):
        shift = starts[rank] - origin
        for line in open(path):
            if line.startswith("#"):
                continue
            kind, micro, chunk, start, stop = line.split()
            start, stop = float(start) + shift, float(stop) + shift
            label = micro if chunk == "0" else f"{micro}.{chunk}"
            end = max(end, stop)
            # x centre, y, half width, half height, label
            files_of[kind].write(f"{(start + stop) / 2} {rank} {(stop - start) / 2} 0.35 {label}\n")
    for f in files_of.values():
        f.close()
    present = [kind for kind in kinds if open(f"{work}/{kind}.dat").read()]
    boxes = [f'"{work}/{k}.dat" using 1:2:3:4 with boxxyerror lc rgb "{kinds[k][1]}" title "{kinds[k][0]}"'
             for k in present]
    labels = [f'"{work}/{k}.dat" using 1:2:5 with labels notitle' for k in present]
    script = f"""set terminal png size 1100,{140 + 70 * ranks} noenhanced
set output "{png}"
set title "{title}"
set xlabel "seconds from the step's start on the earliest rank"
set ylabel "rank"
set yrange [{ranks - 0.5}:-0.5]
set ytics 1
set xrange [0:{end * 1.02}]
set style fill solid 0.8 border lc rgb "black"
set key outside right top
plot {", ".join(boxes + labels)}
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
print(f"wrote {png}", file=sys.stderr)
