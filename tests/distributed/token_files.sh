#!/bin/sh
# token_files.sh DIR: small llm.c token files DIR/train.bin (4096 tokens) and DIR/val.bin (1024)
# for the training programs' end-to-end tests: a 256 int32 header (magic, version, count), then
# uint16 tokens.
set -eu
mkdir -p "$1"
python3 - "$1" <<'PY'
import struct, sys
for name, n in (("train.bin", 4096), ("val.bin", 1024)):
    tokens = [(i * 7 + i // 13) % 1000 for i in range(n)]
    with open(sys.argv[1] + "/" + name, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *tokens))
PY
