#!/bin/sh
# quickstart.sh ACCELERATE QUICKSTART NP CONFIG [LAUNCH OPTIONS...]: runs the quickstart program
# (the facade's user loop) on NP ranks with an accelerate config and any further launch options,
# on a small token file made here, and checks that it trained to a finite loss.
set -eu
accelerate=$1 program=$2 np=$3 config=$4
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/data/brown"
# An llm.c token file: 256 int32 header (magic, version, count), then uint16 tokens.
python3 - "$dir/data/brown/train.bin" <<'PY'
import struct, sys
n = 16 * 128 * 4 + 1
tokens = [(i * 7 + i // 13) % 1000 for i in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *tokens))
PY
cd "$dir"
out=$("$accelerate" launch --num_processes "$np" --config_file "$config" "$@" "$program" 2>&1) || {
  echo "$out"
  exit 1
}
echo "$out"
echo "$out" | grep -Eq "quickstart: [A-Z0-9_]+, 4 steps, last loss on rank 0 [0-9]+\.[0-9]+"
