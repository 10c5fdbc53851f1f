#!/usr/bin/env python3
"""Summary of a device check (scripts/device_check.sh): the GPU benchmark
numbers beside their goals, and the conformance verdicts of the suite runs.

  gemm bf16: our wrapper's TFLOP/s over torch.matmul and over cuBLAS called
    directly, per size
  memory: each memory-bound op's GB/s over a device-to-device copy of the
    same shape
  attention: our TFLOP/s over PyTorch's best SDPA backend (cuDNN on Hopper)
  suites: cases passed / failed / errored per results file, with backend; a
    file with no case is a failure
  step: the training step's throughput and MFU per step/train case

Then one verdict per goal (GOALS): PASS, FAIL or NOT MEASURED, with the
measured figure. Prints the tables and writes --out (JSON). Exits 1 when a
verdict is FAIL, 0 otherwise (NOT MEASURED is listed, not a failure), 2
when an input cannot be read.

  python3 scripts/gpu_summary.py --bench bench_ops.json --attention bench_attention.json \
      --results results/ --out summary.json
  python3 scripts/gpu_summary.py --count-cases FILE...   # prints the number of cases in sextant results files
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


# The goals a GPU build is held to: what each ratio must reach, and on which rows.
GOALS = {
    "attention_over_sdpa": {"at_least": 0.9, "what": "our attention TFLOP/s over SDPA's best backend, bf16, d 128, "
                                                     "seq 8k-16k, causal and not, fwd and fwd+bwd", "min_seq": 8192},
    "layernorm_over_copy": {"at_least": 0.7, "what": "LayerNorm forward GB/s over a device copy of the same shape"},
    "gemm_over_torch_matmul": {"at_least": 0.95, "what": "gemm wrapper TFLOP/s over torch.matmul, bf16, 4096^3 "
                                                         "and 8192^3", "sizes": (4096, 8192)},
    "gemm_over_cublas": {"at_least": 0.95, "what": "gemm wrapper TFLOP/s over cuBLAS called directly, bf16, 8192^3",
                         "sizes": (8192,)},
    "step_mfu_measured": {"what": "MFU of the 1B dense bf16 training step, measured and reported"},
    "suites_conform": {"what": "every suite run passes conformance and ran at least one case"},
}


def gemm_rows(bench, matmul=()):
    """Per size: wrapper, direct cuBLAS and torch.matmul TFLOP/s, and the wrapper's ratio to each."""
    by_size = {}
    for b in (bench or {}).get("benchmarks", []):
        m = re.match(r"^gemm_bf16/(wrapper|cublas_direct)/(\d+)", b.get("name", ""))
        if not m:
            continue
        entry = by_size.setdefault(int(m.group(2)), {"size": int(m.group(2))})
        entry[m.group(1)] = None if b.get("error_occurred") else b.get("TFLOP/s")
        if b.get("error_occurred"):
            entry["error"] = b.get("error_message")
    for m in matmul or ():
        by_size.setdefault(m["size"], {"size": m["size"]})["torch"] = m.get("torch_tflops")
    rows = []
    for size in sorted(by_size):
        e = by_size[size]
        w, d, t = e.get("wrapper"), e.get("cublas_direct"), e.get("torch")
        e["ratio"] = w / d if w and d else None
        e["ratio_torch"] = w / t if w and t else None
        rows.append(e)
    return rows


def fp8_rows(bench, torch_fp8=None):
    """Per size and scale kind (per-tensor, block): our cuBLASLt FP8 product's TFLOP/s beside torch._scaled_mm's."""
    by_key = {}
    for b in (bench or {}).get("benchmarks", []):
        m = re.match(r"^gemm_fp8_e4m3/(cublaslt_tn|cublaslt_tn_block)/(\d+)", b.get("name", ""))
        if not m:
            continue
        entry = by_key.setdefault((int(m.group(2)), m.group(1).endswith("block")),
                                  {"size": int(m.group(2)), "block_scales": m.group(1).endswith("block")})
        entry["ours"] = None if b.get("error_occurred") else b.get("TFLOP/s")
        if b.get("error_occurred"):
            entry["error"] = b.get("error_message")
    for t in (torch_fp8 or {}).get("rows", []):
        entry = by_key.setdefault((t["size"], bool(t.get("block_scales"))),
                                  {"size": t["size"], "block_scales": bool(t.get("block_scales"))})
        entry["torch"] = t.get("tflops_median")
        if t.get("error"):
            entry["torch_error"] = t["error"]
    rows = [by_key[k] for k in sorted(by_key)]
    for e in rows:
        e["ratio_torch"] = e["ours"] / e["torch"] if e.get("ours") and e.get("torch") else None
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


def count_cases(paths):
    """The number of cases in sextant results files (a file that cannot be read counts none)."""
    total = 0
    for path in paths:
        try:
            total += len(load(path).get("cases", []))
        except (OSError, ValueError, AttributeError):
            pass
    return total


def suite_rows(results_dir):
    rows = []
    for path in sorted(glob.glob(os.path.join(results_dir or "", "*.json"))):
        doc = load(path)
        cases = doc.get("cases", [])
        backends = sorted({c.get("backend", "?") for c in cases})
        failed = [c["id"] for c in cases if c.get("conformance", {}).get("status") == "fail" or c.get("error")]
        if not cases:
            failed = ["(ran no case)"]
        system = doc.get("system", {})
        rows.append({"file": os.path.basename(path), "world_size": system.get("world_size"), "backends": backends,
                     "summary": doc.get("run", {}).get("summary"), "failed": failed,
                     "devices": [d.get("name") for d in system.get("devices", [])],
                     "driver": system.get("driver"), "cuda_runtime": system.get("cuda_runtime"),
                     "nccl": system.get("nccl")})
    return rows


def step_rows(results_dir):
    """Per step/train case: model size, dtype, tokens/s, TFLOP/s per rank, MFU and the step's time by op."""
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
                         "allocation": (metrics.get("comm") or {}).get("allocation"),
                         "op_fractions": (metrics.get("op_time_split") or {}).get("fractions")})
    return rows


def verdict(name, measured, target=None, detail=""):
    if measured is None:
        status = "NOT MEASURED"
    elif target is None:
        status = "PASS"
    else:
        status = "PASS" if measured >= target else "FAIL"
    return {"goal": name, "what": GOALS[name]["what"], "target": target, "measured": measured, "status": status,
            "detail": detail}


def lowest(rows, key):
    """The row with the smallest value of key among those that have one, or None."""
    have = [r for r in rows if r.get(key) is not None]
    return min(have, key=lambda r: r[key]) if have else None


def verdicts(summary):
    """One verdict per goal; the measured figure is the worst row the goal covers."""
    out = []
    goal = GOALS["attention_over_sdpa"]
    rows = [r for r in summary["attention"] if r.get("seq", 0) >= goal["min_seq"]]
    worst = lowest(rows, "ours_over_torch")
    missing = [r for r in rows if r.get("ours_over_torch") is None]
    detail = (f"worst s={worst['seq']} {'causal' if worst['causal'] else 'full'} {worst['pass']}" if worst else "")
    out.append(verdict("attention_over_sdpa", None if missing or not rows else worst["ours_over_torch"],
                       goal["at_least"], detail + (f"; {len(missing)} row(s) unmeasured" if missing else "")))

    copy = {(r["rows"], r["h"]): r["GBps"] for r in summary["memory"] if r["op"] == "copy_d2d" and r["GBps"]}
    ratios = [{"shape": f"{r['rows']}x{r['h']}", "ratio": r["GBps"] / copy[(r["rows"], r["h"])]}
              for r in summary["memory"]
              if r["op"] == "layernorm_fwd" and r["GBps"] and (r["rows"], r["h"]) in copy]
    worst = lowest(ratios, "ratio")
    out.append(verdict("layernorm_over_copy", worst["ratio"] if worst else None,
                       GOALS["layernorm_over_copy"]["at_least"], f"worst {worst['shape']}" if worst else ""))

    for name, key in (("gemm_over_torch_matmul", "ratio_torch"), ("gemm_over_cublas", "ratio")):
        goal = GOALS[name]
        rows = [r for r in summary["gemm"] if r["size"] in goal["sizes"]]
        worst = lowest(rows, key)
        complete = len(rows) == len(goal["sizes"]) and all(r.get(key) is not None for r in rows)
        out.append(verdict(name, worst[key] if complete else None, goal["at_least"],
                           f"worst {worst['size']}^3" if worst else ""))

    mfu = [r for r in summary["step"] if r.get("mfu") is not None and r.get("dtype") == "bf16"
           and (r["model"].get("hidden") or 0) >= 2048]  # the 1B model, not the suites' small checked cases
    best = max(mfu, key=lambda r: r["mfu"]) if mfu else None
    out.append(verdict("step_mfu_measured", best["mfu"] if best else None, None,
                       f"alloc {best['allocation'] or '-'}, {best['tokens_per_s']} tokens/s" if best else ""))

    runs = summary["suites"]
    bad = [r["file"] for r in runs if r["failed"]]
    out.append(verdict("suites_conform", (0.0 if bad else 1.0) if runs else None, 1.0 if runs else None,
                       f"{len(bad)} of {len(runs)} runs failed: {', '.join(bad[:6])}" if bad else f"{len(runs)} runs"))
    return out


def fmt(x, spec="7.1f"):
    return format(x, spec) if isinstance(x, (int, float)) else "   -   "


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="")
    p.add_argument("--attention", default="")
    p.add_argument("--fp8", default="", help="bench_fp8_gemm.json (torch._scaled_mm)")
    p.add_argument("--results", default="")
    p.add_argument("--out", default="")
    p.add_argument("--count-cases", nargs="+", metavar="FILE")
    args = p.parse_args()
    if args.count_cases:
        print(count_cases(args.count_cases))
        return 0
    try:
        bench, attention, torch_fp8 = load(args.bench), load(args.attention), load(args.fp8)
    except (OSError, ValueError) as e:
        print(f"gpu_summary.py: cannot read an input: {e}", file=sys.stderr)
        return 2
    summary = {"gemm": gemm_rows(bench, (attention or {}).get("matmul", [])), "fp8_gemm": fp8_rows(bench, torch_fp8),
               "memory": memory_rows(bench),
               "attention": (attention or {}).get("rows", []),
               "attention_ours_status": (attention or {}).get("ours_status"),
               "suites": suite_rows(args.results), "step": step_rows(args.results)}
    summary["verdicts"] = verdicts(summary)

    print("gemm bf16 (TFLOP/s)      size   wrapper   cuBLAS    torch  /cuBLAS /torch")
    for r in summary["gemm"]:
        print(f"                        {r['size']:5d}   {fmt(r.get('wrapper'))}  {fmt(r.get('cublas_direct'))}  "
              f"{fmt(r.get('torch'))}  {fmt(r.get('ratio'), '5.3f')}  {fmt(r.get('ratio_torch'), '5.3f')} "
              f"{r.get('error') or ''}")
    print("gemm fp8 e4m3 -> bf16 (TFLOP/s)  size  scales      ours    torch  /torch")
    for r in summary["fp8_gemm"]:
        print(f"                                {r['size']:5d}  {'block ' if r['block_scales'] else 'tensor'}  "
              f"{fmt(r.get('ours'))}  {fmt(r.get('torch'))}  {fmt(r.get('ratio_torch'), '5.3f')} "
              f"{r.get('error') or ''} {r.get('torch_error') or ''}")
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
        if r.get("op_fractions"):
            parts = sorted(r["op_fractions"].items(), key=lambda kv: -kv[1])
            print("    time by op: " + ", ".join(f"{op} {share:.0%}" for op, share in parts if share > 0)
                  + f", other {max(0.0, 1 - sum(s for _, s in parts)):.0%}")
    print("verdicts")
    for v in summary["verdicts"]:
        target = f">= {v['target']}" if v["target"] is not None and v["goal"] != "suites_conform" else ""
        print(f"  {v['status']:12s} {v['goal']:24s} {fmt(v['measured'], '6.3f')} {target:8s} {v['detail']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if any(v["status"] == "FAIL" for v in summary["verdicts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
