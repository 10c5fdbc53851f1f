#!/usr/bin/env python3
"""Writes SYNTHETIC results fixtures for the suites that do not run yet
(tp_sp, attention, moe, pipeline, step; and a two-node screen run with
suspects and per-rank timings, from screen_fixture.py), shaped exactly as
results/METRICS.md and results/schema.json promise, so that every figure of
report.py has data today.

    python3 scripts/tests/make_fixtures.py      # rewrites scripts/tests/fixtures/synthetic-*.json

These are NOT measurements: the numbers come from simple formulas plus seeded
noise, the run says so in run.command and run.synthetic, and the host is
called "synthetic". Real runs live in results/ and fixtures/real-*.json.
The output is deterministic (tests check the stored files are up to date).
"""
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)
from pipeline_sim import schedule_actions, simulate  # noqa: E402

RANK_COUNTS = [1, 2, 4, 8]
START = "2026-01-01T00:00:00Z"


def system(world):
    return {"hosts": ["synthetic"], "world_size": world, "ranks_per_node": world, "backend": "mpi",
            "device_kind": "host", "cpu": "synthetic", "cores": world, "mpi": "synthetic",
            "blas": "synthetic", "blas_threads": 1, "compiler": "synthetic", "cuda_built": False,
            "devices": [{"name": "Synthetic Device", "memory_bytes": 8e10, "peak_tflops": 100.0,
                         "peak_source": "synthetic fixture (not a device)"}]}


def parallel(**dims):
    p = {"tp": 1, "cp": 1, "pp": 1, "dp": 1, "ep": 1, "etp": 0, "vpp": 1, "sp": False}
    p.update(dims)
    p["etp"] = p["etp"] or p["tp"]
    return p


def case_id(suite, name, ranks, dtype, par, params, fault):
    conf = f"tp{par['tp']}-cp{par['cp']}-pp{par['pp']}-dp{par['dp']}"
    if par["ep"] > 1:
        conf += f"-ep{par['ep']}-etp{par['etp']}"
    if par["vpp"] > 1:
        conf += f"-vpp{par['vpp']}"
    if par["sp"]:
        conf += "-sp"
    text = " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in params.items())
    return f"{suite}/{name} ranks={ranks} {dtype} {conf} {text}" + (f" fault={fault}" if fault else "")


def tensor(name, error, base_error, floor, count=4096, rng=None):
    bound = max(2 * base_error, floor)
    return {"name": name, "error": error, "base_error": base_error, "bound": bound,
            "max_abs": error * 3, "nonfinite": 0, "count": count, "pass": error <= bound}


def timing(median, rng, iters=5):
    spread = median * 0.04
    return {"unit": "s", "median": median, "p10": median - spread, "p90": median + spread, "min": median - 2 * spread,
            "max": median + 3 * spread, "mean": median + spread / 4, "cv_pct": 3.0 + rng.random(), "iters": iters,
            "warmup": 2}


def measured(value, unit):
    return {"value": value, "unit": unit}


def record(suite, name, ranks, par, params, tensors, times, metrics, rng, dtype="bf16", fault=None, notes=None):
    failures = [f"{t['name']}: error {t['error']:.6g} > bound {t['bound']:.6g}" for t in tensors if not t["pass"]]
    metrics = dict(metrics)
    metrics["bytes_sent_per_rank"] = {"value": 1e6 * (ranks - 1), "unit": "B", "max": 1e6 * (ranks - 1)}
    return {"suite": suite, "case": name, "id": case_id(suite, name, ranks, dtype, par, params, fault),
            "params": params, "parallel": par, "ranks": ranks, "dtype": dtype, "device": "host", "backend": "mpi",
            "fault": fault,
            "conformance": {"status": "fail" if failures else "pass", "tensors": tensors, "failures": failures,
                            "notes": notes or {}},
            "perf": {"time": {k: timing(v, rng) for k, v in times.items()}, "metrics": metrics}}


def noisy(rng, x, pct=5):
    return x * (1 + rng.uniform(-pct, pct) / 100)


# ---- suites ----------------------------------------------------------------

def tp_sp_cases(rng):
    out = []
    for block in ("mlp", "attn_proj", "vocab"):
        for tp in RANK_COUNTS:
            for sp in ([False, True] if tp > 1 else [False]):
                par = parallel(tp=tp, sp=sp)
                params = {"block": block, "sp": sp, "seq": 256, "batch": 2, "hidden": 256, "heads": 8,
                          "ffn": 1024, "vocab": 4096}
                act = 2 * 256 * 256 * 4 * (1 / tp if sp else 1) + 2 * 256 * 1024 * 4 / tp
                layernorm_act = 2 * 256 * 256 * 4 / (tp if sp else 1)
                tensors = [tensor(n, 1.2e-3 * (1 + 0.1 * tp), 1.1e-3, 2.5e-2) for n in ("y", "dx", "dw")]
                tflops = noisy(rng, 0.02 * (0.9 ** math.log2(tp)))
                out.append(record("tp_sp", block, tp, par, params, tensors, {"fwd_bwd": 0.004 / tp},
                                  {"tflops_per_rank": measured(tflops, "TFLOP/s"),
                                   "activation_bytes_per_rank": measured(act, "B"),
                                   "layernorm_activation_bytes_per_rank": measured(layernorm_act, "B")},
                                  rng))
    return out


ATTENTION_VARIANTS = [("p2p", "zigzag"), ("p2p", "contiguous"), ("a2a", "contiguous"), ("allgather", "zigzag"),
                      ("a2a+p2p", "zigzag")]


def attention_cases(rng):
    out = []
    for variant, layout in ATTENTION_VARIANTS:
        for causal in (False, True):
            for cp in RANK_COUNTS:
                if variant == "a2a+p2p" and cp < 4:
                    continue
                par = parallel(cp=cp)
                params = {"variant": variant, "layout": layout, "causal": causal, "seq": 1024, "batch": 1,
                          "heads": 8, "kv_heads": 8, "head_dim": 64, "a2a_size": 2 if variant == "a2a+p2p" else 1}
                imbalance = 1.0 if not causal or layout == "zigzag" or variant == "a2a" else 1 + 0.9 * (cp - 1) / cp * 2
                balance = max(1.0, noisy(rng, imbalance, 3)) if cp > 1 else 1.0
                tflops = noisy(rng, 0.03 / balance * (0.95 ** math.log2(cp)))
                # One instance close to its bound (ratio ~0.7): the amber cell of the matrix.
                err = 1.8e-2 if (variant, layout, causal, cp) == ("allgather", "zigzag", True, 8) else 4e-3
                tensors = [tensor(n, noisy(rng, err, 2), 3.5e-3, 2.5e-2) for n in ("out", "lse", "dq", "dk", "dv")]
                out.append(record("attention", variant.replace("+", "_"), cp, par, params, tensors,
                                  {"fwd": 0.01 / cp, "fwd_bwd": 0.035 / cp, "compute_only": 0.03 / cp},
                                  {"tflops_per_rank": measured(tflops, "TFLOP/s"),
                                   "tflops_per_rank_fwd": measured(tflops * 0.9, "TFLOP/s"),
                                   "load_balance": measured(balance, "1"),
                                   "compute_time_max_s": measured(0.03 / cp * balance, "s"),
                                   "compute_time_min_s": measured(0.03 / cp, "s"),
                                   "bytes_sent_formula": measured(1e6 * (cp - 1), "B"),
                                   "overlap_efficiency": measured(noisy(rng, 0.85, 5), "1")}, rng))
    # A planted fault (skip one ring step) that the check catches: the red cell.
    par = parallel(cp=4)
    params = {"variant": "p2p", "layout": "zigzag", "causal": True, "seq": 1024, "batch": 1, "heads": 8,
              "kv_heads": 8, "head_dim": 64, "a2a_size": 1}
    tensors = [tensor(n, 0.31, 3.5e-3, 2.5e-2) for n in ("out", "lse")]
    out.append(record("attention", "p2p", 4, par, params, tensors, {"fwd": 0.0025, "fwd_bwd": 0.009},
                      {"tflops_per_rank": measured(0.03, "TFLOP/s"), "load_balance": measured(1.0, "1")}, rng,
                      fault="skip_ring_step"))
    return out


def dynamic_cp_cases():
    """attention/dynamic_cp: a long-tailed length distribution gains, full-length sequences do not."""
    rng = random.Random(20260415)
    out = []
    for spec, gain in (("zipf:16", 1.35), ("512", 1.0)):
        for ranks in (2, 4, 8):
            par = parallel(cp=ranks)
            params = {"variant": "dynamic_cp", "layout": "zigzag", "causal": True, "seq": 512, "microbatches": 8,
                      "seq_lens_spec": spec, "heads": 8, "kv_heads": 8, "head_dim": 32, "capacity": 512 // ranks,
                      "ring_step": 1000.0,
                      "lengths": [[300, 100, 60, 30, 12, 10] if gain > 1 else [512] for _ in range(8)]}
            static = 0.02 * (1 + 0.1 * math.log2(ranks))
            speedup = noisy(rng, gain * (1 + 0.05 * math.log2(ranks)), 2) if gain > 1 else noisy(rng, 1.0, 1)
            tensors = [tensor(f"{mode}.{n}", 4e-3, 3.5e-3, 2.5e-2) for mode in ("static", "dynamic")
                       for n in ("out", "lse", "dq", "dk", "dv")]
            bins = {"1": 9, str(ranks): 3} if gain > 1 else {str(ranks): 8}
            out.append(record("attention", "dynamic_cp", ranks, par, params, tensors,
                              {"dynamic": static / speedup, "static": static},
                              {"speedup_vs_static": measured(speedup, "x"),
                               "speedup_vs_static_model": measured(gain, "x"),
                               "time_static_s": measured(static, "s"), "time_dynamic_s": measured(static / speedup, "s"),
                               "tflops_per_rank": measured(0.02 * speedup, "TFLOP/s"),
                               "load_balance": measured(noisy(rng, 1.3, 5), "max/min"),
                               "busy_fraction_static": measured(noisy(rng, 0.45, 5), "ratio"),
                               "busy_fraction_dynamic": measured(noisy(rng, 0.45 * speedup, 5), "ratio"),
                               "bins_per_group_dynamic": bins}, rng, dtype="f32"))
    return out


def moe_cases(rng):
    out = []
    for dispatcher in ("alltoall", "allgather"):
        for routing in ("uniform", "skewed"):
            for ep in RANK_COUNTS:
                par = parallel(dp=ep, ep=ep)
                params = {"dispatcher": dispatcher, "experts": 8, "topk": 2, "routing": routing,
                          "capacity_factor": 0, "tokens": 512, "hidden": 256, "ffn": 512}
                imbalance = noisy(rng, 1.08 if routing == "uniform" else 2.6, 3)
                bw = noisy(rng, (2.0 if dispatcher == "alltoall" else 1.2) * (0.85 ** math.log2(ep)))
                tensors = [tensor(n, 2e-3, 1.5e-3, 2.5e-2) for n in ("out", "dx", "dw1", "dw2", "probs_grad")]
                out.append(record("moe", "layer", ep, par, params, tensors, {"fwd_bwd": 0.02},
                                  {"dispatch_GBps": measured(bw, "GB/s"), "combine_GBps": measured(bw * 0.9, "GB/s"),
                                   "dispatch_GBps_aggregate": measured(bw * ep, "GB/s"),
                                   "imbalance_expert": measured(imbalance, "1"),
                                   "imbalance_rank": measured(1 + (imbalance - 1) / 2, "1"),
                                   "dropped_tokens": measured(0, "tokens"),
                                   "tokens_per_s": measured(noisy(rng, 25000 * ep * 0.9 ** math.log2(ep)), "tokens/s"),
                                   "expert_tflops": measured(0.02, "TFLOP/s"),
                                   "a2a_share": measured(0.1 * math.log2(2 * ep), "1")}, rng,
                                  notes={"routing_differences": 0}))
    return out


def closed_form(schedule, p, m, v):
    if schedule in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if schedule == "interleaved":
        return (p - 1) / v / (m + (p - 1) / v)
    if schedule == "zb-h1":
        return (p - 1) / (3 * m + p - 1)
    return 0.0  # zb-v: zero bubble at equal costs


def pipeline_cases(rng):
    out = []
    m = 8
    for schedule in ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"):
        for p in (2, 4):
            v = 2 if schedule in ("interleaved", "zb-v") else 1
            par = parallel(pp=p, vpp=v)
            params = {"schedule": schedule, "microbatches": m, "layers": 2 * p * v}
            sim = simulate(schedule_actions(schedule, p, m), p, unit_s=1e-3)
            jitter = [noisy(rng, 1.0, 4) for _ in range(p)]
            timeline = [[[a[0], a[1], a[2], a[3] * jitter[r], a[4] * jitter[r]] for a in sim["timeline"][r]]
                        for r in range(p)]
            measured_bubbles = [min(0.99, b * noisy(rng, 1.1, 8) + 0.01) for b in sim["bubble_per_rank"]]
            tensors = [tensor(n, 3e-6, 2.5e-6, 1e-5) for n in ("loss", "grads")]
            out.append(record("pipeline", schedule, p, par, params, tensors, {"step": sim["makespan_s"]},
                              {"bubble_measured_mean": measured(sum(measured_bubbles) / p, "1"),
                               "bubble_measured_max": measured(max(measured_bubbles), "1"),
                               "bubble_simulated": measured(sim["bubble_mean"], "1"),
                               "bubble_closed_form": measured(closed_form(schedule, p, m, v), "1"),
                               "makespan_s": measured(sim["makespan_s"], "s"),
                               "microbatches_per_s": measured(m / sim["makespan_s"], "microbatches/s"),
                               "peak_activations": measured(m if schedule == "gpipe" else p, "microbatches"),
                               "timeline": timeline,
                               "trace_file": f"synthetic-{schedule}-pp{p}.trace.json"}, rng, dtype="f32"))
    return out


STEP_CONFIGS = [(1, {}), (2, {"tp": 2, "sp": True}), (2, {"pp": 2}), (4, {"tp": 2, "dp": 2, "sp": True}),
                (4, {"tp": 2, "cp": 2, "sp": True}), (8, {"tp": 2, "cp": 2, "dp": 2, "sp": True}),
                (8, {"tp": 2, "pp": 2, "dp": 2, "ep": 4, "sp": True})]


def comm_entry(comm, exposed):
    return {"comm_s": comm, "exposed_s": exposed, "hidden_s": comm - exposed,
            "exposed_fraction": exposed / comm if comm else None}


def comm_by_dim(split, dp_exposed_share=1.0):
    """comm_by_dim from a time split's exposed parts; with overlap only a share of dp's is exposed."""
    out = {}
    for d in ("tp", "cp", "ep", "dp", "pp"):
        comm = split.get(f"exposed_{d}", 0.0)
        out[d] = comm_entry(comm, comm * (dp_exposed_share if d == "dp" else 1.0))
    out["all"] = comm_entry(sum(v["comm_s"] for v in out.values()), sum(v["exposed_s"] for v in out.values()))
    return out


def step_cases(rng):
    out = []
    for ranks, dims in STEP_CONFIGS:
        par = parallel(**dims)
        params = {"hidden": 256, "layers": 4, "heads": 8, "seq": 512, "vocab": 4096, "batch": 8,
                  "cp_comm": "p2p", "schedule": "1f1b", "steps": 3}
        flops = 6 * 4096 * 4 * 12 * 256 * 256
        mfu = noisy(rng, 0.42 * 0.93 ** math.log2(ranks), 3)
        tokens = mfu * 100e12 * ranks * 4096 / flops
        split = {"compute": 0.3, "exposed_tp": 0.02 * dims.get("tp", 1), "exposed_cp": 0.015 * dims.get("cp", 1),
                 "exposed_dp": 0.01 * dims.get("dp", 1), "bubble": 0.05 * (dims.get("pp", 1) - 1)}
        step_s = 4096 / tokens
        split = {k: v * step_s / sum(split.values()) for k, v in split.items()}  # seconds, summing to the step
        losses = [8.32 - 0.05 * s + rng.uniform(-1e-4, 1e-4) for s in range(3)]
        tensors = [tensor("loss", 1e-6, 1e-6, 1e-5, count=3), tensor("grads", 4e-6, 3e-6, 1e-5)]
        metrics = {"tokens_per_s": measured(tokens, "tokens/s"),
                   "tflops_per_rank": measured(mfu * 100, "TFLOP/s"), "mfu": measured(mfu, "1"),
                   "peak_tflops": measured(100.0, "TFLOP/s"), "peak_source": "synthetic fixture",
                   "flops_per_step": measured(flops, "FLOP"),
                   "flops_formula": "T*(6*L*12*h^2) (synthetic)",
                   "bubble_fraction": measured(split["bubble"] / sum(split.values()), "1"),
                   "time_split": split, "losses": losses}
        if dims.get("dp", 1) > 1:  # overlapped DP communication: 30% of dp exposed, and the same without overlap
            params = dict(params, zero=True, overlap_grad_reduce=True, overlap_param_gather=True)
            with_overlap, without = comm_by_dim(split, 0.3), comm_by_dim(split)
            metrics.update({"comm_by_dim": with_overlap, "comm_by_dim_without_overlap": without,
                            "comm_exposed_fraction": measured(with_overlap["all"]["exposed_fraction"], "1"),
                            "comm_exposed_fraction_without_overlap": measured(without["all"]["exposed_fraction"],
                                                                              "1")})
        else:
            metrics["comm_by_dim"] = comm_by_dim(split)
            metrics["comm_exposed_fraction"] = measured(metrics["comm_by_dim"]["all"]["exposed_fraction"], "1")
        out.append(record("step", "gpt", ranks, par, params, tensors, {"step": step_s}, metrics, rng, dtype="f32"))
    return out


def document(name, cases, world=8):
    summary = {"cases": len(cases), "pass": 0, "fail": 0, "skip": 0, "error": 0}
    for c in cases:
        summary[c["conformance"]["status"]] += 1
    run = {"id": f"synthetic-{name}", "start": START, "end": START, "version": "0.1.0", "git_sha": "synthetic",
           "command": "SYNTHETIC fixture written by scripts/tests/make_fixtures.py (not a measurement)",
           "synthetic": True, "summary": summary}
    return {"schema": "sextant.result/1", "run": run, "system": system(world), "cases": cases}


def fixtures():
    """{file name: document}, deterministic."""
    rng = random.Random(20260101)
    cases = tp_sp_cases(rng) + attention_cases(rng) + moe_cases(rng) + pipeline_cases(rng) + step_cases(rng)
    cases += dynamic_cp_cases()
    import screen_fixture  # after this module is loaded: it builds on its helpers
    return {"synthetic-suites.json": document("suites", cases),
            "synthetic-screen.json": screen_fixture.screen_document(sys.modules[__name__])}


def rounded(x):
    """Floats to 6 significant digits: small, stable fixture files."""
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def dumps(doc):
    """JSON with one case per line: compact, and a diff shows which case changed."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [json.dumps(c, sort_keys=True) for c in doc["cases"]]
    text = json.dumps(head, indent=1, sort_keys=True)[:-2]
    return text + ',\n "cases": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    for name, doc in fixtures().items():
        with open(os.path.join(FIXTURES, name), "w", encoding="utf-8") as f:
            f.write(dumps(rounded(doc)))
        print(os.path.join(FIXTURES, name))


if __name__ == "__main__":
    main()
