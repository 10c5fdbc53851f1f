"""The full training step. step/train records (each parallel config trained
and checked step after step): throughput, MFU, where the step time goes and
how much of each dimension's communication the step waited for, with and
without overlapped data-parallel communication.
step/sweep records (every factorisation of the rank count, ranked by
throughput next to the planner's prediction): the fastest configs per rank
count."""
import os
import statistics

from matplotlib.ticker import EngFormatter

from ..load import cases_of, extra, metric, metric_unit, par, param, parallel_text
from .common import (Section, Table, as_percent, figure_legend, fmt, legend, runs_used, subplots,
                     systems_caption)

TITLE = "Training step (MFU and throughput)"
SWEEP_SHOWN = 10  # configs drawn per rank count; the table has them all


def model_kind(case):
    """'MoE' when some layer is a mixture of experts, else 'dense'."""
    moe = (param(case, "moe_every", 0) or 0) > 0 or "1" in str(param(case, "moe_pattern", ""))
    return "MoE" if moe and (param(case, "experts", 0) or 0) > 0 else "dense"


def schedule_of(case):
    return extra(case, "schedule") or param(case, "schedule")


def config_text(case):
    """'tp2 pp2 vpp2 sp, interleaved m2, ZeRO-1': parallel sizes plus what
    else makes this config differ (schedule, CP communication, ZeRO)."""
    parts = [parallel_text(case)]
    if par(case, "pp") > 1:
        parts.append(f"{schedule_of(case) or '1f1b'} m{param(case, 'microbatches', '?')}")
    if par(case, "cp") > 1:
        parts.append(f"cp {param(case, 'cp_comm', 'p2p')}")
    if param(case, "zero"):
        parts.append("ZeRO-1")
    overlap = [name for key, name in (("overlap_grad_reduce", "grad"), ("overlap_param_gather", "gather"))
               if param(case, key)]
    if overlap:
        parts.append("overlap " + "+".join(overlap))
    if param(case, "data"):
        parts.append("data " + os.path.basename(str(param(case, "data"))))
    return ", ".join(parts)


def config_label(case, kinds):
    label = f"{case['ranks']}r {config_text(case)}"
    return label + (f" ({model_kind(case)})" if len(kinds) > 1 else "")


def mfu_percent(case):
    return as_percent(metric(case, "mfu"), metric_unit(case, "mfu"))


def time_split(case):
    s = extra(case, "time_split")
    return {k: v for k, v in s.items() if isinstance(v, (int, float))} if isinstance(s, dict) else None


def bar_axis(ax, labels, ylabel):
    ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=35, ha="right")
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)


def time_split_axis(ax, pairs, labels):
    """Stacked ms per component: compute at the bottom, exposed communication
    per dimension, the pipeline bubble on top. A config without a split is
    marked n/a, not left as an unexplained gap."""
    splits = [time_split(c) for _, c in pairs]
    parts = []
    for s in splits:
        parts += [k for k in (s or {}) if k not in parts and (s or {})[k] > 0]
    parts.sort(key=lambda k: (k != "compute", k == "bubble", k))
    bottoms = [0.0] * len(pairs)
    for i, part in enumerate(parts):
        ys = [float((s or {}).get(part, 0)) * 1e3 for s in splits]
        ax.bar(range(len(pairs)), ys, 0.6, bottom=bottoms, color=f"C{i % 10}",
               label=part if part in ("compute", "bubble") else f"{part} comm (exposed)")
        bottoms = [b + y for b, y in zip(bottoms, ys)]
    for x, s in enumerate(splits):
        if s is None:
            ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color="grey")
    bar_axis(ax, labels, "time per step (ms, mean over ranks)")
    ax.set_title("where the step time goes", fontsize=10)
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def train_figure(runs, pairs, out):
    """One row per run: throughput, MFU and the time split per config."""
    kinds = {model_kind(c) for _, c in pairs}
    rows = [[c for r, c in pairs if r is run] for run in runs]
    has_split = any(time_split(c) for _, c in pairs)
    width = max(4.6, 0.42 * max(len(r) for r in rows) + 1.2)
    fig, axes = subplots(len(runs), 3 if has_split else 2, width=width, height=4.2)
    panels = [(lambda c: metric(c, "tokens_per_s"), "throughput (tokens/s, all ranks)", "throughput"),
              (mfu_percent, "MFU (% of peak)", "MFU")]
    for i, (run, cases) in enumerate(zip(runs, rows)):
        labels = [config_label(c, kinds) for c in cases]
        suffix = f" [{run.label}]" if len(runs) > 1 else ""
        for k, (value, ylabel, title) in enumerate(panels):
            ax = axes[i][k]
            ax.bar(range(len(cases)), [value(c) or 0 for c in cases], 0.6, color=f"C{k}")
            bar_axis(ax, labels, ylabel)
            ax.set_title(title + suffix, fontsize=10)
        if has_split:
            time_split_axis(axes[i][2], [(run, c) for c in cases], labels)
            axes[i][2].set_title("where the step time goes" + suffix, fontsize=10)
    sources = sorted({str(extra(c, "peak_source")) for _, c in pairs if extra(c, "peak_source")})
    model = f"{', '.join(sorted(kinds))} GPT" + "".join(
        f", {k} {param(pairs[0][1], k)}" for k in ("layers", "hidden", "seq", "batch")
        if len({param(c, k) for _, c in pairs}) == 1 and param(pairs[0][1], k) is not None)
    runs = runs_used(runs, pairs)
    caption = (f"step/train: each parallel configuration trains the same model ({model}) and is checked against "
               f"the float64 reference step after step. Throughput in tokens/s over all ranks; MFU = model FLOPs "
               f"per step / (step time x ranks x peak FLOP/s)"
               + (f" with peak from {', '.join(sources)}" if sources else "")
               + ("; the step time split into compute, communication exposed per dimension (tp/cp/ep/dp/pp) and "
                  "pipeline bubble" if has_split else "")
               + f". Labels: ranks, parallel sizes, pipeline schedule and microbatches m, CP communication. "
               f"{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "step_mfu.png", "Training step: throughput, MFU and time split", caption)


DIMS = ("tp", "cp", "ep", "dp", "pp")


def comm_by_dim(case, without_overlap=False):
    """Per dimension {comm_s, exposed_s, hidden_s, exposed_fraction}, or None."""
    c = extra(case, "comm_by_dim_without_overlap" if without_overlap else "comm_by_dim")
    return c if isinstance(c, dict) else None


def comm_variants(case):
    """[(label, comm_by_dim)]: the run as configured, and without overlap where it was measured."""
    with_overlap = bool(param(case, "overlap_grad_reduce") or param(case, "overlap_param_gather"))
    variants = [("overlap" if with_overlap else "no overlap", comm_by_dim(case))]
    if comm_by_dim(case, True):
        variants.append(("no overlap", comm_by_dim(case, True)))
    return variants


def exposed_percent(case, without_overlap=False):
    c = comm_by_dim(case, without_overlap)
    f = (c or {}).get("all", {}).get("exposed_fraction")
    return None if f is None else 100.0 * f


def overlap_figure(runs, pairs, out):
    """Per config: communication per step and dimension, the part the step
    waited for (solid) under the part hidden behind compute (hatched), as run
    and, where the case measured it, the same steps without overlap."""
    pairs = [(r, c) for r, c in pairs if comm_by_dim(c)]
    if not pairs:
        return None
    ncols = min(len(pairs), 3)
    nrows = (len(pairs) + ncols - 1) // ncols
    fig, axes = subplots(nrows, ncols, width=4.8, height=3.6)
    panels = [a for row in axes for a in row]
    for ax in panels[len(pairs):]:
        ax.axis("off")
    colors = {"overlap": "C0", "no overlap": "C1"}
    for ax, (run, c) in zip(panels, pairs):
        variants = comm_variants(c)
        # Dimensions with communication worth a bar: above 1% of the panel's largest.
        largest = max((v[d]["comm_s"] for _, v in variants for d in DIMS if d in v), default=0)
        dims = [d for d in DIMS if any(v.get(d, {}).get("comm_s", 0) > 0.01 * largest for _, v in variants)]
        width = 0.8 / len(variants)
        for k, (label, v) in enumerate(variants):
            xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(dims))]
            exposed = [1e3 * v[d]["exposed_s"] for d in dims]
            hidden = [1e3 * v[d]["hidden_s"] for d in dims]
            ax.bar(xs, exposed, width, color=colors[label], label=f"{label}: exposed")
            if any(h > 0.01 * (e + h) for e, h in zip(exposed, hidden)):
                ax.bar(xs, hidden, width, bottom=exposed, color=colors[label], alpha=0.3, hatch="//",
                       label=f"{label}: hidden")
            for x, d, e, h in zip(xs, dims, exposed, hidden):
                f = v[d].get("exposed_fraction")
                if f is not None:
                    ax.text(x, e + h, f"{100 * f:.0f}%", ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(dims)), dims)
        ax.set_ylabel("communication per step (ms)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_title(f"{c['ranks']}r {config_text(c)}" + (f"\n[{run.label}]" if len(runs) > 1 else ""), fontsize=8)
    figure_legend(fig, axes)
    caption = ("step/train: each dimension's communication per step (mean over timed steps and ranks), split into "
               "the time the step waited for it (exposed: inside blocking calls, and the start, tests and wait of "
               "nonblocking collectives) and the rest of the time a nonblocking collective was in flight (hidden "
               "behind compute; in flight until a test or wait saw it complete, so an upper bound). Percentages: "
               "exposed / communication. With overlapped data-parallel communication (gradient buckets reduced "
               "during the backward, ZeRO parameter gathers during the next forward) the case also runs the same "
               "steps without overlap, same buckets: the two bars of dp. "
               f"{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "step_overlap.png", "Training step: communication exposed and hidden per dimension",
                    caption)


def ranking(case):
    rows = extra(case, "ranking")
    return [r for r in rows if isinstance(r, dict) and r.get("tokens_per_s")] if isinstance(rows, list) else []


def sweep_figure(runs, pairs, out):
    """Per (run, rank count): the fastest configs, measured bars and the
    planner's predicted throughput as markers."""
    pairs = [(r, c) for r, c in pairs if len(ranking(c)) > 1]  # one config: nothing to rank
    if not pairs:
        return None
    shown = max(min(SWEEP_SHOWN, len(ranking(c))) for _, c in pairs)
    used = runs_used(runs, pairs)
    per_run = [[(r, c) for r, c in pairs if r is run] for run in used]
    ncols = max(len(p) for p in per_run)
    fig, axes = subplots(len(used), ncols, width=4.4, height=0.26 * shown + 1.4)
    for row, panels in enumerate(per_run):
        for k in range(len(panels), ncols):
            axes[row][k].axis("off")
    for ax, (run, c) in ((axes[row][k], rc) for row, panels in enumerate(per_run) for k, rc in enumerate(panels)):
        rows = sorted(ranking(c), key=lambda r: -r["tokens_per_s"])[:SWEEP_SHOWN]
        ys = range(len(rows))
        ax.barh(ys, [r["tokens_per_s"] for r in rows], 0.6, color="C0", label="measured")
        predicted = [(y, r["tokens_per_s"] * r["step_s"] / r["predicted_step_s"]) for y, r in zip(ys, rows)
                     if r.get("step_s") and r.get("predicted_step_s")]
        if predicted:
            ax.plot([p[1] for p in predicted], [p[0] for p in predicted], "x", color="C3", label="planner prediction")
        ax.set_yticks(list(ys), [r["config"] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("throughput (tokens/s, all ranks)")
        ax.set_title(f"{c['ranks']} ranks: top {len(rows)} of {len(ranking(c))}"
                     + (f" [{run.label}]" if len(runs) > 1 else ""), fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    figure_legend(fig, axes)
    caption = ("step/sweep: every factorisation of the rank count (tp-cp-pp-dp-ep) trains the same model, timed "
               "one after another in each iteration; bars are the measured throughput of the fastest configs, "
               "crosses the planner's prediction from this machine's measured sgemm rate and all-reduce "
               "bandwidth (the median prediction error is in the table). "
               f"{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "step_sweep.png", "Training step: parallel configs ranked by throughput", caption)


def train_table(runs, pairs):
    rows = []
    for run, c in pairs:
        peak = metric(c, "peak_tflops")
        rows.append([run.label, str(c["ranks"]), config_text(c), model_kind(c), c["dtype"],
                     fmt(metric(c, "tokens_per_s")), fmt(metric(c, "tflops_per_rank")), fmt(mfu_percent(c)),
                     f"{fmt(peak)} ({extra(c, 'peak_source') or '?'})" if peak else "-",
                     fmt(metric(c, "bubble_fraction")), fmt(exposed_percent(c)), fmt(exposed_percent(c, True)),
                     str(extra(c, "flops_formula") or "-")])
    return Table("Training step instances (step/train)",
                 ["run", "ranks", "config", "model", "dtype", "tokens/s", "TFLOP/s/rank", "MFU %", "peak TFLOP/s",
                  "bubble", "comm exposed %", "without overlap %", "FLOPs formula"], rows)


MEMORY_KINDS = ["weights", "gradients", "optimizer", "activations", "communication", "workspace"]


def mib(n):
    """Bytes as MiB, 3 significant digits ('-' when absent)."""
    return f"{n / (1 << 20):.3g}" if isinstance(n, (int, float)) else "-"


def memory_table(pairs):
    """Each step's measured peak memory (the most loaded rank, by kind) beside
    the planner's estimate of the same config, or None when no record has one."""
    rows = []
    for run, c in pairs:
        memory = extra(c, "memory")
        if not isinstance(memory, dict):
            continue
        measured, estimate = memory.get("measured") or {}, memory.get("estimate") or {}

        def both(kind):
            return f"{mib(measured.get(kind))} / {mib(estimate.get(kind))}"

        rows.append([run.label, str(c["ranks"]), config_text(c), c["dtype"], str(memory.get("rank", "-")),
                     both("total"), fmt(memory.get("error_pct"))] + [both(k) for k in MEMORY_KINDS])
    if not rows:
        return None
    return Table("Peak memory per rank, MiB: measured / planner's estimate (step/train, step/fp8)",
                 ["run", "ranks", "config", "dtype", "rank", "peak", "estimate error %"] + MEMORY_KINDS, rows)


def sweep_table(runs, pairs):
    rows = [[run.label, str(c["ranks"]), str(len(ranking(c))), str(extra(c, "best_config") or "-"),
             fmt(metric(c, "tokens_per_s")), fmt(mfu_percent(c)), fmt(metric(c, "planner_abs_error_median_pct"))]
            for run, c in pairs]
    return Table("Parallel-config sweeps (step/sweep)", ["run", "ranks", "configs", "fastest", "tokens/s",
                                                          "MFU %", "planner error (median abs %)"], rows)


# A sweep row's phases: what the step measured (`measured`, the slowest
# rank's) and the calibrated planner's split of the same phase.
SWEEP_PHASES = [
    ("forward + backward", lambda m: m["pipeline_s"], lambda p, r: r["predicted_step_s"] - p["dp_s"] - p["optimizer_s"]),
    ("gradient reduction", lambda m: m["reduce_s"], lambda p, r: p["dp_s"]),
    ("optimizer", lambda m: m["optimizer_s"], lambda p, r: p["optimizer_s"]),
]


def sweep_phase_table(pairs):
    """Per rank count, each phase's median over the configs: measured and
    predicted milliseconds, and the median of the planner's signed error."""
    rows = []
    for run, c in pairs:
        measured_rows = [r for r in ranking(c) if r.get("measured") and r.get("predicted") and r.get("predicted_step_s")]
        if not measured_rows:
            continue
        cells = []
        for _, measured, predicted in SWEEP_PHASES:
            pairs_ms = [(measured(r["measured"]) * 1e3, predicted(r["predicted"], r) * 1e3) for r in measured_rows]
            errors = [100 * (p - m) / m for m, p in pairs_ms if m > 0]
            error = fmt(statistics.median(errors)) if errors else "-"
            cells.append(f"{fmt(statistics.median([m for m, _ in pairs_ms]))} / "
                         f"{fmt(statistics.median([p for _, p in pairs_ms]))} ({error}%)")
        rows.append([run.label, str(c["ranks"]), str(len(measured_rows))] + cells)
    if not rows:
        return None
    return Table("Where the calibrated planner errs (step/sweep): each phase's median over the configs, "
                 "measured / predicted ms (median signed error)",
                 ["run", "ranks", "configs"] + [name for name, _, _ in SWEEP_PHASES], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "step") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no step cases in the results (the full training step suite)")
    pairs = [(r, c) for r, c in pairs if metric(c, "tokens_per_s") is not None or metric(c, "mfu") is not None]
    if not pairs:
        return Section.skip(TITLE, "step cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, pairs)
    pairs.sort(key=lambda rc: (rc[0].index, rc[1]["ranks"], config_text(rc[1])))
    train = [(r, c) for r, c in pairs if c["case"] != "sweep"]
    sweep = [(r, c) for r, c in pairs if c["case"] == "sweep"]
    section = Section(TITLE)
    if train:
        section.figures.append(train_figure(runs_used(runs, train), train, out))
        figure = overlap_figure(runs_used(runs, train), train, out)
        if figure:
            section.figures.append(figure)
        section.tables.append(train_table(runs, train))
        memory = memory_table(train)
        if memory:
            section.tables.append(memory)
    if sweep:
        figure = sweep_figure(runs_used(runs, sweep), sweep, out)
        if figure:
            section.figures.append(figure)
        section.tables.append(sweep_table(runs, sweep))
        phases = sweep_phase_table(sweep)
        if phases:
            section.tables.append(phases)
    return section
