"""Scaling: throughput vs rank count against ideal (linear) scaling, and the
parallel efficiency = throughput / ideal, per suite and series.

Throughput is total work per second, so ideal scaling is linear in both the
strong (fixed problem) and the weak (problem grows with ranks) sense. At each
rank count the best parallel configuration is drawn."""
from ..load import metric, parallel_text
from .common import (MARKERS, Section, Table, fixed_text, fmt, one_slice, power_of_two_axis, run_style, runs_used,
                     series_label, subplots, systems_caption)

TITLE = "Scaling"
# suite -> (metric, unit of the total, multiply by ranks: the metric is per rank)
THROUGHPUT = {
    "step": ("tokens_per_s", "tokens/s", False),
    "moe": ("tokens_per_s", "tokens/s", False),
    "attention": ("tflops_per_rank", "TFLOP/s", True),
    "tp_sp": ("tflops_per_rank", "TFLOP/s", True),
}


def throughput(case):
    name, _, per_rank = THROUGHPUT[case["suite"]]
    v = metric(case, name)
    return None if v is None else v * (case["ranks"] if per_rank else 1)


def series_of(runs, suite, fixed):
    """{(run index, label): (run, {ranks: (throughput, case)})} with >= 2
    rank counts: one line per case, the other params fixed (into `fixed`),
    the fastest parallel configuration at each rank count."""
    pairs = [(r, c) for r in runs for c in r.cases
             if c["suite"] == suite and not c.get("fault") and throughput(c) is not None]
    if suite == "step" and any(c["case"] == "sweep" for _, c in pairs):
        pairs = [(r, c) for r, c in pairs if c["case"] == "sweep"]  # the best of every factorisation
    pairs, fixed[suite] = one_slice(pairs, lambda c: c["case"], lambda c: (c["ranks"], parallel_text(c)))
    out = {}
    for run, c in pairs:
        label = "best of all configs (step/sweep)" if (suite, c["case"]) == ("step", "sweep") else c["case"]
        points = out.setdefault((run.index, label), (run, {}))[1]
        best = points.get(c["ranks"])
        if best is None or throughput(c) > best[0]:
            points[c["ranks"]] = (throughput(c), c)
    return {k: v for k, v in out.items() if len(v[1]) >= 2}


def efficiency(points):
    """[(ranks, throughput, ideal, efficiency)] from the smallest rank count."""
    n0 = min(points)
    t0 = points[n0][0]
    return [(n, points[n][0], t0 * n / n0, points[n][0] / (t0 * n / n0) if t0 else None) for n in sorted(points)]


def draw_suite(axes, runs, suite, lines):
    _, unit, per_rank = THROUGHPUT[suite]
    ax_t, ax_e = axes
    for i, ((_, label), (run, points)) in enumerate(sorted(lines.items())):
        rows = efficiency(points)
        style = dict(color=f"C{i % 10}", marker=MARKERS[i % len(MARKERS)], markersize=4)
        ax_t.plot([r[0] for r in rows], [r[1] for r in rows], run_style(runs, run),
                  label=series_label(label, run, runs), **style)
        ax_t.plot([r[0] for r in rows], [r[2] for r in rows], color=style["color"], linewidth=0.8, alpha=0.5,
                  linestyle=(0, (1, 2)))
        effs = [r for r in rows if r[3] is not None]
        ax_e.plot([r[0] for r in effs], [100 * r[3] for r in effs], run_style(runs, run),
                  label=series_label(label, run, runs), **style)
    ranks = [n for _, points in lines.values() for n in points]
    power_of_two_axis(ax_t, ranks, "ranks")
    ax_t.set_yscale("log")
    ax_t.set_ylabel(f"throughput ({unit}{', all ranks' if per_rank else ''})")
    ax_t.set_title(f"{suite}: throughput (dotted: ideal)", fontsize=10)
    ax_e.axhline(100, color="grey", linewidth=0.8, linestyle=":")
    power_of_two_axis(ax_e, ranks, "ranks")
    ax_e.set_ylabel("parallel efficiency (%)")
    ax_e.set_title(f"{suite}: efficiency vs smallest rank count", fontsize=10)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    ax_e.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def table(suite_lines):
    rows = []
    for suite, lines in suite_lines.items():
        unit = THROUGHPUT[suite][1]
        for (_, label), (run, points) in sorted(lines.items()):
            for n, t, ideal, eff in efficiency(points):
                rows.append([run.label, suite, label, str(n), f"{fmt(t)} {unit}", fmt(ideal),
                             "-" if eff is None else f"{100 * eff:.0f}%"])
    return Table("Scaling", ["run", "suite", "series", "ranks", "throughput", "ideal", "efficiency"], rows)


def build(runs, out):
    fixed = {}
    suite_lines = {s: series_of(runs, s, fixed) for s in THROUGHPUT}
    suite_lines = {s: lines for s, lines in suite_lines.items() if lines}
    if not suite_lines:
        return Section.skip(TITLE, "no suite with a throughput metric (tokens_per_s, tflops_per_rank) "
                                   "ran at two or more rank counts")
    pairs = [(run, None) for lines in suite_lines.values() for run, _ in lines.values()]
    runs = runs_used(runs, pairs)
    fig, axes = subplots(len(suite_lines), 2, width=5.4, height=3.6)
    for row, (suite, lines) in enumerate(suite_lines.items()):
        draw_suite(axes[row], runs, suite, lines)
    caption = ("Throughput (total over all ranks; per-rank TFLOP/s multiplied by ranks) vs rank count with "
               "ideal linear scaling from the smallest rank count (dotted), and parallel efficiency = "
               "throughput / ideal. At each rank count the best parallel configuration is drawn. "
               + "".join(f"{suite}: {fixed_text(fixed[suite])}" for suite in suite_lines if fixed[suite])
               + f"{systems_caption(runs_used(runs, pairs))}")
    figure = out.save(fig, "scaling.png", "Scaling: throughput and parallel efficiency", caption)
    return Section(TITLE, figures=[figure], tables=[table(suite_lines)])
