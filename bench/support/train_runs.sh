# Sourced by the benchmarks that train GPT-2 tiny on Brown with train_gpt2 and compare final
# losses (bench/diloco/run.sh, bench/strategies/quantized.sh). Expects root, build, steps and
# work (a scratch folder) to be set; the cpu variable is set here.
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)

# train_run NP CONFIG [KEY VALUE...]: a JSON object of the final line's train loss, val loss and
# tokens/s; config keys after CONFIG go on accelerate launch's command line
train_run() {
  np=$1 config=$2
  shift 2
  out=$("$build/bin/accelerate" launch --num_processes "$np" --config_file "$config" "$@" \
    "$build/bin/train_gpt2" --config tiny --data "$root/data/brown" --steps "$steps" \
    --val-every "$steps" --sample-tokens 0 --run_dir "$work/run" 2>&1) || { echo "$out" >&2; exit 1; }
  line=$(echo "$out" | grep "final:")
  echo "np $np $(basename "$config") $*: $line" >&2
  echo "$line" | sed -n 's/.*train loss \([0-9.]*\) .*val loss \([0-9.]*\) .*; \([0-9]*\) tokens\/s.*/{"train_loss": \1, "val_loss": \2, "tokens_per_s": \3}/p'
}
# val RUN: its validation loss; ratio A B: A's over B's, 4 decimals
val() { echo "$1" | sed 's/.*"val_loss": \([0-9.]*\).*/\1/'; }
ratio() { awk -v a="$(val "$1")" -v b="$(val "$2")" 'BEGIN { printf "%.4f", a / b }'; }
