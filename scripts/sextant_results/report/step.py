"""The full training step: throughput, MFU and where the step time goes, per
parallel configuration."""
from ..load import cases_of, extra, metric, metric_unit, parallel_text
from .common import Section, Table, as_percent, fmt, legend, runs_used, subplots, systems_caption

TITLE = "Training step (MFU and throughput)"


def config_label(run, case, runs):
    label = f"{case['ranks']}r {parallel_text(case)}"
    return label + (f"\n[{run.label}]" if len(runs) > 1 else "")


def mfu_percent(case):
    return as_percent(metric(case, "mfu"), metric_unit(case, "mfu"))


def time_split_axis(ax, pairs, labels):
    """Stacked seconds per component (compute, exposed comm per dimension, bubble)."""
    splits = [extra(c, "time_split") if isinstance(extra(c, "time_split"), dict) else {} for _, c in pairs]
    parts = []
    for s in splits:
        parts += [k for k in s if k not in parts and isinstance(s[k], (int, float))]
    # compute at the bottom, the bubble on top, exposed communication between
    parts.sort(key=lambda k: (k != "compute", k == "bubble", k))
    bottoms = [0.0] * len(pairs)
    for i, part in enumerate(parts):
        ys = [float(s.get(part, 0) or 0) * 1e3 for s in splits]
        ax.bar(range(len(pairs)), ys, 0.6, bottom=bottoms, label=part, color=f"C{i % 10}")
        bottoms = [b + y for b, y in zip(bottoms, ys)]
    ax.set_xticks(range(len(pairs)), labels, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("time per step (ms)")
    ax.set_title("where the step time goes", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    legend(ax)


def figure(runs, pairs, out):
    labels = [config_label(r, c, runs) for r, c in pairs]
    has_split = any(isinstance(extra(c, "time_split"), dict) for _, c in pairs)
    fig, axes = subplots(1, 3 if has_split else 2, width=4.6, height=3.8)
    panels = [("tokens_per_s", lambda c: metric(c, "tokens_per_s"), "throughput (tokens/s, all ranks)"),
              ("mfu", mfu_percent, "MFU (% of peak)")]
    for k, (name, value, ylabel) in enumerate(panels):
        ax = axes[0][k]
        ax.bar(range(len(pairs)), [value(c) or 0 for _, c in pairs], 0.6, color=f"C{k}")
        ax.set_xticks(range(len(pairs)), labels, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(ylabel.split(" (")[0], fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    if has_split:
        time_split_axis(axes[0][2], pairs, labels)
    sources = sorted({str(extra(c, "peak_source")) for _, c in pairs if extra(c, "peak_source")})
    caption = ("Training-step throughput (tokens/s over all ranks), model FLOPs utilization MFU = model FLOPs "
               "per step / (step time x ranks x peak FLOP/s)"
               + (f" with peak from {', '.join(sources)}" if sources else "")
               + (", and the step time split into compute, exposed communication per dimension and pipeline "
                  "bubble" if has_split else "")
               + f", per parallel configuration. {systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "step_mfu.png", "Training step: throughput, MFU and time split", caption)


def table(runs, pairs):
    rows = []
    for run, c in pairs:
        peak = metric(c, "peak_tflops")
        rows.append([run.label, str(c["ranks"]), parallel_text(c), c["dtype"], fmt(metric(c, "tokens_per_s")),
                     fmt(metric(c, "tflops_per_rank")), fmt(mfu_percent(c)),
                     f"{fmt(peak)} ({extra(c, 'peak_source') or '?'})" if peak else "-",
                     fmt(metric(c, "bubble_fraction")), str(extra(c, "flops_formula") or "-")])
    return Table("Training step instances", ["run", "ranks", "parallel", "dtype", "tokens/s", "TFLOP/s/rank",
                                             "MFU %", "peak TFLOP/s", "bubble", "FLOPs formula"], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "step") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no step cases in the results (the full training step suite)")
    pairs = [(r, c) for r, c in pairs if metric(c, "tokens_per_s") is not None or metric(c, "mfu") is not None]
    if not pairs:
        return Section.skip(TITLE, "step cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, pairs)
    pairs.sort(key=lambda rc: (rc[0].index, rc[1]["ranks"], parallel_text(rc[1])))
    return Section(TITLE, figures=[figure(runs, pairs, out)], tables=[table(runs, pairs)])
