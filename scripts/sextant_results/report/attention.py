"""Context-parallel attention: TFLOP/s per rank and load balance vs cp, one
line per variant (and layout), causal and full attention side by side."""
from ..load import cases_of, distinguishing_params, metric, par, param, parallel_text
from .common import (MARKERS, Section, Table, figure_legend, fixed_text, fmt, one_slice, power_of_two_axis,
                     run_style, runs_used, series_label, subplots, systems_caption)

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


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "attention") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no attention cases in the results")
    if not any(metric(c, "tflops_per_rank") is not None for _, c in pairs):
        return Section.skip(TITLE, "attention cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, pairs)
    return Section(TITLE, figures=[figure(runs, pairs, out)], tables=[table(runs, pairs)])
