"""A small pipeline-schedule simulator for the SYNTHETIC pipeline fixtures:
per-rank action orders for gpipe, 1f1b, interleaved, zb-h1 and zb-v, and the
timeline they give with costs F = 1, B = 2, I = W = 1 (units), blocking on
the dependencies (F of stage s after F of s-1; B/I of s after B/I of s+1 and
its own F; W after I). Only the fixtures use it; the real simulator is C++
(kernels/pipeline)."""
COST = {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}


def stage_rank(schedule, p):
    """Stage -> rank: one stage per rank, round-robin for interleaved, a V for zb-v."""
    if schedule == "interleaved":
        return [s % p for s in range(2 * p)]
    if schedule == "zb-v":
        return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]
    return list(range(p))


def _one_f_one_b(r, p, m, backward="B"):
    warmup = min(p - r - 1, m)
    order = [(r, "F", i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [(r, "F", warmup + i), (r, backward, i)]
    return order + [(r, backward, i) for i in range(m - warmup, m)]


def _interleaved(r, p, m, v=2):
    """Megatron's interleaved 1F1B: microbatches in groups of p, v chunks per rank."""
    total = m * v
    warmup = min((p - r - 1) * 2 + (v - 1) * p, total)

    def unit(k, forward):
        chunk = (k // p) % v
        stage = (chunk if forward else v - 1 - chunk) * p + r
        return (stage, "F" if forward else "B", (k // (p * v)) * p + k % p)

    order = [unit(k, True) for k in range(warmup)]
    for k in range(total - warmup):
        order += [unit(warmup + k, True), unit(k, False)]
    return order + [unit(k, False) for k in range(total - warmup, total)]


def schedule_actions(schedule, p, m):
    """(per-rank orders or None for ready-driven, stage placement)."""
    if schedule == "gpipe":
        orders = [[(r, "F", i) for i in range(m)] + [(r, "B", i) for i in range(m)] for r in range(p)]
    elif schedule == "1f1b":
        orders = [_one_f_one_b(r, p, m) for r in range(p)]
    elif schedule == "interleaved":
        orders = [_interleaved(r, p, m) for r in range(p)]
    elif schedule in ("zb-h1", "zb-v"):
        orders = None  # built by readiness: W fills the gaps
    else:
        raise ValueError(f"unknown schedule {schedule}")
    return {"schedule": schedule, "orders": orders, "placement": stage_rank(schedule, p), "m": m}


def _deps(action, stages, split):
    s, t, i = action
    if t == "F":
        return [(s - 1, "F", i)] if s > 0 else []
    if t in ("B", "I"):
        later = (s + 1, "I" if split else "B", i)
        return [(s, "F", i)] + ([later] if s + 1 < stages else [])
    return [(s, "I", i)]  # W


def _ready_orders(placement, p, m):
    """Zero-bubble schedules by readiness: I first, then F, W fills the gaps;
    new forwards into a rank's first chunk wait while it holds p activations
    (1F1B's memory); the second chunk of a V drains freely."""
    stages = len(placement)
    in_flight = [0] * p
    todo = {r: [(s, t, i) for s in range(stages) if placement[s] == r for t in "FIW" for i in range(m)]
            for r in range(p)}
    done, free, orders = {}, [0.0] * p, [[] for _ in range(p)]
    rank_of = {"I": 0, "F": 1, "W": 2}
    while any(todo.values()):
        best = None
        for r in range(p):
            for a in todo[r]:
                deps = _deps(a, stages, True)
                if a[1] == "F" and a[0] < p and in_flight[r] >= p:
                    continue
                if all(d in done for d in deps):
                    start = max([free[r]] + [done[d] for d in deps])
                    key = (start, rank_of[a[1]], a[2], -a[0])
                    if best is None or key < best[0]:
                        best = (key, r, a)
        (start, *_), r, a = best
        done[a] = start + COST[a[1]]
        free[r] = done[a]
        todo[r].remove(a)
        orders[r].append(a)
        in_flight[r] += {"F": 1, "I": -1, "W": 0}[a[1]]
    return orders


def simulate(actions, p, unit_s=1e-3):
    """Timeline per rank [[stage, type, microbatch, start_s, end_s], ...], makespan, bubbles."""
    placement, m = actions["placement"], actions["m"]
    orders = actions["orders"] or _ready_orders(placement, p, m)
    split = any(a[1] == "I" for order in orders for a in order)
    stages = len(placement)
    done, free, pos = {}, [0.0] * p, [0] * p
    timeline = [[] for _ in range(p)]
    while any(pos[r] < len(orders[r]) for r in range(p)):
        progressed = False
        for r in range(p):
            while pos[r] < len(orders[r]):
                a = orders[r][pos[r]]
                deps = _deps(a, stages, split)
                if not all(d in done for d in deps):
                    break
                start = max([free[r]] + [done[d] for d in deps])
                done[a] = free[r] = start + COST[a[1]]
                timeline[r].append([a[0], a[1], a[2], start * unit_s, done[a] * unit_s])
                pos[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"{actions['schedule']}: deadlock in the synthetic schedule")
    makespan = max(free)
    busy = [sum(COST[a[1]] for a in order) for order in orders]
    bubbles = [(makespan - b) / makespan for b in busy]
    return {"timeline": timeline, "makespan_s": makespan * unit_s, "bubble_per_rank": bubbles,
            "bubble_mean": sum(bubbles) / p}
