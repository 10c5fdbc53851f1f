"""The SYNTHETIC screen run of make_fixtures.py: 8 ranks on two nodes (nodeA:
ranks 0-3, nodeB: ranks 4-7), the screen suite's compute, links and nodes
cases with per-rank timings, and two planted faults the screen names: a
bit flip on rank 5 (an sdc suspect) and a slow link between ranks 1 and 6
(a slow_link suspect, which also makes both ends stragglers). The nodes
case keeps every iteration (sextant run --per-iteration).

Per-rank figures are computed from generated samples the way
harness/timing.cc computes them, so the file is consistent with itself."""
import random

HOSTS = ["nodeA", "nodeB"]
NODE_OF_RANK = [0, 0, 0, 0, 1, 1, 1, 1]
RANKS = len(NODE_OF_RANK)
SDC_RANK = 5
SLOW_LINK = (1, 6)
GEMM_FLOPS = 2 * 256 ** 3


# ---- statistics as harness/timing.cc computes them --------------------------

def percentile(samples, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(samples)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def summarize(samples, warmup=0):
    mean = sum(samples) / len(samples)
    var = sum((x - mean) ** 2 for x in samples) / max(1, len(samples) - 1)
    return {"unit": "s", "median": percentile(samples, 0.5), "p10": percentile(samples, 0.1),
            "p90": percentile(samples, 0.9), "min": min(samples), "max": max(samples), "mean": mean,
            "cv_pct": 100 * var ** 0.5 / mean if mean > 0 else 0.0, "iters": len(samples), "warmup": warmup}


def rank_times(by_rank):
    """time_stats.per_rank from each rank's samples ([rank][iteration])."""
    own = [summarize(samples) for samples in by_rank]
    medians = [s["median"] for s in own]
    typical = percentile(medians, 0.5)
    # Each iteration every rank waits for the slowest one; the wait is charged to it.
    wait = [0.0] * len(by_rank)
    for i in range(len(by_rank[0])):
        times = [samples[i] for samples in by_rank]
        slowest = max(range(len(times)), key=lambda r: times[r])
        wait[slowest] += sum(times[slowest] - t for t in times)
    total = sum(wait)
    return {"median": medians, "p10": [s["p10"] for s in own], "p90": [s["p90"] for s in own],
            "p99": [percentile(samples, 0.99) for samples in by_rank], "cv_pct": [s["cv_pct"] for s in own],
            "straggler_score": [m / typical if typical > 0 else 0.0 for m in medians],
            "wait_share": [w / total if total > 0 else 0.0 for w in wait]}


def timed_region(rng, seconds_of_rank, iters=5, per_iteration=False):
    """A time_stats object: each iteration the max over ranks, and each rank's own figures."""
    by_rank = [[seconds_of_rank(r) * (1 + rng.uniform(-0.03, 0.03)) for _ in range(iters)] for r in range(RANKS)]
    slowest = [max(samples[i] for samples in by_rank) for i in range(iters)]
    stats = summarize(slowest, warmup=2)
    stats["per_rank"] = rank_times(by_rank)
    if per_iteration:
        stats["per_iteration"] = {"max": slowest, "by_rank": by_rank}
    return stats


# ---- the suspects, as suites/screen writes them -----------------------------

def identity(rank):
    return {"rank": rank, "node": NODE_OF_RANK[rank], "host": HOSTS[NODE_OF_RANK[rank]], "gpu": None,
            "gpu_uuid": None}


def sdc_suspect():
    return {**identity(SDC_RANK), "kind": "sdc", "figure": "output_hash", "value": None, "class_median": None,
            "class": "host", "rule": "output_hash differs from the majority's (7 of 8 ranks agree)", "tensor": "c",
            "differing_elements": 1, "first_index": 21845, "repeats_bad": 3, "repeats": 3}


def slow_link_suspect(value, class_median):
    a, b = SLOW_LINK
    return {**identity(b), "kind": "slow_link", "ranks": [a, b],
            "host": f"{HOSTS[NODE_OF_RANK[a]]}<->{HOSTS[NODE_OF_RANK[b]]}", "figure": "p2p_bandwidth_GBps",
            "value": value, "class_median": class_median, "class": "other_node",
            "rule": "p2p_bandwidth_GBps below 0.5 x the class median and 5 scaled MAD below it"}


def suspect_failure(s):
    return f"{s['kind']} {s['figure']}: {s['rule']} ({s['host']})"


# ---- the cases --------------------------------------------------------------

def compute_metrics(rng, stats):
    tflops = [GEMM_FLOPS / m / 1e12 for m in stats["per_rank"]["median"]]
    hashes = ["9e3779b97f4a7c15" if r != SDC_RANK else "9e3779b97f4a7d15" for r in range(RANKS)]
    return {"tflops_per_rank": tflops, "output_hash_per_rank": hashes,
            "tflops_median": {"value": percentile(tflops, 0.5), "unit": "TFLOP/s"}, "suspects": [sdc_suspect()]}


def link_matrix(rng):
    bandwidth, latency, classes = [], [], []
    for s in range(RANKS):
        rows = ([], [], [])
        for r in range(RANKS):
            same = NODE_OF_RANK[s] == NODE_OF_RANK[r]
            slow = {s, r} == set(SLOW_LINK)
            bw = None if s == r else 0.9 if slow else (10.0 if same else 4.8) * (1 + rng.uniform(-0.03, 0.03))
            lat = None if s == r else 5000.0 if slow else (3.0 if same else 12.0) * (1 + rng.uniform(-0.05, 0.05))
            for row, value in zip(rows, (bw, lat, None if s == r else "same_node" if same else "other_node")):
                row.append(value)
        for matrix, row in zip((bandwidth, latency, classes), rows):
            matrix.append(row)
    return {"ranks": RANKS, "bytes": 1 << 22, "bandwidth_GBps": bandwidth, "latency_us": latency, "class": classes,
            "hosts": [HOSTS[n] for n in NODE_OF_RANK], "rounds": RANKS - 1}


def links_metrics(rng):
    matrix = link_matrix(rng)
    other = [bw for s, row in enumerate(matrix["bandwidth_GBps"]) for r, bw in enumerate(row)
             if matrix["class"][s][r] == "other_node"]
    median = percentile(other, 0.5)
    return {"link_matrix": matrix, "p2p_bandwidth_median_GBps": {"value": median, "unit": "GB/s"},
            "suspects": [slow_link_suspect(0.9, median)]}


def nodes_metrics(rng):
    busbw = [3.1 * (1 + rng.uniform(-0.02, 0.02)) for _ in HOSTS]
    return {"node_busbw_GBps": busbw, "node_hosts": list(HOSTS),
            "busbw_median_GBps": {"value": percentile(busbw, 0.5), "unit": "GB/s"}, "suspects": []}


def screen_case(make, name, params, fault, times, metrics):
    """A case record; a case that names suspects fails with one line per suspect."""
    failures = [suspect_failure(s) for s in metrics["suspects"]]
    par = make.parallel(dp=RANKS)
    params = dict(params, fault_rank=SDC_RANK if fault == "bitflip" else SLOW_LINK[1], fault_peer=SLOW_LINK[0])
    return {"suite": "screen", "case": name, "id": make.case_id("screen", name, RANKS, "f32", par, params, fault),
            "params": params, "parallel": par, "ranks": RANKS, "dtype": "f32", "device": "host", "backend": "mpi",
            "fault": fault,
            "conformance": {"status": "fail" if failures else "pass", "tensors": [], "failures": failures,
                            "notes": {}},
            "perf": {"time": times, "metrics": metrics}}


def screen_cases(make):
    rng = random.Random(20261201)
    gemm = timed_region(rng, lambda r: 7e-4 * (1.15 if r == 3 else 1.0))
    links = timed_region(rng, lambda r: 0.05 * (1.8 if r in SLOW_LINK else 1.0))
    nodes = timed_region(rng, lambda r: 2e-3 * (1.05 if NODE_OF_RANK[r] else 1.0), per_iteration=True)
    return [screen_case(make, "compute", {"m": 256, "n": 256, "k": 256, "repeats": 3}, "bitflip", {"gemm": gemm},
                        compute_metrics(rng, gemm)),
            screen_case(make, "links", {"bytes": 1 << 22, "repeats": 3}, "slow_link", {"tournament": links},
                        links_metrics(rng)),
            screen_case(make, "nodes", {"bytes": 1 << 22}, None, {"all_reduce": nodes}, nodes_metrics(rng))]


def node_record(host):
    return {"host": host, "cpu": {"model": "synthetic", "sockets": 1, "logical_cores": 4}, "memory_bytes": 6.4e10,
            "network": [], "infiniband": [], "gpus": {"available": False, "reason": "synthetic fixture"},
            "libraries": {}}


def screen_document(make):
    """The run: make is the make_fixtures module (its record and document helpers)."""
    cases = screen_cases(make)
    doc = make.document("screen", cases, world=RANKS)
    doc["run"]["summary"]["suspects"] = sum(len(c["perf"]["metrics"]["suspects"]) for c in cases)
    doc["system"].update(hosts=list(HOSTS), ranks_per_node=RANKS // len(HOSTS), node_count=len(HOSTS),
                         topology={"nodes": [node_record(h) for h in HOSTS], "node_of_rank": NODE_OF_RANK,
                                   "ranks_per_node_each": [NODE_OF_RANK.count(n) for n in range(len(HOSTS))],
                                   "detected_by": "synthetic fixture"})
    return doc
