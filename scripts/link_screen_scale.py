#!/usr/bin/env python3
"""How long screen/links takes at scale: a model of the link screen's rounds
and wall time at given node counts, for three schedules of the pairs.

    python3 scripts/link_screen_scale.py
    python3 scripts/link_screen_scale.py --nodes 8,64,1024 --gpus-per-node 8 --bytes 64M
    python3 scripts/link_screen_scale.py --inter-GBps 22 --sample-rounds 4

The schedules (docs/SCREEN_SCALE.md says more):

  full          what screen/links runs: a round-robin tournament of all
                n = nodes * gpus ranks (circle method, n - 1 rounds for even
                n, n for odd), n / 2 disjoint pairs per round.
  hierarchical  an intra-node tournament on every node at once (g - 1 rounds
                of same-node pairs), then a tournament of the nodes (N - 1
                rounds) in which each meeting node pair's g rail-aligned rank
                pairs (rank i of node A with rank i of node B) measure at once.
  sampled       the intra-node rounds, then only k rounds of the node
                tournament with the nodes randomly relabelled: k distinct
                partners per node, a different sample each run.

One pair's measurement, as suites/screen/links.cc makes it: L ping-pongs of
a small message (2 L one-way latencies), then R messages of B bytes each way,
each followed by a one-element acknowledgement:

    t_pair = 2 L lat + 2 R (B / bw + 2 lat)

A round lasts as long as its slowest pair, then a barrier of the n ranks,
modelled as a dissemination barrier: barrier_us * ceil(log2 n). Same-node
pairs use --intra-GBps / --intra-latency-us, other-node pairs --inter-GBps /
--latency-us. The case runs the tournament 1 (check) + warmup + iters times;
--passes (default 26: the qualify profile's 5 warmup + 20 iters) scales the
last column.

Not modelled: contention between the concurrent pairs of a round (the
switches, and NICs shared when a cross-rail pair is routed through a GPU on
the other rail), adaptive routing, a slow link or straggler stretching every
round it is in, launch and allocation costs, and the final all-gather of the
n x n link matrices. It is an estimate of the order of the cost, not a
prediction.

Exit 0, or 2 on bad usage.
"""
import argparse
import dataclasses
import math
import random
import sys

STRATEGIES = ("full", "hierarchical", "sampled")


@dataclasses.dataclass
class Params:
    """Link speeds and the case's settings. Defaults: an H100/H200 SXM node
    (8 GPUs on NVLink 4, one 400 Gb/s NDR NIC per GPU on a rail-optimised
    fabric) and the qualify profile of screen/links on CUDA."""

    bytes: int = 64 << 20  # the bandwidth message (qualify on CUDA: 64 MiB)
    latency_reps: int = 10  # ping-pongs per pair
    bandwidth_reps: int = 3  # messages per direction per pair
    # NVLink 4: 900 GB/s per GPU, both directions together (H100 and H200
    # datasheets), so 450 GB/s each way; 400 assumes ~90% of it for one p2p.
    intra_GBps: float = 400.0
    # One ConnectX-7 at 400 Gb/s NDR per GPU = 50 GB/s each way (DGX SuperPOD
    # reference architecture); 45 assumes ~90% of line rate.
    inter_GBps: float = 45.0
    latency_us: float = 5.0  # one small p2p message to another node
    intra_latency_us: float | None = None  # same node; None: latency_us
    barrier_us: float = 10.0  # per step of a log2(n)-step host barrier
    sample_rounds: int = 8  # k: node rounds of the sampled schedule
    passes: int = 26  # tournaments per case run: 1 check + warmup + iters

    def __post_init__(self):
        if self.intra_latency_us is None:
            self.intra_latency_us = self.latency_us


def pair_seconds(bytes_, bw_GBps, lat_us, latency_reps, bandwidth_reps):
    """One pair's measurement: L ping-pongs, then R messages of B bytes each
    way, each with its acknowledgement (the message's latency and the ack's)."""
    lat = lat_us * 1e-6
    return 2 * latency_reps * lat + 2 * bandwidth_reps * (bytes_ / (bw_GBps * 1e9) + 2 * lat)


def barrier_seconds(ranks, barrier_us):
    return 0.0 if ranks <= 1 else barrier_us * 1e-6 * math.ceil(math.log2(ranks))


def round_robin(n):
    """The circle method, as suites/screen/suspects.cc: seat m = n rounded up
    to even; seat 0 stays, the others rotate one place each round; seat m - 1
    is the bye when n is odd. m - 1 rounds (n - 1 for even n, n for odd), each
    a sorted list of disjoint (lower, higher) pairs; every pair meets once."""
    if n < 1:
        raise ValueError("round_robin: at least one rank")
    m = n + n % 2
    seats = list(range(m))
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = seats[i], seats[m - 1 - i]
            if a < n and b < n:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        seats = [seats[0], seats[-1]] + seats[1:-1]  # std::rotate by one to the right
    return rounds


def circle_pair(n, r, i):
    """Pair i of round r of round_robin(n) without building the rounds (None
    for the bye). After r rotations seat j >= 1 holds 1 + (j - 1 - r) mod (m - 1)."""
    m = n + n % 2

    def seat(j):
        return 0 if j == 0 else 1 + (j - 1 - r) % (m - 1)

    a, b = seat(i), seat(m - 1 - i)
    return None if a >= n or b >= n else (min(a, b), max(a, b))


def _intra_node_rounds(nodes, gpus):
    """g - 1 (or g) rounds of same-node pairs, every node at once."""
    if gpus < 2:
        return []
    return [sorted((v * gpus + a, v * gpus + b) for v in range(nodes) for a, b in local) for local in round_robin(gpus)]


def _rail_rounds(node_rounds, gpus, label):
    """Node rounds as rank pairs: each meeting node pair's g rail-aligned pairs
    (node seat s is node label[s])."""
    rounds = []
    for node_round in node_rounds:
        pairs = []
        for a, b in node_round:
            u, v = sorted((label[a], label[b]))
            pairs.extend((u * gpus + i, v * gpus + i) for i in range(gpus))
        rounds.append(sorted(pairs))
    return rounds


def hierarchical_rounds(nodes, gpus):
    """The hierarchical schedule as rank pairs (rank = node * gpus + local):
    g - 1 (or g) intra-node rounds on all nodes at once, then N - 1 (or N)
    node rounds of rail-aligned pairs. For checking; simulate() only counts."""
    node_rounds = round_robin(nodes) if nodes > 1 else []
    return _intra_node_rounds(nodes, gpus) + _rail_rounds(node_rounds, gpus, list(range(nodes)))


def sampled_rounds(nodes, gpus, k, seed=None):
    """The sampled schedule: the intra-node rounds, then k rounds of the node
    tournament with the nodes randomly relabelled (k distinct partners each)."""
    label = list(range(nodes))
    random.Random(seed).shuffle(label)
    node_rounds = round_robin(nodes)[:k] if nodes > 1 else []
    return _intra_node_rounds(nodes, gpus) + _rail_rounds(node_rounds, gpus, label)


def _full_round_has_inter(n, gpus, r):
    """Whether round r of the all-rank tournament holds an other-node pair
    (ranks placed node-major). Stops at the first one: O(1) for most rounds."""
    m = n + n % 2
    for i in range(m // 2):
        p = circle_pair(n, r, i)
        if p is not None and p[0] // gpus != p[1] // gpus:
            return True
    return False


def _rounds_of(count):
    """Rounds of a tournament of `count` players: count - 1 even, count odd."""
    return 0 if count <= 1 else count - 1 + count % 2


def simulate(nodes, gpus_per_node, strategy, params=None):
    """Rounds, pair measurements and estimated seconds of one pass of the
    link screen under `strategy` (full, hierarchical, sampled). params: a
    Params, a dict of its fields, or None for the defaults."""
    if isinstance(params, dict):
        params = Params(**params)
    p = params or Params()
    if nodes < 1 or gpus_per_node < 1:
        raise ValueError("nodes and gpus_per_node must be at least 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    N, g = nodes, gpus_per_node
    n = N * g
    t_intra = pair_seconds(p.bytes, p.intra_GBps, p.intra_latency_us, p.latency_reps, p.bandwidth_reps)
    t_inter = pair_seconds(p.bytes, p.inter_GBps, p.latency_us, p.latency_reps, p.bandwidth_reps)
    barrier = barrier_seconds(n, p.barrier_us)
    intra_pairs_all = N * g * (g - 1) // 2
    node_pairs = N * (N - 1) // 2
    if strategy == "full":
        rounds = _rounds_of(n)
        inter_rounds = 0 if N == 1 else sum(_full_round_has_inter(n, g, r) for r in range(rounds))
        intra_rounds = rounds - inter_rounds
        pairs = n * (n - 1) // 2
        node_pairs_seen = node_pairs
    else:
        intra_rounds = _rounds_of(g)
        full_node_rounds = _rounds_of(N)
        inter_rounds = full_node_rounds if strategy == "hierarchical" else min(p.sample_rounds, full_node_rounds)
        rounds = intra_rounds + inter_rounds
        meetings_per_round = N // 2  # node pairs that meet in one node round
        node_pairs_seen = node_pairs if strategy == "hierarchical" else inter_rounds * meetings_per_round
        pairs = intra_pairs_all + node_pairs_seen * g
    # A round with an other-node pair waits for it; intra-only rounds don't.
    seconds = intra_rounds * (t_intra + barrier) + inter_rounds * (max(t_inter, t_intra) + barrier)
    return {
        "strategy": strategy,
        "nodes": N,
        "ranks": n,
        "rounds": rounds,
        "intra_rounds": intra_rounds,
        "inter_rounds": inter_rounds,
        "pair_measurements": pairs,
        "node_pairs_seen": node_pairs_seen,
        "node_pair_coverage": 1.0 if node_pairs == 0 else node_pairs_seen / node_pairs,
        "pair_seconds": {"same_node": t_intra, "other_node": t_inter},
        "barrier_seconds": barrier,
        "seconds": seconds,
        "case_seconds": seconds * p.passes,
        # The case gathers two n x n float64 matrices on every rank, whatever the schedule.
        "matrix_bytes_per_rank": 2 * 8 * n * n,
    }


def human_seconds(s):
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.2f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def human_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024


def parse_bytes(text):
    """64, 4K, 64M, 1G: binary units, as the harness's --set link_bytes=."""
    units = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    num = t.rstrip("KMGB")
    unit = t[len(num):]
    if unit not in units or not num:
        raise argparse.ArgumentTypeError(f"bad byte count {text!r} (e.g. 64M)")
    try:
        value = int(float(num) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad byte count {text!r} (e.g. 64M)") from None
    if value < 4:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one f32 element (4 B)")
    return value


def parse_nodes(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad node list {text!r} (e.g. 8,64,1024)") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"bad node list {text!r} (e.g. 8,64,1024)")
    return values


def table(rows, passes):
    head = ("strategy", "nodes", "ranks", "rounds", "pair meas.", "node pairs", "est. time", f"x{passes} passes")
    body = [
        (
            r["strategy"],
            str(r["nodes"]),
            str(r["ranks"]),
            str(r["rounds"]),
            f"{r['pair_measurements']:,}",
            f"{100 * r['node_pair_coverage']:.1f}%",
            human_seconds(r["seconds"]),
            human_seconds(r["case_seconds"]),
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Params()
    ap.add_argument("--nodes", type=parse_nodes, default=[8, 64, 1024], help="node counts (default 8,64,1024)")
    ap.add_argument("--gpus-per-node", type=int, default=8, help="ranks per node (default 8)")
    ap.add_argument("--bytes", type=parse_bytes, default=d.bytes, help="bandwidth message (default 64M)")
    ap.add_argument("--latency-reps", type=int, default=d.latency_reps, help="ping-pongs per pair (default 10)")
    ap.add_argument("--bandwidth-reps", type=int, default=d.bandwidth_reps, help="messages each way per pair (default 3)")
    ap.add_argument("--intra-GBps", type=float, default=d.intra_GBps, help="same-node p2p GB/s, one way (default 400)")
    ap.add_argument("--inter-GBps", type=float, default=d.inter_GBps, help="other-node p2p GB/s, one way (default 45)")
    ap.add_argument("--latency-us", type=float, default=d.latency_us, help="other-node one-way latency (default 5)")
    ap.add_argument("--intra-latency-us", type=float, default=None, help="same-node latency (default: --latency-us)")
    ap.add_argument("--barrier-us", type=float, default=d.barrier_us, help="per log2 step of the barrier (default 10)")
    ap.add_argument("--sample-rounds", type=int, default=d.sample_rounds, help="k node rounds when sampled (default 8)")
    ap.add_argument("--passes", type=int, default=d.passes, help="tournaments per case run (default 26: qualify)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="which, comma-separated (default all)")
    a = ap.parse_args(argv)
    strategies = [s for s in a.strategies.split(",") if s]
    bad = [s for s in strategies if s not in STRATEGIES]
    positive = (a.gpus_per_node, a.latency_reps, a.bandwidth_reps, a.sample_rounds, a.passes, a.intra_GBps, a.inter_GBps)
    if bad or not strategies:
        ap.error(f"unknown strategy {','.join(bad) or '(none)'}: one of {','.join(STRATEGIES)}")
    if min(positive) <= 0 or a.latency_us < 0 or a.barrier_us < 0 or (a.intra_latency_us or 0) < 0:
        ap.error("counts and speeds must be positive, latencies and barrier not negative")
    p = Params(
        bytes=a.bytes,
        latency_reps=a.latency_reps,
        bandwidth_reps=a.bandwidth_reps,
        intra_GBps=a.intra_GBps,
        inter_GBps=a.inter_GBps,
        latency_us=a.latency_us,
        intra_latency_us=a.intra_latency_us,
        barrier_us=a.barrier_us,
        sample_rounds=a.sample_rounds,
        passes=a.passes,
    )
    rows = [simulate(N, a.gpus_per_node, s, p) for N in a.nodes for s in strategies]
    t_intra, t_inter = rows[0]["pair_seconds"]["same_node"], rows[0]["pair_seconds"]["other_node"]
    print(
        f"link screen: {a.gpus_per_node} GPUs/node, {human_bytes(p.bytes)} x {p.bandwidth_reps} each way, "
        f"{p.latency_reps} ping-pongs; same node {p.intra_GBps:g} GB/s, other node {p.inter_GBps:g} GB/s, "
        f"latency {p.latency_us:g} us"
    )
    print(
        f"one pair: same node {human_seconds(t_intra)}, other node {human_seconds(t_inter)}; "
        f"barrier {p.barrier_us:g} us x ceil(log2 ranks); sampled: k = {p.sample_rounds} node rounds"
    )
    print()
    print(table(rows, p.passes))
    print()
    for N in a.nodes:
        n = N * a.gpus_per_node
        line = f"{N} nodes: link matrices {human_bytes(2 * 8 * n * n)} per rank"
        if N > 1 and "sampled" in strategies:
            r = simulate(N, a.gpus_per_node, "sampled", p)
            k = r["inter_rounds"]
            line += (
                f"; sampled k={k}: each NIC measured {k if N % 2 == 0 else f'>={k - 1}'}x, "
                f"a node pair in {100 * r['node_pair_coverage']:.1f}% of runs, "
                f"all pairs in {math.ceil(_rounds_of(N) / k)} runs of rotated rounds"
            )
        print(line)
    print("not modelled: contention in a round, adaptive routing, slow links stretching their rounds, stragglers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
