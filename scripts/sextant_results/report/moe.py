"""Mixture of experts: dispatch / combine bandwidth vs ep per dispatcher, and
load imbalance for uniform vs skewed routing."""
from ..load import cases_of, distinguishing_params, metric, par, param, parallel_text
from .common import (MARKERS, Section, Table, figure_legend, fixed_text, fmt, one_slice, power_of_two_axis,
                     run_style, runs_used, series_label, subplots, systems_caption)

TITLE = "Mixture of experts"
AXIS_PARAMS = ("dispatcher", "routing")


def base_label(case):
    return f"{param(case, 'dispatcher', case['case'])}, {param(case, 'routing', '?')}"


def point(case):
    return (base_label(case), par(case, "ep"))


def label(case, extra_keys):
    extras = [case["dtype"] if k == "dtype" else f"{k}={param(case, k)}" for k in extra_keys]
    return " ".join([base_label(case)] + extras)


def bandwidth_figure(runs, pairs, out):
    pure = [(r, c) for r, c in pairs if par(c, "ep") == c["ranks"]]
    note = ""
    if pure and len(pure) < len(pairs):  # ep combined with tp/dp: in the table, not in the lines
        pairs = pure
        note = "Drawn: pure expert parallelism (ep = ranks); ep combined with other dimensions is in the table. "
    pairs = [(r, c) for r, c in pairs if par(c, "ep") > 1]  # one rank receives nothing: no bandwidth
    pairs, fixed = one_slice(pairs, base_label, lambda c: par(c, "ep"), exclude=AXIS_PARAMS)
    extra = distinguishing_params([c for _, c in pairs], point, exclude=AXIS_PARAMS)
    labels = sorted({label(c, extra) for _, c in pairs})
    fig, axes = subplots(1, 2, width=5.2, height=3.6)
    for col, (name, title) in enumerate((("dispatch_GBps", "dispatch"), ("combine_GBps", "combine"))):
        ax = axes[0][col]
        lines = {}
        for run, c in pairs:
            if metric(c, name) is not None:
                lines.setdefault((run.index, label(c, extra)), (run, []))[1].append((par(c, "ep"), metric(c, name)))
        for (_, lab), (run, pts) in sorted(lines.items()):
            pts.sort()
            i = labels.index(lab)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], run_style(runs, run), color=f"C{i % 10}",
                    marker=MARKERS[i % len(MARKERS)], markersize=4, label=series_label(lab, run, runs))
        power_of_two_axis(ax, [par(c, "ep") for _, c in pairs], "ep (expert-parallel ranks)")
        ax.set_ylabel(f"{title} bandwidth per rank (GB/s)")
        ax.set_title(f"{title}: received bytes / time", fontsize=10)
        ax.grid(True, alpha=0.3)
    figure_legend(fig, axes)
    caption = (f"Token dispatch and combine logical bandwidth per rank (received bytes / time, GB/s = 1e9 B/s) "
               f"vs expert-parallel size (ep >= 2: one rank sends nothing), per dispatcher and routing. {note}"
               f"{fixed_text(fixed)}{systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, "moe_bandwidth.png", "MoE: dispatch and combine bandwidth vs ep", caption)


def imbalance_figure(runs, pairs, out):
    """Grouped bars: x = ep, bars = routing (x dispatcher), height = max/mean tokens per expert."""
    keys = sorted({(param(c, "routing", "?"), param(c, "dispatcher", c["case"])) for _, c in pairs})
    used = runs_used(runs, pairs)
    fig, axes = subplots(1, len(used), width=6.0, height=3.6)
    for j, run in enumerate(used):
        ax = axes[0][j]
        eps = sorted({par(c, "ep") for r, c in pairs if r is run})
        width = 0.8 / max(1, len(keys))
        for k, (routing, dispatcher) in enumerate(keys):
            ys = []
            for ep in eps:
                vals = [metric(c, "imbalance_expert") for r, c in pairs if r is run and par(c, "ep") == ep
                        and param(c, "routing", "?") == routing and param(c, "dispatcher", c["case"]) == dispatcher]
                vals = [v for v in vals if v is not None]
                ys.append(max(vals) if vals else 0)
            ax.bar([x + k * width for x in range(len(eps))], ys, width, label=f"{routing} ({dispatcher})",
                   color=f"C{k}", hatch="//" if routing != "uniform" else None)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(eps))], [str(e) for e in eps])
        ax.set_xlabel("ep (expert-parallel ranks)")
        ax.set_ylabel("imbalance (max / mean tokens per expert)")
        ax.set_title("routing imbalance" + (f" [{run.label}]" if len(used) > 1 else ""), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    figure_legend(fig, axes)  # below the panels: a legend inside would hide bars
    caption = (f"Load imbalance across experts (max / mean tokens per expert; 1 is perfectly even) for uniform "
               f"vs skewed routing. {systems_caption(used)}")
    return out.save(fig, "moe_imbalance.png", "MoE: load imbalance, uniform vs skewed routing", caption)


def table(runs, pairs):
    rows = [[run.label, param(c, "dispatcher", c["case"]), param(c, "routing", "-"), parallel_text(c),
             c["dtype"], fmt(metric(c, "dispatch_GBps")), fmt(metric(c, "combine_GBps")),
             fmt(metric(c, "imbalance_expert")), fmt(metric(c, "dropped_tokens")), fmt(metric(c, "tokens_per_s"))]
            for run, c in sorted(pairs, key=lambda rc: (rc[0].index, base_label(rc[1]), par(rc[1], "ep")))]
    return Table("MoE instances", ["run", "dispatcher", "routing", "parallel", "dtype", "dispatch GB/s", "combine GB/s",
                                   "imbalance", "dropped", "tokens/s"], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "moe") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no moe cases in the results")
    if not any(metric(c, "dispatch_GBps") is not None for _, c in pairs):
        return Section.skip(TITLE, "moe cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, pairs)
    figures = [bandwidth_figure(runs, pairs, out)]
    if any(metric(c, "imbalance_expert") is not None for _, c in pairs):
        figures.append(imbalance_figure(runs, pairs, out))
    return Section(TITLE, figures=figures, tables=[table(runs, pairs)])
