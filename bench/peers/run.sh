#!/bin/sh
# bench/peers/run.sh: acc next to PyTorch on this machine, same model, same batches, one run.
# Installs Debian's PyTorch and OpenBLAS (without libopenblas0-pthread, Debian's torch runs
# its matmuls on the reference BLAS, ~20x slower), builds acc, fetches the Brown corpus, then
# for each case trains GPT-2 with acc (bench_peers, which also writes the initial weights) and
# with PyTorch (torch_gpt2.py, started from those weights), and writes
# bench/results/peers.json and bench/results/peers.md (report.py).
#   PEERS_QUICK=1 bench/peers/run.sh   only the tiny cases (a minute)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
./scripts/setup python3-torch libopenblas0-pthread
./scripts/build >/dev/null
./scripts/fetch-data >/dev/null
python=/usr/bin/python3  # Debian's, where python3-torch is
bin=${ACC_BUILD_DIR:-$root/build}/bin/bench_peers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=data/brown/train.bin
cores=$(nproc)
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root

# OpenBLAS picks its kernels by CPU; on AVX-512 machines it may not pick SkylakeX's. Keep the
# faster choice for every torch run below.
$python bench/peers/torch_gpt2.py --probe --out "$work/probe.json" 2>/dev/null
if grep -q avx512f /proc/cpuinfo; then
  OPENBLAS_CORETYPE=SkylakeX $python bench/peers/torch_gpt2.py --probe --out "$work/probe_skx.json" 2>/dev/null
  if $python -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(b['gemm_gflops'] <= a['gemm_gflops'])" \
       "$work/probe.json" "$work/probe_skx.json"; then
    export OPENBLAS_CORETYPE=SkylakeX
    mv "$work/probe_skx.json" "$work/probe.json"
  fi
fi

# case NAME MODEL HEADS BATCH SEQ STEPS RANKS [bf16]
run_case() {
  name=$1 model=$2 heads=$3 batch=$4 seq=$5 steps=$6 ranks=$7 dtype=${8:-f32}
  flag=""
  [ "$dtype" = bf16 ] && flag=--bf16
  common="--batch $batch --seq $seq --steps $steps --data $data"
  if [ "$ranks" = 1 ]; then
    ACC_NUM_THREADS=$cores "$bin" --model "$model" $common $flag --init "$work/$name.init.safetensors" \
      --out "$work/$name.acc.json" --config_file configs/fsdp_no_shard.yaml
  else
    for strategy in NO_SHARD FULL_SHARD; do
      ACC_NUM_THREADS=$((cores / ranks)) ACC_COMM_TIMEOUT=300 mpirun --oversubscribe --bind-to none $root_flag \
        -np "$ranks" "$bin" --model "$model" $common $flag --init "$work/$name.init.safetensors" \
        --out "$work/$name.acc_$strategy.json" --config_file "configs/fsdp_$(echo $strategy | tr A-Z a-z).yaml"
    done
  fi
  $python bench/peers/torch_gpt2.py --init "$work/$name.init.safetensors" --n_head "$heads" $common $flag \
    --ranks "$ranks" --out "$work/$name.torch.json"
}

run_case tiny_f32 tiny 4 8 256 6 1
run_case tiny_bf16 tiny 4 8 256 6 1 bf16
if [ "${PEERS_QUICK:-0}" != 1 ]; then
  run_case small_b4_t256_f32 small 12 4 256 4 1
  run_case small_b4_t256_bf16 small 12 4 256 4 1 bf16
  run_case small_b8_t512_f32 small 12 8 512 4 1
  run_case small_b8_t512_bf16 small 12 8 512 4 1 bf16
  run_case small_b8_t512_2ranks_f32 small 12 8 512 4 2
fi
$python bench/peers/report.py "$work" bench/results/peers.json bench/results/peers.md
