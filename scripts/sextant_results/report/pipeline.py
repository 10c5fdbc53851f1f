"""Pipeline schedules: bubble fraction measured vs simulated vs closed form
per schedule, and Gantt charts of measured timelines (ranks x time)."""
import os

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..load import cases_of, extra, metric, par, param, parallel_text
from .common import (MARKERS, Link, Section, Table, figure_legend, fmt, power_of_two_axis, runs_used, series_label,
                     subplots, systems_caption)

TITLE = "Pipeline schedules"
SCHEDULE_ORDER = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe-v"]
ACTION_COLOURS = {"F": "#377eb8", "B": "#4daf4a", "I": "#ff7f00", "W": "#984ea3"}
ACTION_NAMES = {"F": "F forward", "B": "B backward", "I": "I input grad", "W": "W weight grad"}


def schedule_key(case):
    s = param(case, "schedule", case["case"])
    return (SCHEDULE_ORDER.index(s) if s in SCHEDULE_ORDER else len(SCHEDULE_ORDER), s)


def pipeline_config(run, case, runs):
    """'4r pp2 tp2' (+ the run when several): the colour of a line."""
    label = f"{case['ranks']}r {parallel_text(case)}"
    return label + (f" [{run.label}]" if len(runs) > 1 else "")


SOURCES = [("bubble_measured_mean", "measured (mean over ranks)", "-", "o"),
           ("bubble_simulated", "simulated (schedule simulator)", "--", "x"),
           ("bubble_closed_form", "closed form", ":", None)]


def bubble_figure(runs, pairs, out):
    """One panel per schedule: bubble vs microbatches, one colour per
    pipeline config, line style = measured / simulated / closed form."""
    pure = [(r, c) for r, c in pairs if all(par(c, d) == 1 for d in ("tp", "cp", "dp", "ep"))]
    note = ""
    if pure and len(pure) < len(pairs):  # pp with tp/dp too: in the scatter figure and the table
        pairs = pure
        note = "Drawn: pure pipeline configs (tp = cp = dp = ep = 1); the others are in the next figure and the table. "
    used = runs_used(runs, pairs)
    schedules = sorted({param(c, "schedule", c["case"]) for _, c in pairs},
                       key=lambda s: schedule_key({"params": {"schedule": s}, "case": s}))
    configs = sorted({pipeline_config(r, c, used) for r, c in pairs},
                     key=lambda l: (int(l.split("r ")[0]), l))
    ncols = min(3, len(schedules))
    nrows = (len(schedules) + ncols - 1) // ncols
    fig, axes = subplots(nrows, ncols, width=4.0, height=3.0, sharey=True)
    for k, schedule in enumerate(schedules):
        ax = axes[k // ncols][k % ncols]
        mine = [(r, c) for r, c in pairs if param(c, "schedule", c["case"]) == schedule]
        lines = {}
        for r, c in mine:
            lines.setdefault((pipeline_config(r, c, used), par(c, "vpp")), []).append(c)
        for (config, vpp), cases in sorted(lines.items()):
            cases.sort(key=lambda c: param(c, "microbatches", 0))
            colour = f"C{configs.index(config) % 10}"
            for name, _, style, marker in SOURCES:
                pts = [(param(c, "microbatches", 0), 100 * metric(c, name)) for c in cases
                       if metric(c, name) is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, marker=marker, markersize=4,
                        color=colour, linewidth=1.6 if style == "-" else 1.0,
                        markerfacecolor="white" if vpp > 1 else colour)
        power_of_two_axis(ax, [param(c, "microbatches", 0) for _, c in mine], "microbatches m")
        ax.set_title(schedule, fontsize=10)
        ax.set_ylabel("bubble (% of step time)")
        ax.grid(True, alpha=0.3)
    for k in range(len(schedules), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    handles = [Line2D([], [], color=f"C{i % 10}", linewidth=3, label=l) for i, l in enumerate(configs)]
    handles += [Line2D([], [], color="black", linestyle=style, marker=marker, label=lab)
                for _, lab, style, marker in SOURCES]
    fig.legend(handles=handles, loc="outside lower center", fontsize=7, ncol=min(4, len(handles)), frameon=False)
    caption = (f"Bubble fraction = idle time / step time, per schedule, vs microbatches m; colour = pipeline "
               f"configuration (ranks, pipeline stages pp and the other parallel sizes). Measured (solid): mean over "
               f"pipeline ranks (the max is in the table); simulated (dashed): the schedule simulator's "
               f"prediction for the same schedule; closed form (dotted): 1F1B (p-1)/(m+p-1), interleaved divided "
               f"by v, ZB-H1 about a third of 1F1B, zero-bubble schedules ~0. {note}{systems_caption(used)}")
    return out.save(fig, "pipeline_bubble.png", "Pipeline: bubble fraction, measured vs simulated vs closed form",
                    caption)


def agreement_figure(runs, pairs, out):
    """Every instance as a point: measured vs simulated bubble, and simulated
    vs closed form, coloured by schedule; on the diagonal they agree."""
    used = runs_used(runs, pairs)
    schedules = sorted({param(c, "schedule", c["case"]) for _, c in pairs},
                       key=lambda s: schedule_key({"params": {"schedule": s}, "case": s}))
    fig, axes = subplots(1, 2, width=4.6, height=4.2)
    panels = [("bubble_simulated", "bubble_measured_mean", "simulated", "measured (mean over ranks)"),
              ("bubble_closed_form", "bubble_simulated", "closed form", "simulated")]
    for ax, (xname, yname, xlabel, ylabel) in zip(axes[0], panels):
        for k, schedule in enumerate(schedules):
            for run in used:
                pts = [(100 * metric(c, xname), 100 * metric(c, yname)) for r, c in pairs
                       if r is run and param(c, "schedule", c["case"]) == schedule
                       and metric(c, xname) is not None and metric(c, yname) is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], MARKERS[used.index(run) % len(MARKERS)],
                            color=f"C{k}", markersize=5, alpha=0.8, linestyle="none",
                            label=series_label(schedule, run, used))
        top = max([1.0] + [v for line in ax.get_lines() for v in list(line.get_xdata()) + list(line.get_ydata())])
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle=":")
        ax.set_xlabel(f"{xlabel} bubble (% of step time)")
        ax.set_ylabel(f"{ylabel} bubble (%)")
        ax.set_title(f"{ylabel.split(' (')[0]} vs {xlabel}", fontsize=10)
        ax.grid(True, alpha=0.3)
    figure_legend(fig, axes, ncol=6)
    caption = (f"Every pipeline instance (all parallel configs, schedules and microbatch counts) as a point: "
               f"measured vs simulated bubble (left) and simulated vs closed form (right); on the dotted diagonal "
               f"they agree. Points above the left diagonal are idle time the simulator does not model (on "
               f"oversubscribed shared cores, mostly waiting for the CPU). Marker per run, colour per schedule. "
               f"{systems_caption(used)}")
    return out.save(fig, "pipeline_agreement.png",
                    "Pipeline: bubble of every instance, measured vs simulated vs closed form",
                    caption)


def timeline_actions(timeline):
    """Per rank, [(stage, type, microbatch, start, end)], from the JSON forms a
    suite may write: a list per rank, a {rank: list} map, or [{rank, actions}]."""
    if isinstance(timeline, dict):
        timeline = [timeline[k] for k in sorted(timeline, key=lambda k: int(k))]
    if all(isinstance(e, dict) and "rank" in e for e in timeline):
        timeline = sorted(timeline, key=lambda e: e["rank"])
    ranks = []
    for entry in timeline:
        actions = entry.get("actions", []) if isinstance(entry, dict) else entry
        row = []
        for a in actions:
            if isinstance(a, dict):
                a = [a.get("stage"), a.get("type"), a.get("microbatch"), a.get("start_s"), a.get("end_s")]
            row.append((a[0], str(a[1]), a[2], float(a[3]), float(a[4])))
        ranks.append(row)
    return ranks


def gantt_cases(pairs):
    """One timeline per schedule at the largest pipeline size that has timelines (first run first)."""
    with_timeline = [(r, c) for r, c in pairs if extra(c, "timeline")]
    if not with_timeline:
        return []
    pp = max(par(c, "pp") for _, c in with_timeline)
    chosen = {}
    for r, c in with_timeline:
        if par(c, "pp") == pp:
            chosen.setdefault(param(c, "schedule", c["case"]), (r, c))
    return sorted(chosen.values(), key=lambda rc: schedule_key(rc[1]))


def time_unit(span_s):
    """(scale, unit) that keeps a span of seconds readable."""
    if span_s >= 10:
        return 1.0, "s"
    return (1e3, "ms") if span_s >= 10e-3 else (1e6, "us")


def span(case):
    ranks = timeline_actions(extra(case, "timeline"))
    starts = [a[3] for row in ranks for a in row]
    ends = [a[4] for row in ranks for a in row]
    return max(ends) - min(starts) if starts else 0.0


def draw_gantt(ax, case, scale, unit):
    ranks = timeline_actions(extra(case, "timeline"))
    t0 = min((a[3] for row in ranks for a in row), default=0.0)
    for r, row in enumerate(ranks):
        for stage, kind, mb, start, end in row:
            width = (end - start) * scale
            ax.barh(r, width, left=(start - t0) * scale, height=0.8, color=ACTION_COLOURS.get(kind, "grey"),
                    edgecolor="white", linewidth=0.5)
            if len(row) <= 48:
                ax.text((start - t0) * scale + width / 2, r, str(mb), ha="center", va="center", fontsize=5,
                        color="white")
    ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in range(len(ranks))], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    bubble = metric(case, "bubble_measured_mean")
    ax.set_title(f"{param(case, 'schedule', case['case'])}: {parallel_text(case)}, m{param(case, 'microbatches', '?')}"
                 + (f", measured bubble {100 * bubble:.1f}%" if bubble is not None else ""), fontsize=9)


def gantt_figure(runs, chosen, out):
    fig, axes = subplots(len(chosen), 1, width=9.0, height=0.45 * max(par(c, "pp") for _, c in chosen) + 1.1,
                         sharex=True)
    scale, unit = time_unit(max(span(c) for _, c in chosen))
    for i, (_, c) in enumerate(chosen):
        draw_gantt(axes[i][0], c, scale, unit)
        if i < len(chosen) - 1:
            axes[i][0].set_xlabel("")  # shared axis: labelled once, at the bottom
    kinds = {a[1] for _, c in chosen for row in timeline_actions(extra(c, "timeline")) for a in row}
    axes[0][0].legend(handles=[Patch(color=ACTION_COLOURS[k], label=ACTION_NAMES[k]) for k in "FBIW" if k in kinds],
                      loc="upper right", fontsize=7, ncol=4)
    caption = (f"Measured timelines, one row per pipeline rank, bars coloured by action (numbers: microbatch); "
               f"white gaps are bubbles. Shared time axis, so schedules compare directly. "
               f"{systems_caption(runs_used(runs, chosen))}")
    return out.save(fig, "pipeline_gantt.png", "Pipeline: measured timelines", caption)


def trace_link(run, case, out_dir):
    """The case's Chrome trace (open in chrome://tracing or Perfetto) as a link
    relative to the report; found where the run wrote it or in traces/ beside
    the results file (a copied results folder). "-" when there is none."""
    recorded = extra(case, "trace_file")
    recorded = recorded.get("value") if isinstance(recorded, dict) else recorded
    if not isinstance(recorded, str) or not recorded:
        return "-"
    for path in (recorded, os.path.join(os.path.dirname(os.path.abspath(run.path)), "traces",
                                        os.path.basename(recorded))):
        if os.path.isfile(path):
            return Link("trace", os.path.relpath(path, out_dir))
    return "-"


def table(runs, pairs, out_dir):
    rows = [[run.label, param(c, "schedule", c["case"]), str(par(c, "pp")), str(par(c, "vpp")),
             str(param(c, "microbatches", "-")), fmt(metric(c, "bubble_measured_mean")),
             fmt(metric(c, "bubble_measured_max")), fmt(metric(c, "bubble_simulated")),
             fmt(metric(c, "bubble_closed_form")), fmt(metric(c, "makespan_s")), fmt(metric(c, "peak_activations")),
             trace_link(run, c, out_dir)]
            for run, c in sorted(pairs, key=lambda rc: (rc[0].index, schedule_key(rc[1]), par(rc[1], "pp")))]
    return Table("Pipeline instances (bubble as a fraction of the step)",
                 ["run", "schedule", "p", "v", "m", "measured mean", "measured max", "simulated", "closed form",
                  "step (s)", "peak act. (mb)", "trace"], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "pipeline") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no pipeline cases in the results")
    timed = [(r, c) for r, c in pairs if metric(c, "bubble_measured_mean") is not None]
    if not timed:
        return Section.skip(TITLE, "pipeline cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, timed)
    section = Section(TITLE, figures=[bubble_figure(runs, timed, out), agreement_figure(runs, timed, out)],
                      tables=[table(runs, timed, out.out_dir)])
    chosen = gantt_cases(timed)
    if chosen:
        section.figures.append(gantt_figure(runs, chosen, out))
    else:
        section.notes.append("No case recorded a timeline, so there is no Gantt chart.")
    return section
