#!/usr/bin/env python3
"""torch._scaled_mm, E4M3 x E4M3 -> bf16, at 4096^3 and 8192^3, with
per-tensor scales and with block scales (1x128 runs of a, 128x128 tiles of
b, where this torch and GPU take them): the anchors for sextant's FP8
products (ops_cuda_bench's gemm_fp8_e4m3/cublaslt_tn and cublaslt_tn_block),
run by scripts/device_check.sh beside them.

Timing as ops_cuda_bench's: CUDA events around batches of about 2 ms after
warm-up, random operands; median and range of the batches' TFLOP/s.

  python3 scripts/bench_fp8_gemm.py --out bench_fp8_gemm.json
Exit 3 without a CUDA device.
"""
import argparse
import json
import statistics
import sys


def bench(torch, s, reps, blocks):
    a = torch.randn(s, s, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(s, s, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm takes b
    if blocks:
        # a's 1x128 scales [s, s/128] stored outer-dim major; b's 128x128 tile scales as [s/128 (k), s/128 (n)].
        scale_a = torch.ones(s // 128, s, device="cuda").t()
        scale_b = torch.ones(s // 128, s // 128, device="cuda").t()
        name = "torch._scaled_mm e4m3 x e4m3 -> bf16, 1x128 x 128x128 block scales"
    else:
        scale_a = scale_b = torch.ones((), device="cuda")
        name = "torch._scaled_mm e4m3 x e4m3 -> bf16"

    def product():
        return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)

    flops = 2.0 * s * s * s
    batch = max(1, min(1000, int(2e-3 * 1e15 / flops)))
    for _ in range(3):
        product()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            product()
        stop.record()
        stop.synchronize()
        rates.append(flops * batch / (start.elapsed_time(stop) * 1e-3) / 1e12)
    return {"name": name, "size": s, "block_scales": blocks, "batch": batch, "reps": reps,
            "tflops_median": statistics.median(rates), "tflops_min": min(rates), "tflops_max": max(rates)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--reps", type=int, default=20, help="timed batches per size")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_fp8_gemm.py: no PyTorch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_fp8_gemm.py: no CUDA device visible", file=sys.stderr)
        return 3
    rows = [bench(torch, s, args.reps, False) for s in (4096, 8192)]
    for s in (4096, 8192):
        try:
            rows.append(bench(torch, s, args.reps, True))
        except (RuntimeError, TypeError) as e:  # this torch or GPU lacks block scales: say so, keep the rest
            rows.append({"name": "torch._scaled_mm block scales", "size": s, "block_scales": True,
                         "error": str(e).splitlines()[0]})
    for r in rows:
        if "error" in r:
            print(f"{r['name']} {r['size']}^3: not run ({r['error']})")
            continue
        print(f"{r['name']} {r['size']}^3: {r['tflops_median']:.1f} TFLOP/s "
              f"(range {r['tflops_min']:.1f}-{r['tflops_max']:.1f})")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
