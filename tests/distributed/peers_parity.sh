#!/bin/sh
# peers_parity.sh BENCH_PEERS SOURCE_DIR: numerical parity with an independent implementation.
# acc and a plain-PyTorch GPT-2 (bench/peers/torch_gpt2.py) train GPT-2 tiny from the same
# initial weights on the same batches, in f32: one process each, then acc FULL_SHARD against
# PyTorch DDP at 2 ranks. Every step's loss must agree within 1e-5 relative. Skipped (77) when
# Debian's python3-torch is not installed (bench/peers/run.sh installs it).
set -eu
bin=$1 src=$2
python=/usr/bin/python3
$python -c "import torch" 2>/dev/null || { echo "python3-torch is not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="--batch 4 --seq 64 --steps 5 --data $src/data/brown/train.bin"
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root

ACC_NUM_THREADS=2 "$bin" --model tiny $common --init "$work/init.safetensors" --out "$work/acc1.json" \
  --config_file "$src/configs/fsdp_no_shard.yaml"
$python "$src/bench/peers/torch_gpt2.py" --init "$work/init.safetensors" --n_head 4 $common --threads 2 \
  --out "$work/torch1.json"
ACC_NUM_THREADS=1 ACC_COMM_TIMEOUT=60 mpirun --oversubscribe --bind-to none $root_flag -np 2 "$bin" --model tiny \
  $common --out "$work/acc2.json" --config_file "$src/configs/fsdp_full_shard.yaml"
$python "$src/bench/peers/torch_gpt2.py" --init "$work/init.safetensors" --n_head 4 $common --ranks 2 \
  --out "$work/torch2.json"

$python - "$work" <<'PY'
import json, sys
work = sys.argv[1]
failed = False
for acc, peer in (("acc1", "torch1"), ("acc2", "torch2")):
    a, t = (json.load(open(f"{work}/{n}.json")) for n in (acc, peer))
    for step, (x, y) in enumerate(zip(a["losses"], t["losses"])):
        gap = abs(x - y) / abs(y)
        ok = gap <= 1e-5
        failed |= not ok
        print(f"{a['strategy']} x{a['ranks']} vs {t['strategy']}: step {step} acc {x:.7f} pytorch {y:.7f} "
              f"relative gap {gap:.1e}{'' if ok else '  > 1e-5'}")
sys.exit(1 if failed else 0)
PY
