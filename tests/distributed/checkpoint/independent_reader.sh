#!/bin/sh
# independent_reader.sh PROGRAM: checkpoints saved at 2 ranks under FULL_SHARD, sharded and
# FULL_STATE_DICT, and under SPMD with tensor parallelism (pieces of slices), are read by
# read_checkpoint.py, a reader written from the format's description
# alone; and a shard with one flipped byte is rejected by it.
set -eu
program=$1
here=$(dirname "$0")
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 not found: test skipped"
  exit 77
fi
reader="$here/read_checkpoint.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$here/../mpirun.sh" 2 "$program" save "$dir/sharded" FULL_SHARD
"$here/../mpirun.sh" 2 "$program" save "$dir/full" FULL_SHARD full
"$here/../mpirun.sh" 2 "$program" save "$dir/tp" SPMD_TP
python3 "$reader" "$dir/sharded/ckpt"
python3 "$reader" "$dir/full/ckpt"
python3 "$reader" "$dir/tp/ckpt" >"$dir/tp.txt"
cat "$dir/tp.txt"
grep -q "version 2" "$dir/tp.txt" || { echo "FAIL: the tensor-parallel checkpoint has no slices"; exit 1; }

# Negative check: flip one byte 100 bytes before the end of a shard (inside its tensor data).
cp -r "$dir/sharded/ckpt" "$dir/corrupt"
shard=$(ls "$dir/corrupt"/shard-*.safetensors | head -n 1)
python3 - "$shard" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) - 100)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0xFF]))
PY
status=0
python3 "$reader" "$dir/corrupt" || status=$?
if [ "$status" -ne 1 ]; then
  echo "FAIL: the reader exited $status on a checkpoint with a flipped byte, expected 1"
  exit 1
fi
echo "the flipped byte was detected"
