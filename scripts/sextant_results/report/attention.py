"""Context-parallel attention: TFLOP/s per rank and load balance vs cp, one
line per variant (and layout), causal and full attention side by side; and
attention/dynamic_cp: static vs dynamic CP time and rank busy fraction per
length distribution."""
from ..load import cases_of, distinguishing_params, extra, metric, par, param, parallel_text
from .common import (MARKERS, Section, Table, figure_legend, fixed_text, fmt, legend, one_slice, position,
                     power_of_two_axis, run_style, runs_used, series_label, subplots, systems_caption)

TITLE = "Attention (context parallel)"
PANELS = [("tflops_per_rank", "TFLOP/s per rank (fwd+bwd)"), ("load_balance", "load balance (max/min compute)")]
AXIS_PARAMS = ("variant", "layout", "causal", "a2a_size")  # drawn as lines/panels, or follow from cp


def variant_label(case, extra_keys=()):
    label = f"{param(case, 'variant', case['case'])}/{param(case, 'layout', '?')}"
    return " ".join([label] + [case["dtype"] if k == "dtype" else f"{k}={param(case, k)}" for k in extra_keys])


def point(case):
    return (variant_label(case), bool(param(case, "causal", False)), par(case, "cp"))


def series(pairs, causal, extra_keys):
    """{(run index, label): (run, sorted [(cp, case)])} for one causal setting."""
    out = {}
    for run, c in pairs:
        if bool(param(c, "causal", False)) != causal:
            continue
        k = (run.index, variant_label(c, extra_keys))
        out.setdefault(k, (run, []))[1].append((par(c, "cp"), c))
    return {k: (run, sorted(pts, key=lambda p: p[0])) for k, (run, pts) in out.items()}


def figure(runs, pairs, out):
    pure = [(r, c) for r, c in pairs if par(c, "cp") == c["ranks"]]
    note = ""
    if pure and len(pure) < len(pairs):  # cp combined with tp/dp: in the table, not in the lines
        pairs = pure
        note = "Drawn: pure context parallelism (cp = ranks); cp combined with other dimensions is in the table. "
    pairs, fixed = one_slice(pairs, lambda c: (variant_label(c), bool(param(c, "causal", False))),
                             lambda c: par(c, "cp"), exclude=AXIS_PARAMS)
    extra_keys = distinguishing_params([c for _, c in pairs], point, exclude=AXIS_PARAMS)
    labels = sorted({variant_label(c, extra_keys) for _, c in pairs})
    fig, axes = subplots(2, len(PANELS), width=5.2, height=3.4)
    for row, causal in enumerate((False, True)):
        for col, (name, ylabel) in enumerate(PANELS):
            ax = axes[row][col]
            for (_, label), (run, pts) in sorted(series(pairs, causal, extra_keys).items()):
                pts = [(cp, metric(c, name)) for cp, c in pts if metric(c, name) is not None]
                if not pts:
                    continue
                i = labels.index(label)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], run_style(runs, run), color=f"C{i % 10}",
                        marker=MARKERS[i % len(MARKERS)], markersize=4, label=series_label(label, run, runs))
            if name == "load_balance":
                ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
            power_of_two_axis(ax, [par(c, "cp") for _, c in pairs], "cp (context-parallel ranks)")
            ax.set_ylabel(ylabel)
            ax.set_title(("causal" if causal else "full (non-causal)") + " attention", fontsize=10)
            ax.grid(True, alpha=0.3)
    figure_legend(fig, axes)
    caption = (f"Attention forward+backward throughput per rank (FLOPs: forward 4*b*s^2*h*d, half when causal, "
               f"backward 2.5x forward) and load balance (max/min per-rank compute time; 1 is perfect) vs "
               f"context-parallel size, per variant/layout. Zigzag layouts should keep causal balance near 1. "
               f"{note}{fixed_text(fixed)}{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "attention_cp.png", "Attention: throughput and load balance vs cp", caption)


def table(runs, pairs):
    rows = []
    for run, c in sorted(pairs, key=lambda rc: (rc[0].index, param(rc[1], "variant", ""), param(rc[1], "layout", ""),
                                                 str(param(rc[1], "causal")), par(rc[1], "cp"))):
        rows.append([run.label, param(c, "variant", c["case"]), param(c, "layout", "-"),
                     fmt(bool(param(c, "causal", False))), parallel_text(c), c["dtype"],
                     fmt(metric(c, "tflops_per_rank")), fmt(metric(c, "tflops_per_rank_fwd")),
                     fmt(metric(c, "load_balance")), fmt(metric(c, "overlap_efficiency"))])
    return Table("Attention instances", ["run", "variant", "layout", "causal", "parallel", "dtype", "TFLOP/s/rank",
                                         "fwd TFLOP/s/rank", "balance", "overlap eff."], rows)


def dynamic_label(case):
    return f"{param(case, 'seq_lens_spec', '?')}\n{case['ranks']} ranks (cp {par(case, 'cp')})"


def dynamic_figure(runs, pairs, out):
    """Grouped bars per (run, length distribution, ranks): time and mean busy fraction, static vs dynamic."""
    pairs = sorted(pairs, key=lambda rc: (rc[0].index, rc[1]["ranks"], str(param(rc[1], "seq_lens_spec", ""))))
    labels = [dynamic_label(c) + (f"\nrun {position(runs, run) + 1}" if len(runs) > 1 else "") for run, c in pairs]
    fig, axes = subplots(1, 2, width=max(5.2, 0.9 * len(pairs) + 2), height=3.6)
    x = list(range(len(pairs)))
    panels = [("time_{}_s", 1e3, "time per global batch (ms)"), ("busy_fraction_{}", 1.0, "busy fraction (mean rank)")]
    for ax, (name, scale, ylabel) in zip(axes[0], panels):
        for k, (mode, color) in enumerate((("static", "C0"), ("dynamic", "C1"))):
            values = [(metric(c, name.format(mode)) or 0.0) * scale for _, c in pairs]
            ax.bar([i + (k - 0.5) * 0.38 for i in x], values, width=0.38, color=color, label=f"{mode} CP")
        if name.startswith("time"):
            for i, (_, c) in enumerate(pairs):
                speedup = metric(c, "speedup_vs_static")
                top = max(metric(c, "time_static_s") or 0.0, metric(c, "time_dynamic_s") or 0.0) * scale
                if speedup is not None:
                    ax.annotate(f"{speedup:.2f}x", (i, top), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
        legend(ax)
    runs_note = " Runs: " + "; ".join(f"{i + 1} = {r.label}" for i, r in enumerate(runs)) + "." if len(runs) > 1 else ""
    caption = ("Dynamic context parallelism: a global batch of packed microbatches (lengths per microbatch from the "
               "distribution on the x axis: zipf:N draws N long-tailed lengths, a single number is one full-length "
               "sequence) run on the full static CP group per microbatch, and re-packed into bins that each run on "
               "the smallest power-of-two group holding their longest sequence. Left: forward+backward time of the "
               "whole batch (labels: speedup of dynamic over static); right: mean fraction of the time a rank "
               "computes attention." + runs_note + " " + systems_caption(runs_used(runs, pairs)))
    return out.save(fig, "attention_dynamic_cp.png", "Attention: static vs dynamic CP per length distribution",
                    caption)


def dynamic_table(runs, pairs):
    rows = []
    for run, c in sorted(pairs, key=lambda rc: (rc[0].index, rc[1]["ranks"], str(param(rc[1], "seq_lens_spec", "")))):
        rows.append([run.label, str(param(c, "seq_lens_spec", "-")), parallel_text(c), c["dtype"],
                     fmt(metric(c, "time_static_s")), fmt(metric(c, "time_dynamic_s")),
                     fmt(metric(c, "speedup_vs_static")), fmt(metric(c, "speedup_vs_static_model")),
                     fmt(metric(c, "busy_fraction_static")), fmt(metric(c, "busy_fraction_dynamic")),
                     str(extra(c, "bins_per_group_dynamic") or "-")])
    return Table("Dynamic CP instances", ["run", "lengths", "parallel", "dtype", "static s", "dynamic s", "speedup",
                                          "model speedup", "busy static", "busy dynamic", "bins per group"], rows)


def build(runs, out):
    every = [(r, c) for r, c in cases_of(runs, "attention") if not c.get("fault")]
    pairs = [(r, c) for r, c in every if c["case"] != "dynamic_cp"]
    dynamic = [(r, c) for r, c in every if c["case"] == "dynamic_cp" and metric(c, "speedup_vs_static") is not None]
    if not every:
        return Section.skip(TITLE, "no attention cases in the results")
    if not any(metric(c, "tflops_per_rank") is not None for _, c in every):
        return Section.skip(TITLE, "attention cases carry no timing (run with --iters > 0)")
    figures, tables = [], []
    if pairs:
        used = runs_used(runs, pairs)
        figures.append(figure(used, pairs, out))
        tables.append(table(used, pairs))
    if dynamic:
        used = runs_used(runs, dynamic)
        figures.append(dynamic_figure(used, dynamic, out))
        tables.append(dynamic_table(used, dynamic))
    return Section(TITLE, figures=figures, tables=tables)
