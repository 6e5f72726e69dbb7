#!/usr/bin/python3
"""Collects bench/peers/run.sh's per-case JSON files into bench/results/peers.json and a Markdown
table (bench/results/peers.md, shown in the README): tokens/s and per-rank peak RSS of acc and
PyTorch side by side, their ratios against the targets, and how far the per-step losses of the
two implementations are apart (f32: the same computation, so ~1e-6 relative).

    report.py WORK_DIR OUT.json OUT.md
"""
import glob
import json
import os
import sys
import time

# The wanted acc / PyTorch tokens/s on one process, by dtype; at 2 ranks FULL_SHARD against DDP,
# with at most this per-rank peak RSS ratio.
TARGETS = {"f32": 3.0, "bf16": 4.0}
DISTRIBUTED_TARGET, DISTRIBUTED_RSS_TARGET = 2.0, 0.6


def load(path):
    with open(path) as f:
        return json.load(f)


def max_relative_gap(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def main(work, out_json, out_md):
    probe = load(os.path.join(work, "probe.json"))
    rows = []
    # In the order run.sh ran the cases.
    for torch_file in sorted(glob.glob(os.path.join(work, "*.torch.json")), key=os.path.getmtime):
        name = os.path.basename(torch_file)[: -len(".torch.json")]
        peer = load(torch_file)
        for acc_file in sorted(glob.glob(os.path.join(work, name + ".acc*.json"))):
            acc = load(acc_file)
            distributed = acc["ranks"] > 1
            target = (DISTRIBUTED_TARGET if acc["strategy"] == "FULL_SHARD" else None) if distributed \
                else TARGETS[acc["dtype"]]
            speed = acc["tokens_per_s"] / peer["tokens_per_s"]
            rss = max(acc["peak_rss_mb"]) / max(peer["peak_rss_mb"])
            rss_target = DISTRIBUTED_RSS_TARGET if distributed and acc["strategy"] == "FULL_SHARD" else None
            rows.append({
                "case": name, "model": acc["model"], "batch": acc["batch"], "seq": acc["seq"],
                "ranks": acc["ranks"], "threads_per_rank": acc["threads"], "dtype": acc["dtype"],
                "acc": acc["strategy"] if distributed else "one process", "pytorch": peer["strategy"],
                "acc_tokens_per_s": acc["tokens_per_s"], "pytorch_tokens_per_s": peer["tokens_per_s"],
                "speed_ratio": speed, "speed_target": target,
                "speed_met": None if target is None else speed >= target,
                "acc_peak_rss_mb": max(acc["peak_rss_mb"]), "pytorch_peak_rss_mb": max(peer["peak_rss_mb"]),
                "rss_ratio": rss, "rss_target": rss_target,
                "rss_met": None if rss_target is None else rss <= rss_target,
                "loss_max_relative_gap": max_relative_gap(acc["losses"], peer["losses"]),
                "acc_losses": acc["losses"], "pytorch_losses": peer["losses"]})
    cpu = load(glob.glob(os.path.join(work, "*.acc*.json"))[0])["cpu"]
    result = {"cpu": cpu, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "pytorch": probe, "rows": rows}
    with open(out_json + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(out_json + ".tmp", out_json)

    def mark(met):
        return "" if met is None else (" ✓" if met else " ✗")

    lines = [f"acc next to {probe['framework']} on {cpu} (BLAS {probe['blas']}"
             + (f", OPENBLAS_CORETYPE={probe['openblas_coretype']}" if probe["openblas_coretype"] else "")
             + f", its f32 GEMM {probe['gemm_gflops']:.0f} GFLOP/s), same GPT-2, same batches, "
             f"{result['timestamp']}. PyTorch's FSDP does not run here: `{probe['fsdp_error']}`.", "",
             "| case | ranks × threads | acc | PyTorch | acc tokens/s | PyTorch tokens/s | speed (target) "
             "| peak RSS/rank acc / PyTorch | loss gap |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speed = f"{r['speed_ratio']:.2f}×" + (f" (≥ {r['speed_target']:g}×)" if r["speed_target"] else "")
        rss = f"{r['acc_peak_rss_mb']:.0f} / {r['pytorch_peak_rss_mb']:.0f} MB = {r['rss_ratio']:.2f}×" \
            + (f" (≤ {r['rss_target']:g}×)" if r["rss_target"] else "")
        lines.append(f"| GPT-2 {r['model']} B={r['batch']} T={r['seq']} {r['dtype']} | {r['ranks']} × "
                     f"{r['threads_per_rank']} | {r['acc']} | {r['pytorch']} | {r['acc_tokens_per_s']:.0f} | "
                     f"{r['pytorch_tokens_per_s']:.0f} | {speed}{mark(r['speed_met'])} | {rss}{mark(r['rss_met'])} "
                     f"| {r['loss_max_relative_gap']:.1e} |")
    lines.append("")
    lines.append("Loss gap: the largest relative difference between the two frameworks' per-step losses "
                 "(f32 computes the same function; bf16 rounds differently in each).")
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(*sys.argv[1:])
