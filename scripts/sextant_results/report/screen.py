"""The screen: which rank, link or node is slow or wrong. The link matrix as
a heatmap with suspect links boxed; TFLOP/s per rank against the class
median with suspect ranks in red; each rank's median time of the primary
region (per_rank) for the screen cases and the case with the worst
straggler, stragglers in red; the suspects and stragglers as tables.

Ranks are the ranks of the case's group, labelled with their host where
the results say it (the link matrix's hosts, else system.topology when the
group is the whole world)."""
import math

import matplotlib
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ..load import STRAGGLER_LIMIT, cases_of, extra, max_straggler, per_rank, primary_region, suspect_where, suspects
from .common import Section, Table, fmt, runs_used, subplots, systems_caption

TITLE = "Screen: suspect ranks, links and nodes"
MAX_PANELS = 6         # per figure: a report over many runs stays readable
MAX_TABLE_ROWS = 100
HOST_LABELS_UP_TO = 16  # ranks; beyond, ticks show rank numbers only
SUSPECT = "#e41a1c"
NORMAL = "#377eb8"
RANK_KINDS = ("slow_rank", "sdc")


def rank_hosts(run, case):
    """The host of each rank of the case's group, or None where the results do not say."""
    n = case["ranks"]
    matrix = extra(case, "link_matrix")
    if isinstance(matrix, dict) and len(matrix.get("hosts", [])) == n:
        return matrix["hosts"]
    topology = run.system.get("topology")
    if topology and n == run.system.get("world_size") and len(topology["node_of_rank"]) == n:
        hosts = [node["host"] for node in topology["nodes"]]
        return [hosts[i] if i < len(hosts) else "?" for i in topology["node_of_rank"]]
    return None


def rank_ticks(ax, n, hosts, axis="x"):
    """Ticks at every rank (every k-th past 32), with its host below where known and few enough."""
    step = max(1, math.ceil(n / 32))
    ticks = list(range(0, n, step))
    with_host = hosts and n <= HOST_LABELS_UP_TO
    labels = [f"{r}\n{hosts[r]}" if with_host else str(r) for r in ticks]
    if axis == "x":
        ax.set_xticks(ticks, labels, fontsize=7)
    else:
        ax.set_yticks(ticks, [label.replace("\n", " ") for label in labels], fontsize=7)


def node_boundaries(ax, hosts):
    """Thin lines between ranks of different hosts: the node blocks of a matrix."""
    for r in range(1, len(hosts or [])):
        if hosts[r] != hosts[r - 1]:
            ax.axhline(r - 0.5, color="white", linewidth=1.5)
            ax.axvline(r - 0.5, color="white", linewidth=1.5)


def panel_title(run, case, runs, extra_text=""):
    fault = f" fault={case['fault']}" if case.get("fault") else ""
    where = f" [{run.label}]" if len(runs) > 1 else ""
    return f"{case['suite']}/{case['case']} {case['dtype']}{extra_text}{fault}{where}"


def grid(count, width, height):
    ncols = min(2, count)
    nrows = math.ceil(count / ncols)
    fig, axes = subplots(nrows, ncols, width=width, height=height)
    for k in range(count, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    return fig, [axes[k // ncols][k % ncols] for k in range(count)]


def shown_text(pairs, drawn):
    """The caption's word on instances left out of a figure (the tables still list their suspects)."""
    if drawn == len(pairs):
        return ""
    return f"The first {drawn} of {len(pairs)} instances are drawn; the tables cover every one. "


# ---- (a) the link matrix ------------------------------------------------------

def link_pairs(runs):
    out = []
    for run, c in cases_of(runs, "screen"):
        m = extra(c, "link_matrix")
        rows = m.get("bandwidth_GBps", []) if isinstance(m, dict) else []
        if len(rows) == c["ranks"] and all(len(row) == c["ranks"] for row in rows):  # validate.py checks this
            out.append((run, c))
    return out


def links_figure(runs, pairs, out):
    drawn = pairs[:MAX_PANELS]
    fig, axes = grid(len(drawn), width=5.6, height=4.8)
    for ax, (run, c) in zip(axes, drawn):
        matrix = extra(c, "link_matrix")
        n = c["ranks"]
        values = np.array([[np.nan if v is None else float(v) for v in row] for row in matrix["bandwidth_GBps"]])
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#dddddd")  # the diagonal and unmeasured pairs
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, interpolation="nearest")
        fig.colorbar(image, ax=ax, shrink=0.8, label="p2p bandwidth (GB/s)")
        if n <= 12:
            for s in range(n):
                for r in range(n):
                    if not math.isnan(values[s][r]):  # dark text on the bright end of the colour map
                        bright = image.norm(values[s][r]) > 0.6
                        ax.text(r, s, f"{values[s][r]:.2g}", ha="center", va="center", fontsize=6,
                                color="black" if bright else "white")
        for suspect in suspects(c):
            if suspect.get("kind") == "slow_link" and len(suspect.get("ranks", [])) == 2:
                a, b = suspect["ranks"]
                for row, col in ((a, b), (b, a)):  # the link carries both directions
                    ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor=SUSPECT, linewidth=2.5))
        hosts = rank_hosts(run, c)
        node_boundaries(ax, hosts)
        rank_ticks(ax, n, hosts, "x")
        rank_ticks(ax, n, hosts, "y")
        ax.set_xlabel("receiver rank")
        ax.set_ylabel("sender rank")
        ax.set_title(panel_title(run, c, runs, f" ({fmt_size(matrix.get('bytes'))} messages)"), fontsize=9)
    caption = (f"Point-to-point bandwidth of every pair of ranks (row sends, column receives), measured in a "
               f"round-robin tournament of disjoint pairs; white lines separate nodes, grey cells were not measured. "
               f"Red boxes: links the screen names slow (a slow_link suspect; both directions are boxed). "
               f"{shown_text(pairs, len(drawn))}{systems_caption(runs_used(runs, drawn))}")
    return out.save(fig, "screen_links.png", "Screen: link bandwidth matrix", caption)


def fmt_size(n):
    if not isinstance(n, int):
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


# ---- (b) TFLOP/s per rank -------------------------------------------------------

def compute_pairs(runs):
    out = []
    for run, c in cases_of(runs, "screen"):
        values = extra(c, "tflops_per_rank")
        if isinstance(values, list) and len(values) == c["ranks"] and any(v is not None for v in values):
            out.append((run, c))
    return out


def class_median(case, values):
    """The median the screen judged TFLOP/s against (a tflops suspect says it), else the ranks' median."""
    named = [s["class_median"] for s in suspects(case) if s.get("figure") == "tflops" and s.get("class_median")]
    measured = [v for v in values if v is not None]
    return named[0] if named else float(np.median(measured))


def compute_figure(runs, pairs, out):
    drawn = pairs[:MAX_PANELS]
    fig, axes = grid(len(drawn), width=5.6, height=3.6)
    for ax, (run, c) in zip(axes, drawn):
        values = extra(c, "tflops_per_rank")
        named = {s["rank"]: s["kind"] for s in suspects(c) if s.get("kind") in RANK_KINDS and "rank" in s}
        heights = [0.0 if v is None else v for v in values]
        ax.bar(range(len(values)), heights, color=[SUSPECT if r in named else NORMAL for r in range(len(values))])
        for r, kind in named.items():
            if r < len(values):
                ax.text(r, heights[r], "SDC" if kind == "sdc" else "slow", ha="center", va="bottom", fontsize=7,
                        color=SUSPECT, fontweight="bold")
        ax.axhline(class_median(c, values), color="black", linestyle="--", linewidth=1)
        rank_ticks(ax, len(values), rank_hosts(run, c))
        ax.set_xlabel("rank")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(panel_title(run, c, runs), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend([Patch(color=NORMAL), Patch(color=SUSPECT), Line2D([], [], color="black", linestyle="--")],
               ["rank", "suspect rank (slow, or SDC: its output differs)", "class median"],
               loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    caption = (f"The same gemm on the same inputs on every rank: TFLOP/s per rank against the median of its class. "
               f"Red: ranks the screen names (slow_rank: too far below the median; sdc: its output hash differs "
               f"from the majority's, whatever its speed). {shown_text(pairs, len(drawn))}"
               f"{systems_caption(runs_used(runs, drawn))}")
    return out.save(fig, "screen_compute.png", "Screen: TFLOP/s per rank", caption)


# ---- (c) each rank's median time ---------------------------------------------

def timed_pairs(runs):
    """(run, case) with per-rank timings of the primary region on more than one rank (and as many
    entries as ranks: the schema does not check the lengths, validate.py does)."""
    return [(r, c) for r in runs for c in r.cases
            if c["ranks"] > 1 and per_rank(c) and all(len(v) == c["ranks"] for v in per_rank(c).values())]


def rank_time_choice(pairs):
    """The screen instances and the other instance with the worst straggler: at most MAX_PANELS, worst first."""
    screen = [rc for rc in pairs if rc[1]["suite"] == "screen"]
    others = [rc for rc in pairs if rc[1]["suite"] != "screen"]
    chosen = screen + ([max(others, key=lambda rc: max_straggler(rc[1])[0])] if others else [])
    return sorted(chosen, key=lambda rc: -max_straggler(rc[1])[0])[:MAX_PANELS]


def time_scale(seconds):
    top = max(seconds) if seconds else 0
    return (1.0, "s") if top >= 1 else (1e3, "ms") if top >= 1e-3 else (1e6, "us")


def rank_times_figure(runs, pairs, chosen, out):
    fig, axes = grid(len(chosen), width=5.6, height=3.6)
    for ax, (run, c) in zip(axes, chosen):
        region, _ = primary_region(c)
        ranks = per_rank(c)
        scale, unit = time_scale(ranks["p90"] + ranks["median"])
        medians = [m * scale for m in ranks["median"]]
        below = [max(0.0, m - p * scale) for m, p in zip(medians, ranks["p10"])]
        above = [max(0.0, p * scale - m) for m, p in zip(medians, ranks["p90"])]
        scores = ranks["straggler_score"]
        ax.bar(range(len(medians)), medians, yerr=[below, above], capsize=2, error_kw={"linewidth": 0.8},
               color=[SUSPECT if s > STRAGGLER_LIMIT else NORMAL for s in scores])
        ax.axhline(float(np.median(medians)), color="black", linestyle="--", linewidth=1)
        rank_ticks(ax, len(medians), rank_hosts(run, c))
        ax.set_xlabel("rank")
        ax.set_ylabel(f"median time ({unit})")
        ax.set_title(panel_title(run, c, runs, f" {region}"), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend([Patch(color=NORMAL), Patch(color=SUSPECT), Line2D([], [], color="black", linestyle="--")],
               ["rank", f"straggler (straggler_score > {STRAGGLER_LIMIT:g})", "median rank"],
               loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    others = len(pairs) - len(chosen)
    caption = (f"Each rank's own median time of the case's primary region over the timed iterations (whiskers: its "
               f"p10 to p90), drawn for the screen instances and the other instance with the largest straggler_score "
               f"(a rank's median over the median rank's). Red: ranks above {STRAGGLER_LIMIT:g}. "
               + (f"{others} more instances with per-rank timings are in the stragglers table where they have a "
                  f"straggler. " if others else "") + systems_caption(runs_used(runs, chosen)))
    return out.save(fig, "screen_rank_times.png", "Per-rank median time and stragglers", caption)


# ---- tables ---------------------------------------------------------------------

def named_suspects(runs):
    """(run, case id, suspect): the cases' suspects; for a run whose cases name none, its qualification's."""
    out = []
    for run in runs:
        found = [(run, c["id"], s) for c in run.cases for s in suspects(c)]
        if not found:
            found = [(run, s.get("case", "-"), s) for s in (run.doc.get("qualification") or {}).get("suspects", [])]
        out += found
    return out


def suspects_table(found):
    rows = [[run.label, case_id, s["kind"], suspect_where(s), s["figure"], fmt(s.get("value")),
             fmt(s.get("class_median")), s.get("class", "-"), s["rule"]] for run, case_id, s in found]
    return Table("Suspects", ["run", "case", "kind", "where", "figure", "value", "class median", "class", "rule"],
                 rows[:MAX_TABLE_ROWS])


def stragglers_table(runs, pairs):
    rows = []
    for run, c in sorted(pairs, key=lambda rc: -max_straggler(rc[1])[0]):
        score, rank = max_straggler(c)
        if score <= STRAGGLER_LIMIT:
            break
        ranks, hosts = per_rank(c), rank_hosts(run, c)
        rows.append([run.label, c["id"], primary_region(c)[0], str(rank), hosts[rank] if hosts else "-", fmt(score),
                     fmt(ranks["wait_share"][rank]), fmt(ranks["median"][rank]),
                     fmt(float(np.median(ranks["median"])))])
    return Table(f"Stragglers (straggler_score > {STRAGGLER_LIMIT:g})",
                 ["run", "case", "region", "rank", "host", "straggler_score", "wait share", "rank median (s)",
                  "median rank (s)"], rows[:MAX_TABLE_ROWS])


def suspects_note(found):
    if not found:
        return "The screen named no suspect."
    shown = "; ".join(f"{s['kind']} {suspect_where(s)} in {case_id}" for _, case_id, s in found[:5])
    more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
    return f"{len(found)} suspect{'s' if len(found) != 1 else ''}: {shown}{more}."


def build(runs, out):
    screen, timed, found = cases_of(runs, "screen"), timed_pairs(runs), named_suspects(runs)
    if not screen and not timed and not found:
        return Section.skip(TITLE, "no screen cases and no per-rank timings in the results")
    section = Section(TITLE)
    if screen or found:
        section.notes.append(suspects_note(found))
    links, compute = link_pairs(runs), compute_pairs(runs)
    if links:
        section.figures.append(links_figure(runs, links, out))
    if compute:
        section.figures.append(compute_figure(runs, compute, out))
    if timed:
        section.figures.append(rank_times_figure(runs, timed, rank_time_choice(timed), out))
    if found:
        section.tables.append(suspects_table(found))
    stragglers = stragglers_table(runs, timed)
    if stragglers.rows:
        section.tables.append(stragglers)
    if not section.figures and not section.tables:
        return Section.skip(TITLE, "the screen cases carry no figures (run with --iters > 0)")
    return section
