#!/usr/bin/env python3
"""Attention benchmark driver for the device check (scripts/device_check.sh).

Times the best attention PyTorch offers on this machine
(torch.nn.functional.scaled_dot_product_attention, each of its fused
backends: flash, cuDNN, memory-efficient) for bf16, head_dim 128,
s = 4096..16384, causal and not, forward and forward+backward, and puts our
attention block's numbers beside it when the GPU benchmark JSON has them.
Also times torch.matmul in bf16 on square sizes (the anchor for our gemm
wrapper: PyTorch's matmul is what a training stack reaches on this GPU).

Our side comes from ops_cuda_bench (Google Benchmark JSON, --ours): entries
named attention_bf16/<fwd|fwd_bwd>/<causal|full>/<seq>[/...] with a
"TFLOP/s" counter. Where there are none (a build without CUDA benchmarks,
or no --ours file) the output says so (ours: null).

FLOPs as flash-attention's benchmarks/benchmark_flash_attention.py counts
them: forward 4*b*s^2*h*d, halved when causal; backward 2.5x
the forward, so forward+backward is 3.5x. Times: CUDA events, median of
--reps after --warmup, fresh random inputs (never zeros).

  python3 scripts/bench_attention.py --out bench_attention.json [--ours bench_ops.json]
"""
import argparse
import json
import re
import statistics
import sys


def attention_flops(batch, seq, heads, head_dim, causal, pass_name):
    forward = 4.0 * batch * seq * seq * heads * head_dim * (0.5 if causal else 1.0)
    return forward * (3.5 if pass_name == "fwd_bwd" else 1.0)


def read_ours(path):
    """{(pass, causal, seq): TFLOP/s} from Google Benchmark JSON, or {} with a reason."""
    if not path:
        return {}, "no --ours file given"
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return {}, f"cannot read {path}: {e}"
    ours = {}
    pattern = re.compile(r"^attention_bf16/(fwd|fwd_bwd)/(causal|full)/(\d+)")
    for b in doc.get("benchmarks", []):
        m = pattern.match(b.get("name", ""))
        if m and not b.get("error_occurred") and "TFLOP/s" in b:
            ours[(m.group(1), m.group(2) == "causal", int(m.group(3)))] = b["TFLOP/s"]
    reason = None if ours else "no attention_bf16 entries in the GPU benchmark: the CUDA attention block is not built yet"
    return ours, reason


def time_ms(fn, warmup, reps, torch):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def matmul_flops(size):
    return 2.0 * size ** 3


def matmul_rows(args):
    """torch.matmul, bf16, [s, s] x [s, s], per size: median ms and TFLOP/s."""
    import torch

    rows = []
    gen = torch.Generator(device="cuda").manual_seed(4321)
    for size in args.matmul_sizes:
        a, b = (torch.randn((size, size), device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2))
        ms = time_ms(lambda: torch.matmul(a, b), args.warmup, args.reps, torch)
        rows.append({"size": size, "torch_ms": ms, "torch_tflops": matmul_flops(size) / (ms * 1e-3) / 1e12})
        print(f"  matmul bf16 {size}^3: torch {rows[-1]['torch_tflops']:7.1f} TFLOP/s", flush=True)
    return rows


def torch_rows(args):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(1234)
    for seq in args.seqs:
        shape = (args.batch, args.heads, seq, args.head_dim)
        q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
        for causal in (False, True):
            for pass_name in ("fwd", "fwd_bwd"):
                best = None
                for name, backend in backends.items():
                    qq, kk, vv = (t.detach().requires_grad_(pass_name == "fwd_bwd") for t in (q, k, v))

                    def run():
                        for t in (qq, kk, vv):
                            t.grad = None  # no gradient accumulation inside the timed call
                        with sdpa_kernel([backend]):
                            o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
                            if pass_name == "fwd_bwd":
                                o.backward(do)

                    try:
                        ms = time_ms(run, args.warmup, args.reps, torch)
                    except RuntimeError as e:  # backend not available for this shape / build
                        print(f"  {name}: unavailable ({str(e).splitlines()[0][:80]})", file=sys.stderr)
                        continue
                    if best is None or ms < best[1]:
                        best = (name, ms)
                flops = attention_flops(args.batch, seq, args.heads, args.head_dim, causal, pass_name)
                row = {"seq": seq, "causal": causal, "pass": pass_name, "flops": flops,
                       "torch_backend": best[0] if best else None,
                       "torch_ms": best[1] if best else None,
                       "torch_tflops": flops / (best[1] * 1e-3) / 1e12 if best else None}
                rows.append(row)
                print(f"  s={seq:6d} {'causal' if causal else 'full  '} {pass_name:7s} "
                      f"torch {row['torch_backend']}: {row['torch_tflops'] or float('nan'):7.1f} TFLOP/s", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--ours", default="")
    p.add_argument("--seqs", default="4096,8192,16384")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--matmul-sizes", default="1024,2048,4096,8192")
    args = p.parse_args()
    args.seqs = [int(s) for s in args.seqs.split(",")]
    args.matmul_sizes = [int(s) for s in args.matmul_sizes.split(",") if s]

    doc = {"shape": {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "dtype": "bf16",
                     "layout": "torch [b, h, s, d]"},
           "flops_formula": "fwd 4*b*s^2*h*d (x0.5 causal); fwd_bwd 3.5x fwd",
           "rows": [], "matmul": [], "torch": None, "device": None}
    ours, ours_reason = read_ours(args.ours)
    doc["ours_status"] = ours_reason or "measured"
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        doc.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   device=torch.cuda.get_device_name())
        print(f"attention: torch {torch.__version__} on {doc['device']}", flush=True)
        doc["rows"] = torch_rows(args)
        doc["matmul"] = matmul_rows(args)
    except (ImportError, RuntimeError) as e:
        doc["torch_status"] = f"not measured: {e}"
        print(f"attention: PyTorch baseline not measured: {e}", flush=True)
    measured = {(r["pass"], r["causal"], r["seq"]) for r in doc["rows"]}
    for (pass_name, causal, seq) in sorted(set(ours) - measured):  # ours alone (no PyTorch here)
        doc["rows"].append({"seq": seq, "causal": causal, "pass": pass_name,
                            "flops": attention_flops(args.batch, seq, args.heads, args.head_dim, causal, pass_name),
                            "torch_backend": None, "torch_ms": None, "torch_tflops": None})
    for row in doc["rows"]:
        mine = ours.get((row["pass"], row["causal"], row["seq"]))
        row["ours_tflops"] = mine
        row["ours_over_torch"] = mine / row["torch_tflops"] if mine and row["torch_tflops"] else None
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"attention: ours {doc['ours_status']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
