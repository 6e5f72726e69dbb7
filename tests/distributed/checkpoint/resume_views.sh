#!/bin/sh
# resume_views.sh TRAIN_GPT2: `--resume auto` goes by what rank 0 finds in --checkpoint_dir.
# Rank 1 is given a directory without checkpoints (as a node that sees the files late would
# see it); both ranks resume from rank 0's step_000002 and end with the losses of a run that
# was never interrupted. (Had each rank looked for itself, rank 0 would load while rank 1
# trained from scratch, and the job would fail on mismatched collectives.)
set -eu
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
"$here/../token_files.sh" "$dir/data"
cd "$dir"
# Each rank's own --checkpoint_dir: ckpt0, ckpt1.
cat >by_rank.sh <<SCRIPT
#!/bin/sh
exec "$program" "\$@" --checkpoint_dir "ckpt\${OMPI_COMM_WORLD_RANK:?not run by OpenMPI}"
SCRIPT
chmod +x by_rank.sh
run() {  # run PROGRAM [OPTIONS...]
  p=$1
  shift
  "$here/../mpirun.sh" 2 "$p" --config tiny --data data --steps 4 --batch 4 --seq 16 --val-every 2 \
    --val-batches 2 --sample-tokens 0 --threads 1 "$@" 2>&1
}
final() { echo "$1" | grep -o "final: train loss [0-9.]*.*val loss [0-9.]*"; }

straight=$(run "$program" --save_every 2 --checkpoint_dir ckpt0) || { echo "$straight"; exit 1; }
[ -d ckpt0/step_000002 ] || { echo "$straight"; echo "FAIL: no ckpt0/step_000002"; exit 1; }
rm -rf ckpt0/step_000004
echo step_000002 >ckpt0/latest
mkdir ckpt1
resumed=$(run ./by_rank.sh --resume auto) || { echo "$resumed"; echo "FAIL: the resumed run failed"; exit 1; }
echo "$resumed" | grep -q "resumed from ckpt0/step_000002 at step 2" ||
  { echo "$resumed"; echo "FAIL: did not resume from rank 0's checkpoint"; exit 1; }
[ -n "$(final "$straight")" ] || { echo "$straight"; echo "FAIL: no final losses"; exit 1; }
echo "straight: $(final "$straight")"
echo "resumed:  $(final "$resumed")"
[ "$(final "$straight")" = "$(final "$resumed")" ] || { echo "FAIL: the resumed run ended elsewhere"; exit 1; }
echo "PASS"
