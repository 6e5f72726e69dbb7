#!/usr/bin/env python3
"""GPT-2 XL (1.56B parameters, 25 GB of f32 training state) trained on this machine.

    bench/strategies/xl.py [--ranks 4] [--batch 16] [--seq 256] [--steps 10]
                           [--offload-dir DIR] [--out FILE] [--reestimate]

Runs `accelerate launch --num_processes N --config_file configs/fsdp_auto_offload.yaml
train_gpt2 --config xl` on Brown (data/brown, scripts/fetch-data) with bf16 compute where the
CPU multiplies it natively (f32 otherwise), from deferred init, AUTO choosing the plan, with the
offload files under DIR (default: bench/results/xl-offload, created and emptied). Measured in
the same run:

- the whole job's anonymous resident memory (RssAnon summed over the ranks, sampled every
  0.2 s), its peak against the target of 8 GiB, and the offload files' pages mapped in;
- the machine: its lowest MemAvailable, swap used, and whether the kernel killed anything;
- the step: seconds per training step (train_gpt2's tokens/s over the steps after the first)
  against the compute-bound time, (8 N + 16 L T C) FLOPs per token (model FLOPs plus the
  recomputed forward of activation checkpointing) over the machine's GEMM peak (one process on
  every core, measured by train_gpt2 as it starts);
- the disk: raw write and read with O_DIRECT (dd, 4 GiB) next to what rank 0's offload files
  read and wrote per step;
- `accelerate estimate-memory`'s "in memory" per rank for the chosen plan, times the ranks,
  against the anonymous peak;
- the first and the last training loss.
Writes bench/results/xl_np{N}.json (or --out). With --reestimate nothing is trained: the
estimate of an existing result file is computed again by this build's estimate-memory (its
commit recorded in "estimate_commit") and compared with the measure the file holds.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ACC_BUILD_DIR", os.path.join(ROOT, "build"))
GIB = 1 << 30


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def raw_disk(directory):
    """GB/s of a 4 GiB O_DIRECT write and read through dd, in `directory`."""
    path = os.path.join(directory, "raw-disk.bin")
    rates = []
    for args in (["if=/dev/zero", "of=" + path, "oflag=direct"], ["if=" + path, "of=/dev/null", "iflag=direct"]):
        out = subprocess.run(["dd", "bs=64M", "count=64"] + args, capture_output=True, text=True, check=True).stderr
        rates.append(float(re.search(r"copied, ([0-9.]+) s", out).group(1)))
    os.remove(path)
    return {"raw_write_gbs": 4 * GIB / rates[0] / 1e9, "raw_read_gbs": 4 * GIB / rates[1] / 1e9}


def gemm_peak_gflops(bf16):
    """The machine's GEMM peak: one process on every core (train_gpt2 measures it as it starts).
    Not the job's own figure: ranks outnumbering the cores each find moments with a core to
    themselves, and their sum overstates the machine."""
    one_process = "/tmp/acc-xl-peak.yaml"
    with open(one_process, "w") as f:
        f.write("distributed_type: NO\nnum_processes: 1\n")
    out = run([os.path.join(BUILD, "bin", "train_gpt2"), "--config", "tiny", "--data", os.path.join(ROOT, "data", "brown"),
               "--steps", "1", "--batch", "2", "--seq", "16", "--val-batches", "1", "--sample-tokens", "0",
               "--threads", str(os.cpu_count()), "--run_dir", "/tmp/acc-xl-peak", "--config_file", one_process]
              + (["--bf16"] if bf16 else []))
    return float(re.search(r"GEMM peak \(acc matmul, 1024\^3, all ranks\): ([0-9.]+)", out).group(1))


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def meminfo_kib(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """Every 0.2 s: RssAnon and RssFile summed over train_gpt2 processes, MemAvailable, swap."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_anon = self.peak_file = 0
        self.min_available = meminfo_kib("MemAvailable")
        self.swap_used = 0
        self.started = time.time()
        self.peak_at_s = 0.0

    def ranks(self):
        pids = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if f.read().strip() == "train_gpt2":
                            pids.append(pid)
                except OSError:
                    pass
        return pids

    def run(self):
        while not self.stop.is_set():
            pids = self.ranks()
            anon = sum(status_kib(p, "RssAnon") for p in pids)
            if anon > self.peak_anon:
                self.peak_anon, self.peak_at_s = anon, time.time() - self.started
            self.peak_file = max(self.peak_file, sum(status_kib(p, "RssFile") for p in pids))
            self.min_available = min(self.min_available, meminfo_kib("MemAvailable"))
            self.swap_used = max(self.swap_used, meminfo_kib("SwapTotal") - meminfo_kib("SwapFree"))
            time.sleep(0.2)


def estimate_in_memory(ranks, batch, seq, bf16, offload_dir):
    """estimate-memory's row for FULL_SHARD + checkpointing + files: bytes in memory per rank."""
    out = run([os.path.join(BUILD, "bin", "accelerate"), "estimate-memory", "gpt2-xl", "--num_processes",
               str(ranks), "--mixed_precision", "bf16" if bf16 else "no", "--batch", str(batch), "--seq",
               str(seq), "--offload_dir", offload_dir])
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": GIB}
    for line in out.splitlines():
        if "+ files in" in line:
            values = re.findall(r"([0-9.]+) (B|KiB|MiB|GiB)", line)
            in_memory, on_disk = values[-2], values[-1]
            return float(in_memory[0]) * units[in_memory[1]], float(on_disk[0]) * units[on_disk[1]]
    raise SystemExit("estimate-memory printed no row with files:\n" + out)


def write_json(path, result):
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(path + ".tmp", path)


def reestimate(path, offload_dir):
    """The estimate of the run in `path` from this build, against the anonymous peak it measured."""
    with open(path) as f:
        result = json.load(f)
    est_memory, est_disk = estimate_in_memory(result["ranks"], result["batch"], result["seq"],
                                              result["compute"] == "bf16", offload_dir)
    shutil.rmtree(offload_dir, ignore_errors=True)
    anon = result["anon_peak_gib"] * GIB
    commit = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
    result.update({"estimate_in_memory_gib": result["ranks"] * est_memory / GIB,
                   "estimate_on_disk_gib": result["ranks"] * est_disk / GIB,
                   "estimate_vs_measure": result["ranks"] * est_memory / anon, "estimate_commit": commit})
    write_json(path, result)
    print(f"{path}: estimate-memory at {commit}: {result['estimate_in_memory_gib']:.2f} GiB in memory, "
          f"{result['estimate_vs_measure']:.2f}x the measured {result['anon_peak_gib']:.2f} GiB")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--offload-dir", default=os.path.join(ROOT, "bench", "results", "xl-offload"))
    p.add_argument("--out")
    p.add_argument("--reestimate", action="store_true",
                   help="only compute the estimate of the result file again, against its measure")
    a = p.parse_args()
    out_path = a.out or os.path.join(ROOT, "bench", "results", f"xl_np{a.ranks}.json")
    shutil.rmtree(a.offload_dir, ignore_errors=True)
    os.makedirs(a.offload_dir)
    if a.reestimate:
        return reestimate(out_path, a.offload_dir)

    env_text = run([os.path.join(BUILD, "bin", "accelerate"), "env"])
    bf16 = bool(re.search(r"native bf16[^\n]*yes", env_text, re.I))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    disk = raw_disk(a.offload_dir)
    peak_gflops = gemm_peak_gflops(bf16)
    est_memory, est_disk = estimate_in_memory(a.ranks, a.batch, a.seq, bf16, a.offload_dir)

    cmd = [os.path.join(BUILD, "bin", "accelerate"), "launch", "--num_processes", str(a.ranks),
           "--config_file", os.path.join(ROOT, "configs", "fsdp_auto_offload.yaml"),
           "--fsdp_offload_dir", a.offload_dir, "--mixed_precision", "bf16" if bf16 else "no",
           os.path.join(BUILD, "bin", "train_gpt2"), "--config", "xl", "--data", os.path.join(ROOT, "data", "brown"),
           "--steps", str(a.steps), "--batch", str(a.batch), "--seq", str(a.seq), "--val-every", str(10 * a.steps),
           "--val-batches", "1", "--warmup", "2", "--lr", "3e-4", "--sample-tokens", "0", "--threads", "1",
           "--run_dir", os.path.join(a.offload_dir, "run")]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", ACC_COMM_TIMEOUT="600")
    sampler = Sampler()
    sampler.start()
    started = time.time()
    job = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - started
    sampler.stop.set()
    sampler.join()
    log = job.stdout + job.stderr
    with open(out_path.replace(".json", ".log"), "w") as f:
        f.write(log)
    if job.returncode != 0:
        print(log[-4000:])
        raise SystemExit(f"the XL job failed (exit {job.returncode}); log in {out_path.replace('.json', '.log')}")

    losses = [float(x) for x in re.findall(r"loss=([0-9.]+)", log)]
    tokens_per_s = float(re.search(r"final: .*?; ([0-9.]+) tokens/s", log).group(1))
    plan = re.search(r"AUTO chose (.+?): |AUTO: nothing fits the limit; using (.+?), the least", log)
    io = re.search(r"read ([0-9.]+ [KMG]iB|[0-9]+ B), wrote ([0-9.]+ [KMG]iB|[0-9]+ B) from storage", log)
    n, layers, width = 1557611200 - 1024 * 1600, 48, 1600
    flops_per_token = 8 * n + 16 * layers * a.seq * width
    tokens = a.batch * a.seq
    step_s = tokens / tokens_per_s
    compute_bound_s = flops_per_token * tokens / (peak_gflops * 1e9)
    anon = sampler.peak_anon * 1024
    killed = bool(re.search(r"Killed|\boom\b|out of memory", log, re.I))
    result = {
        "cpu": cpu, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ranks": a.ranks, "batch": a.batch, "seq": a.seq, "steps": a.steps,
        "compute": "bf16" if bf16 else "f32", "plan": (plan.group(1) or plan.group(2)) if plan else "?",
        "wall_s": wall, "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
        "step_s": step_s, "compute_bound_s": compute_bound_s, "step_vs_compute_bound": step_s / compute_bound_s,
        "gemm_peak_gflops": peak_gflops,
        "anon_peak_gib": anon / GIB, "anon_peak_at_s": sampler.peak_at_s, "anon_target_gib": 8.0, "file_pages_peak_gib": sampler.peak_file * 1024 / GIB,
        "min_available_gib": sampler.min_available * 1024 / GIB, "swap_used_kib": sampler.swap_used, "killed": killed,
        "estimate_in_memory_gib": a.ranks * est_memory / GIB, "estimate_on_disk_gib": a.ranks * est_disk / GIB,
        "estimate_vs_measure": a.ranks * est_memory / anon if anon else None,
        "rank0_storage_read_written": [io.group(1), io.group(2)] if io else None,
        **disk,
    }
    write_json(out_path, result)
    shutil.rmtree(a.offload_dir, ignore_errors=True)
    print(f"GPT-2 XL, {a.ranks} ranks, {result['compute']}, batch {a.batch} x {a.seq}, {a.steps} steps on {cpu}")
    print(f"  plan: {result['plan']}")
    print(f"  loss {result['first_loss']} -> {result['last_loss']}; {wall:.0f} s in all")
    print(f"  step {step_s:.1f} s = {step_s / compute_bound_s:.2f}x the compute-bound {compute_bound_s:.1f} s "
          f"(GEMM peak {peak_gflops:.0f} GFLOP/s; target <= 1.5x)")
    print(f"  anonymous resident peak, all ranks: {anon / GIB:.2f} GiB at {sampler.peak_at_s:.0f} s "
          f"(target <= 8 GiB); offload file pages "
          f"mapped in at most {result['file_pages_peak_gib']:.2f} GiB; lowest MemAvailable "
          f"{result['min_available_gib']:.2f} GiB; swap used {sampler.swap_used} KiB")
    print(f"  estimate-memory: {result['estimate_in_memory_gib']:.2f} GiB in memory "
          f"({result['estimate_vs_measure']:.2f}x the measure; target within 10%), "
          f"{result['estimate_on_disk_gib']:.2f} GiB on disk")
    print(f"  disk raw: write {disk['raw_write_gbs']:.2f} GB/s, read {disk['raw_read_gbs']:.2f} GB/s (O_DIRECT); "
          f"rank 0's offload files over the run: read {result['rank0_storage_read_written']}")
    print(f"results written to {out_path}")


if __name__ == "__main__":
    sys.exit(main())
