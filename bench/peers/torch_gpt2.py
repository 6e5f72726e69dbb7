#!/usr/bin/python3
"""PyTorch's half of the peer benchmark (bench/peers/run.sh).

A GPT-2 written here in plain PyTorch with Hugging Face's parameter names and layout, started
from the .safetensors file bench_peers (acc) wrote, trained with the same loop on the same
batches: in-order windows of an llm.c token file, AdamW (lr 3e-4, weight decay 0.1 on matrices
only), gradient clipping at 1.0. Writes the per-step losses, tokens/s and per-rank peak RSS as
JSON in bench_peers' schema.

    torch_gpt2.py --init FILE --data FILE --batch B --seq T --steps N --out FILE
                  [--n_head H] [--bf16] [--ranks R] [--threads K]

--bf16 runs the forward under torch.autocast(bfloat16), PyTorch's mixed precision on CPU.
--ranks 2 runs DistributedDataParallel over gloo on this machine, each rank on its slice of
every global batch (as acc's data-parallel strategies do).
"""
import argparse
import json
import math
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

TOKEN_MAGIC = 20240520


def read_safetensors(path):
    """name -> float32 tensor, read with the standard library (Debian has no safetensors module)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).float()
    return out


def read_tokens(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        assert header[0] == TOKEN_MAGIC, f"{path}: not an llm.c token file"
        count = header[2]
        return torch.frombuffer(bytearray(f.read(2 * count)), dtype=torch.int16).to(torch.int64) & 0xFFFF


class GPT2(torch.nn.Module):
    """GPT-2 (pre-norm blocks, tanh GELU, tied head) with Hugging Face's names; the Conv1D
    weights are [in, out] as in the original checkpoints."""

    def __init__(self, weights, n_head):
        super().__init__()
        self.n_head = n_head
        self.n_layer = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("transformer.h."))
        self.params = torch.nn.ParameterDict(
            {k.replace(".", "__"): torch.nn.Parameter(v.clone()) for k, v in weights.items()})

    def p(self, name):
        return self.params[name.replace(".", "__")]

    def layer_norm(self, x, prefix):
        return F.layer_norm(x, x.shape[-1:], self.p(prefix + ".weight"), self.p(prefix + ".bias"), 1e-5)

    def conv1d(self, x, prefix):
        return torch.addmm(self.p(prefix + ".bias"), x.reshape(-1, x.shape[-1]),
                           self.p(prefix + ".weight")).reshape(*x.shape[:-1], -1)

    def forward(self, ids):
        B, T = ids.shape
        x = self.p("transformer.wte.weight")[ids] + self.p("transformer.wpe.weight")[:T]
        C, H = x.shape[-1], self.n_head
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(self.n_layer):
            h = f"transformer.h.{i}"
            q, k, v = self.conv1d(self.layer_norm(x, h + ".ln_1"), h + ".attn.c_attn").split(C, dim=-1)
            q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
            y = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
            x = x + self.conv1d(y.transpose(1, 2).reshape(B, T, C), h + ".attn.c_proj")
            m = F.gelu(self.conv1d(self.layer_norm(x, h + ".ln_2"), h + ".mlp.c_fc"), approximate="tanh")
            x = x + self.conv1d(m, h + ".mlp.c_proj")
        x = self.layer_norm(x, "transformer.ln_f")
        return x @ self.p("transformer.wte.weight").t()


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def blas_in_use():
    """The BLAS library this process mapped (after a matmul): Debian's torch calls whatever
    libblas.so.3 points to, and the reference BLAS is ~20x slower than OpenBLAS."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    with open("/proc/self/maps") as f:
        maps = f.read()
    for name in ("openblas-pthread", "openblas-openmp", "openblas-serial", "openblas", "blis", "mkl"):
        if "lib" + name in maps or "/" + name + "/" in maps:
            return name
    return "reference BLAS (slow)" if "libblas.so" in maps else "unknown"


def gemm_gflops(threads):
    """f32 GEMM rate of this torch's BLAS at GPT-2 small's MLP shape (2048 x 768 x 3072)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 768), torch.randn(768, 3072)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(5):
            a @ b
        best = min(best, (time.perf_counter() - start) / 5)
    return 2 * 2048 * 768 * 3072 / best / 1e9


def fsdp_error():
    """What PyTorch's own FSDP says when asked to shard on this CPU-only machine: the error, or
    None if it trains a step."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29518")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
        net = FullyShardedDataParallel(torch.nn.Linear(8, 8))
        net(torch.ones(2, 8)).sum().backward()
        return None
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    finally:
        dist.destroy_process_group()


def train(rank, args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.ranks > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    weights = read_safetensors(args.init)
    n_embd = weights["transformer.wte.weight"].shape[1]
    model = GPT2(weights, n_head=args.n_head or max(1, n_embd // 64))
    del weights
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    net = torch.nn.parallel.DistributedDataParallel(model) if args.ranks > 1 else model
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.999), eps=1e-8)
    tokens = read_tokens(args.data)
    per_rank = args.batch // args.ranks
    losses, seconds = [], []
    for step in range(args.steps):
        # Sample i is the window at i * seq (acc's TokenFile without random windows); rank r
        # takes rows [r * B/R, (r + 1) * B/R) of each global batch.
        rows = range(step * args.batch + rank * per_rank, step * args.batch + (rank + 1) * per_rank)
        windows = torch.stack([tokens[i * args.seq: i * args.seq + args.seq + 1] for i in rows])
        ids, labels = windows[:, :-1], windows[:, 1:]
        if args.ranks > 1:
            dist.barrier()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = net(ids)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        mean = loss.detach().clone()
        if args.ranks > 1:
            dist.all_reduce(mean)
            mean /= args.ranks
        seconds.append(time.perf_counter() - start)
        losses.append(mean.item())
    tokens_per_s = (args.steps - 1) * args.batch * args.seq / sum(seconds[1:])
    rss = torch.zeros(args.ranks)
    rss[rank] = peak_rss_mb()
    if args.ranks > 1:
        dist.all_reduce(rss)
    if rank == 0:
        result = {"framework": "pytorch " + torch.__version__, "batch": args.batch, "seq": args.seq,
                  "ranks": args.ranks, "threads": args.threads, "dtype": "bf16" if args.bf16 else "f32",
                  "strategy": "DDP (gloo)" if args.ranks > 1 else "one process",
                  "tokens_per_s": tokens_per_s, "peak_rss_mb": rss.tolist(), "losses": losses,
                  "blas": blas_in_use()}
        with open(args.out, "w") as f:
            json.dump(result, f)
        print(f"pytorch {result['strategy']} {result['dtype']} x{args.ranks}: {tokens_per_s:.1f} tokens/s, "
              f"last loss {losses[-1]:.6f}, BLAS {result['blas']}")
    if args.ranks > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--init")
    ap.add_argument("--data")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--n_head", type=int, default=0, help="attention heads (not in the file); 0: width / 64")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="per rank; 0: cores / ranks")
    ap.add_argument("--out", required=True)
    ap.add_argument("--probe", action="store_true",
                    help="only describe this torch: its BLAS, GEMM rate and what its FSDP does on CPU")
    args = ap.parse_args()
    if args.probe:
        probe = {"framework": "pytorch " + torch.__version__, "blas": blas_in_use(),
                 "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                 "gemm_gflops": gemm_gflops(args.threads or os.cpu_count()), "fsdp_error": fsdp_error()}
        with open(args.out, "w") as f:
            json.dump(probe, f)
        print(f"pytorch {torch.__version__}: BLAS {probe['blas']}, f32 GEMM {probe['gemm_gflops']:.0f} GFLOP/s")
        return
    if args.threads == 0:
        args.threads = max(1, os.cpu_count() // args.ranks)
    assert args.batch % args.ranks == 0, "--batch must be a multiple of --ranks"
    if args.ranks > 1:
        mp.spawn(train, args=(args,), nprocs=args.ranks, join=True)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
