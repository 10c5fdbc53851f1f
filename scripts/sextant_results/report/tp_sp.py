"""Tensor and sequence parallelism: TFLOP/s per rank vs tp per block, and the
activation memory per rank that sequence parallelism saves."""
from ..load import cases_of, distinguishing_params, metric, par, param, parallel_text
from .common import (MARKERS, Section, Table, figure_legend, fixed_text, fmt, one_slice, power_of_two_axis,
                     run_style, runs_used, series_label, subplots, systems_caption)

TITLE = "Tensor / sequence parallel blocks"
AXIS_PARAMS = ("block", "sp", "regather")  # drawn as lines
PANELS = [("tflops_per_rank", "TFLOP/s per rank (fwd+bwd)", 1.0),
          ("activation_bytes_per_rank", "activations held per rank (MiB)", 1 / 2**20)]


def base_label(case):
    """'mlp', 'mlp +sp', 'mlp +sp regather' (the block, sequence parallelism, re-gathered activations)."""
    sp = " +sp" + (" regather" if param(case, "regather") else "") if param(case, "sp", False) else ""
    return f"{param(case, 'block', case['case'])}{sp}"


def label(case, extra_keys=()):
    extras = [case["dtype"] if k == "dtype" else f"{k}={param(case, k)}" for k in extra_keys]
    return " ".join([base_label(case)] + extras)


def figure(runs, pairs, out):
    pairs, fixed = one_slice(pairs, base_label, lambda c: par(c, "tp"), exclude=AXIS_PARAMS)
    keys = distinguishing_params([c for _, c in pairs], lambda c: (base_label(c), par(c, "tp")), exclude=AXIS_PARAMS)
    labels = sorted({label(c, keys) for _, c in pairs})
    fig, axes = subplots(1, len(PANELS), width=5.2, height=3.6)
    for col, (name, ylabel, scale) in enumerate(PANELS):
        ax = axes[0][col]
        lines = {}
        for run, c in pairs:
            if metric(c, name) is not None:  # several configs at one tp (dp > 1): the best
                pts = lines.setdefault((run.index, label(c, keys)), (run, {}))[1]
                v = metric(c, name) * scale
                pts[par(c, "tp")] = v if name != "tflops_per_rank" else max(v, pts.get(par(c, "tp"), v))
        for (_, lab), (run, pts) in sorted(lines.items()):
            i = labels.index(lab)
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], run_style(runs, run), color=f"C{i % 10}",
                    marker=MARKERS[i % len(MARKERS)], markersize=4, label=series_label(lab, run, runs))
        power_of_two_axis(ax, [par(c, "tp") for _, c in pairs], "tp (tensor-parallel ranks)")
        ax.set_ylabel(ylabel)
        ax.set_title(ylabel.split(" (")[0].replace(" per rank", ""), fontsize=10)
        ax.grid(True, alpha=0.3)
    figure_legend(fig, axes, ncol=3)
    caption = (f"Column/row-parallel blocks with and without sequence parallelism (+sp): throughput per rank and "
               f"the activation bytes each rank holds between forward and backward (regather: sp that re-gathers the "
               f"sequence for backward instead of keeping it). {fixed_text(fixed)}"
               f"{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "tp_sp.png", "TP/SP blocks: throughput and activation memory vs tp", caption)


def table(runs, pairs):
    rows = [[run.label, param(c, "block", c["case"]), fmt(bool(param(c, "sp", False))),
             fmt(param(c, "regather")) if param(c, "sp", False) else "-", parallel_text(c),
             c["dtype"], fmt(metric(c, "tflops_per_rank")), fmt(metric(c, "activation_bytes_per_rank")),
             fmt(metric(c, "layernorm_activation_bytes_per_rank"))]
            for run, c in sorted(pairs, key=lambda rc: (rc[0].index, label(rc[1]), par(rc[1], "tp")))]
    return Table("TP/SP instances", ["run", "block", "sp", "regather", "parallel", "dtype", "TFLOP/s/rank",
                                     "activation B/rank", "layernorm act. B/rank"], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "tp_sp") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no tp_sp cases in the results")
    if not any(metric(c, "tflops_per_rank") is not None for _, c in pairs):
        return Section.skip(TITLE, "tp_sp cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, pairs)
    return Section(TITLE, figures=[figure(runs, pairs, out)], tables=[table(runs, pairs)])
