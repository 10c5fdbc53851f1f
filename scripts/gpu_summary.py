#!/usr/bin/env python3
"""Summary of a device check (scripts/device_check.sh): the GPU benchmark
numbers beside their goals, and the conformance verdicts of the suite runs.

  gemm bf16 8192^3: our wrapper's TFLOP/s over cuBLAS called directly (goal >= 0.95)
  memory: layernorm forward GB/s beside a device-to-device copy of the same bytes
  attention: our TFLOP/s over PyTorch's best SDPA backend (goal >= 0.5)
  suites: cases passed / failed / errored per results file, with backend
  step: the training step's throughput and MFU per step/train case (dtype, model size)

Prints a table and writes --out (JSON). Reads only; exits 0 unless an
input cannot be read.

  python3 scripts/gpu_summary.py --bench bench_ops.json --attention bench_attention.json \
      --results results/ --out summary.json
"""
import argparse
import glob
import json
import os
import re
import sys


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def gemm_rows(bench):
    """Per size: wrapper and direct TFLOP/s and their ratio."""
    by_size = {}
    for b in (bench or {}).get("benchmarks", []):
        m = re.match(r"^gemm_bf16/(wrapper|cublas_direct)/(\d+)", b.get("name", ""))
        if not m:
            continue
        entry = by_size.setdefault(int(m.group(2)), {"size": int(m.group(2))})
        entry[m.group(1)] = None if b.get("error_occurred") else b.get("TFLOP/s")
        if b.get("error_occurred"):
            entry["error"] = b.get("error_message")
    rows = []
    for size in sorted(by_size):
        e = by_size[size]
        w, d = e.get("wrapper"), e.get("cublas_direct")
        e["ratio"] = w / d if w and d else None
        rows.append(e)
    return rows


def memory_rows(bench):
    rows = []
    for b in (bench or {}).get("benchmarks", []):
        m = re.match(r"^memory/([a-z0-9_]+)/(\d+)/(\d+)", b.get("name", ""))
        if m:
            rows.append({"op": m.group(1), "rows": int(m.group(2)), "h": int(m.group(3)),
                         "GBps": None if b.get("error_occurred") else b.get("GB/s"),
                         "error": b.get("error_message") if b.get("error_occurred") else None})
    return rows


def suite_rows(results_dir):
    rows = []
    for path in sorted(glob.glob(os.path.join(results_dir or "", "*.json"))):
        doc = load(path)
        cases = doc.get("cases", [])
        backends = sorted({c.get("backend", "?") for c in cases})
        failed = [c["id"] for c in cases if c.get("conformance", {}).get("status") == "fail" or c.get("error")]
        system = doc.get("system", {})
        rows.append({"file": os.path.basename(path), "world_size": system.get("world_size"), "backends": backends,
                     "summary": doc.get("run", {}).get("summary"), "failed": failed,
                     "devices": [d.get("name") for d in system.get("devices", [])],
                     "driver": system.get("driver"), "cuda_runtime": system.get("cuda_runtime"),
                     "nccl": system.get("nccl")})
    return rows


def step_rows(results_dir):
    """Per step/train case: model size, dtype, tokens/s, TFLOP/s per rank and MFU."""
    rows = []
    for path in sorted(glob.glob(os.path.join(results_dir or "", "*.json"))):
        for c in load(path).get("cases", []):
            if c.get("suite") != "step" or c.get("case") != "train" or c.get("fault"):
                continue
            metrics, params = c.get("perf", {}).get("metrics", {}), c.get("params", {})
            value = lambda name: (metrics.get(name) or {}).get("value")  # noqa: E731
            rows.append({"id": c.get("id"), "dtype": c.get("dtype"), "ranks": c.get("ranks"),
                         "model": {k: params.get(k) for k in ("layers", "hidden", "ffn", "vocab", "seq", "batch")},
                         "status": c.get("conformance", {}).get("status"), "error": c.get("error") or None,
                         "tokens_per_s": value("tokens_per_s"), "tflops_per_rank": value("tflops_per_rank"),
                         "mfu": value("mfu"), "peak_source": metrics.get("peak_source"),
                         "allocation": (metrics.get("comm") or {}).get("allocation")})
    return rows


def fmt(x, spec="7.1f"):
    return format(x, spec) if isinstance(x, (int, float)) else "   -   "


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="")
    p.add_argument("--attention", default="")
    p.add_argument("--results", default="")
    p.add_argument("--out", default="")
    args = p.parse_args()
    bench, attention = load(args.bench), load(args.attention)
    summary = {"gemm": gemm_rows(bench), "memory": memory_rows(bench),
               "attention": (attention or {}).get("rows", []),
               "attention_ours_status": (attention or {}).get("ours_status"),
               "suites": suite_rows(args.results), "step": step_rows(args.results),
               "goals": {"gemm_wrapper_over_cublas_8192": 0.95, "attention_ours_over_torch": 0.5}}

    print("gemm bf16 (TFLOP/s)      size   wrapper   cuBLAS  ratio")
    for r in summary["gemm"]:
        print(f"                        {r['size']:5d}   {fmt(r.get('wrapper'))}  {fmt(r.get('cublas_direct'))}  "
              f"{fmt(r.get('ratio'), '5.3f')} {r.get('error') or ''}")
    print("memory-bound (GB/s, read+write)")
    for r in summary["memory"]:
        print(f"  {r['op']:16s} {r['rows']}x{r['h']:<6d} {fmt(r['GBps'], '8.0f')} {r['error'] or ''}")
    print(f"attention (TFLOP/s): ours {summary['attention_ours_status']}")
    for r in summary["attention"]:
        print(f"  s={r['seq']:6d} {'causal' if r['causal'] else 'full  '} {r['pass']:7s} torch "
              f"{r.get('torch_backend') or '-':9s} {fmt(r.get('torch_tflops'))}  ours {fmt(r.get('ours_tflops'))}")
    print("suites")
    for r in summary["suites"]:
        print(f"  {r['file']}: world {r['world_size']} {','.join(r['backends'])} {r['summary']}"
              + (f" failed: {', '.join(r['failed'][:8])}{' ...' if len(r['failed']) > 8 else ''}" if r["failed"] else ""))
    print("training step (step/train)")
    for r in summary["step"]:
        m = r["model"]
        print(f"  {r['dtype']:5s} {r['ranks']} rank(s) L{m['layers']} h{m['hidden']} s{m['seq']} {r['status']:5s} "
              f"{fmt(r['tokens_per_s'], '10.0f')} tokens/s {fmt(r['tflops_per_rank'])} TFLOP/s/rank "
              f"MFU {fmt(r['mfu'], '5.3f')} alloc {r['allocation'] or '-'} {r['error'] or ''}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
