"""Pipeline schedules: bubble fraction measured vs simulated vs closed form
per schedule, and Gantt charts of measured timelines (ranks x time)."""
from matplotlib.patches import Patch

from ..load import cases_of, extra, metric, par, param
from .common import Section, Table, fmt, legend, runs_used, subplots, systems_caption

TITLE = "Pipeline schedules"
SCHEDULE_ORDER = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe-v"]
ACTION_COLOURS = {"F": "#377eb8", "B": "#4daf4a", "I": "#ff7f00", "W": "#984ea3"}
ACTION_NAMES = {"F": "F forward", "B": "B backward", "I": "I input grad", "W": "W weight grad"}


def schedule_key(case):
    s = param(case, "schedule", case["case"])
    return (SCHEDULE_ORDER.index(s) if s in SCHEDULE_ORDER else len(SCHEDULE_ORDER), s)


def config_label(case):
    label = f"{param(case, 'schedule', case['case'])}\np{par(case, 'pp')} m{param(case, 'microbatches', '?')}"
    return label + (f" v{par(case, 'vpp')}" if par(case, "vpp") > 1 else "")


def bubble_figure(runs, pairs, out):
    used = runs_used(runs, pairs)
    fig, axes = subplots(len(used), 1, width=max(6.0, 0.9 * len(pairs) / len(used) + 2), height=3.8)
    bars = [("bubble_measured_mean", "measured (mean over ranks; whisker: max)", "C0"),
            ("bubble_simulated", "simulated (schedule simulator)", "C1"),
            ("bubble_closed_form", "closed form", "C2")]
    for i, run in enumerate(used):
        ax = axes[i][0]
        cases = sorted([c for r, c in pairs if r is run], key=lambda c: (schedule_key(c), par(c, "pp"),
                                                                         param(c, "microbatches", 0)))
        for k, (name, lab, colour) in enumerate(bars):
            xs = [x + (k - 1) * 0.27 for x in range(len(cases))]
            ys = [100 * (metric(c, name) or 0) for c in cases]
            err = None
            if name == "bubble_measured_mean":
                err = [[0] * len(cases), [max(0.0, 100 * (metric(c, "bubble_measured_max") or 0) - y)
                                          for c, y in zip(cases, ys)]]
            ax.bar(xs, ys, 0.27, yerr=err, capsize=2, label=lab, color=colour)
        ax.set_xticks(range(len(cases)), [config_label(c) for c in cases], fontsize=8)
        ax.set_ylabel("bubble (% of step time)")
        ax.set_xlabel("schedule, pipeline ranks p, microbatches m, chunks v")
        if len(used) > 1:
            ax.set_title(run.label, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        legend(ax)
    caption = (f"Bubble fraction per schedule = idle time / step time. Measured: mean (bar) and max (whisker) "
               f"over pipeline ranks; simulated: the schedule simulator's prediction for the same schedule; "
               f"closed form: 1F1B (p-1)/(m+p-1), interleaved divided by v, ZB-H1 about a third of 1F1B, "
               f"zero-bubble schedules ~0. {systems_caption(used)}")
    return out.save(fig, "pipeline_bubble.png", "Pipeline: bubble fraction, measured vs simulated vs closed form",
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
    ax.set_title(f"{param(case, 'schedule', case['case'])}: p{par(case, 'pp')} m{param(case, 'microbatches', '?')}"
                 + (f", measured bubble {100 * bubble:.1f}%" if bubble is not None else ""), fontsize=9)


def gantt_figure(runs, chosen, out):
    fig, axes = subplots(len(chosen), 1, width=9.0, height=0.45 * max(par(c, "pp") for _, c in chosen) + 1.1,
                         sharex=True)
    scale, unit = time_unit(max(span(c) for _, c in chosen))
    for i, (_, c) in enumerate(chosen):
        draw_gantt(axes[i][0], c, scale, unit)
    kinds = {a[1] for _, c in chosen for row in timeline_actions(extra(c, "timeline")) for a in row}
    axes[0][0].legend(handles=[Patch(color=ACTION_COLOURS[k], label=ACTION_NAMES[k]) for k in "FBIW" if k in kinds],
                      loc="upper right", fontsize=7, ncol=4)
    caption = (f"Measured timelines, one row per pipeline rank, bars coloured by action (numbers: microbatch); "
               f"white gaps are bubbles. Shared time axis, so schedules compare directly. "
               f"{systems_caption(runs_used(runs, chosen))}")
    return out.save(fig, "pipeline_gantt.png", "Pipeline: measured timelines", caption)


def table(runs, pairs):
    rows = [[run.label, param(c, "schedule", c["case"]), str(par(c, "pp")), str(par(c, "vpp")),
             str(param(c, "microbatches", "-")), fmt(metric(c, "bubble_measured_mean")),
             fmt(metric(c, "bubble_measured_max")), fmt(metric(c, "bubble_simulated")),
             fmt(metric(c, "bubble_closed_form")), fmt(metric(c, "makespan_s")), fmt(metric(c, "peak_activations"))]
            for run, c in sorted(pairs, key=lambda rc: (rc[0].index, schedule_key(rc[1]), par(rc[1], "pp")))]
    return Table("Pipeline instances (bubble as a fraction of the step)",
                 ["run", "schedule", "p", "v", "m", "measured mean", "measured max", "simulated", "closed form",
                  "step (s)", "peak act. (mb)"], rows)


def build(runs, out):
    pairs = [(r, c) for r, c in cases_of(runs, "pipeline") if not c.get("fault")]
    if not pairs:
        return Section.skip(TITLE, "no pipeline cases in the results")
    timed = [(r, c) for r, c in pairs if metric(c, "bubble_measured_mean") is not None]
    if not timed:
        return Section.skip(TITLE, "pipeline cases carry no timing (run with --iters > 0)")
    runs = runs_used(runs, timed)
    section = Section(TITLE, figures=[bubble_figure(runs, timed, out)], tables=[table(runs, timed)])
    chosen = gantt_cases(timed)
    if chosen:
        section.figures.append(gantt_figure(runs, chosen, out))
    else:
        section.notes.append("No case recorded a timeline, so there is no Gantt chart.")
    return section
