"""Conformance matrix, one per system (device and kind: the runs of one
machine are pooled, e.g. a device check's one file per suite and mode):
rows are cases (suite/case, dtype, planted fault), columns rank counts (and
the backend, where the system's runs used several); a cell is the worst
instance there, coloured by error / bound: pass (<= 0.5), near the bound
(0.5 .. 1], fail, error, skip. A planted fault is meant to fail: caught, it
is light blue; not caught, red."""
import math

from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..load import status
from .common import STATUS_COLOURS, Section, Table, fmt, subplots

TITLE = "Conformance"
NEAR = 0.5  # error / bound above this is "near the bound"
CATEGORIES = ["absent", "skip", "pass", "caught", "near", "fail", "error"]
LEGEND = {"pass": "pass (error/bound <= 0.5)", "near": "near the bound (0.5 < error/bound <= 1)",
          "fail": "fail (or a planted fault not caught)", "error": "could not run", "skip": "not checked",
          "caught": "planted fault caught (expected fail)", "absent": "not run at this rank count"}


def bound_ratio(case):
    """Worst error / bound over the case's tensors (inf for NaN/Inf), 0 for a
    clean exact check, None when nothing numeric was checked."""
    conf = case.get("conformance", {})
    ratios = []
    for t in conf.get("tensors", []):
        err, bound = t.get("error"), t.get("bound") or 0.0
        if err is None or t.get("nonfinite", 0) > 0:
            ratios.append(math.inf)
        else:
            ratios.append(err / bound if bound > 0 else (0.0 if err == 0 else math.inf))
    if conf.get("checked"):
        ratios.append(math.inf if conf.get("wrong", 0) > 0 else 0.0)
    return max(ratios) if ratios else None


def category(case):
    s = status(case)
    if case.get("fault") and s in ("pass", "fail"):
        return "caught" if s == "fail" else "fail"
    if s in ("error", "skip", "fail"):
        return s
    ratio = bound_ratio(case)
    return "near" if ratio is not None and ratio > NEAR else "pass"


def cell_text(case):
    s, conf = category(case), case.get("conformance", {})
    if s == "error":
        return "ERR"
    if s == "skip":
        return "skip"
    if case.get("fault") and s == "fail" and status(case) == "pass":
        return "not caught"
    if conf.get("wrong"):
        return f"{conf['wrong']} wrong"
    ratio = bound_ratio(case)
    if ratio is None:
        return s
    return "NaN/Inf" if math.isinf(ratio) else f"{ratio:.2g}"


def row_key(case):
    fault = case.get("fault")
    name = f"{case['suite']}/{case['case']} {case['dtype']}"
    return name + (f" [fault {fault}]" if fault else "")


def worst(cases):
    """The case that colours a cell: highest category, then highest ratio."""
    def key(c):
        r = bound_ratio(c)
        return (CATEGORIES.index(category(c)), -1 if r is None else r)
    return max(cases, key=key)


def system_groups(runs):
    """[(label, runs)] in first-seen order: runs of one device name and kind together."""
    groups = {}
    for run in runs:
        groups.setdefault((run.device_name(), run.system.get("device_kind", "?")), []).append(run)
    out = []
    for (device, _), members in groups.items():
        out.append((members[0].label if len(members) == 1 else f"{device}, {len(members)} runs", members))
    return out


def column_key(case, backends):
    """Rank count, with the backend when the system's runs used several."""
    return (case["ranks"], case.get("backend", "?") if len(backends) > 1 else "")


def matrix(runs):
    """(row labels, columns, {(row, column): worst case}, instance counts)."""
    backends = {c.get("backend", "?") for r in runs for c in r.cases}
    cells = {}
    for run in runs:
        for c in run.cases:
            cells.setdefault((row_key(c), column_key(c, backends)), []).append(c)
    rows = sorted({k[0] for k in cells})
    columns = sorted({k[1] for k in cells})
    return rows, columns, {k: worst(v) for k, v in cells.items()}, {k: len(v) for k, v in cells.items()}


def describe_group(runs):
    """The system of a group, for the caption."""
    if len(runs) == 1:
        return runs[0].describe()
    first = runs[0]
    worlds = sorted({r.system.get("world_size", 0) for r in runs})
    backends = sorted({r.system.get("backend", "?") for r in runs})
    starts = sorted(str(r.run.get("start", "?")) for r in runs)
    caveat = "" if all(r.timings_representative() for r in runs) else "; some timings not representative"
    return (f"{first.device_name()} ({first.system.get('device_kind', '?')}), {len(runs)} runs: world sizes "
            f"{', '.join(map(str, worlds))}; backend{'s' if len(backends) > 1 else ''} {', '.join(backends)}"
            f"{caveat}; from {starts[0]} to {starts[-1]}")


def draw(index, label, runs, out):
    rows, columns, cells, counts = matrix(runs)
    # Room for the row labels (~0.055 in per character at 7 pt), the cells and the legend below.
    label_width = 0.055 * max(len(r) for r in rows)
    fig, axes = subplots(1, 1, width=max(5.0, label_width + 0.5 + 0.9 * len(columns)), height=2.2 + 0.32 * len(rows))
    ax = axes[0][0]
    grid = [[CATEGORIES.index(category(cells[(r, n)])) if (r, n) in cells else 0 for n in columns] for r in rows]
    ax.imshow(grid, cmap=ListedColormap([STATUS_COLOURS[c] for c in CATEGORIES]), vmin=0,
              vmax=len(CATEGORIES) - 1, aspect="auto")
    for i, r in enumerate(rows):
        for j, n in enumerate(columns):
            if (r, n) in cells:
                ax.text(j, i, cell_text(cells[(r, n)]), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(columns)), [f"{n}\n{b}" if b else str(n) for n, b in columns], fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel("ranks (group size of the instance)" + (", backend" if any(b for _, b in columns) else ""))
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    present = {category(c) for c in cells.values()}
    if len(cells) < len(rows) * len(columns):
        present.add("absent")
    fig.legend(handles=[Patch(facecolor=STATUS_COLOURS[k], edgecolor="grey", label=v) for k, v in LEGEND.items()
                        if k in present], loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    n = sum(counts.values())
    caption = (f"Worst instance per cell over {n} instances (sizes, params and parallel configs pooled"
               f"{', and the ' + str(len(runs)) + ' runs of this system' if len(runs) > 1 else ''}); the "
               f"number is max error/bound over the checked tensors (bound = max(2 x one-rank error, dtype "
               f"floor)), or the wrong-element count of exact checks. Rows marked [fault] plant a fault on "
               f"purpose: light blue when the check caught it, red when it did not. System: {describe_group(runs)}.")
    return out.save(fig, f"conformance_{index}.png", f"Conformance matrix [{label}]", caption)


def problem_table(runs):
    """Every instance that failed, could not run, or sits near its bound."""
    rows = []
    for run in runs:
        for c in run.cases:
            cat = category(c)
            if c.get("fault") and status(c) == "pass":
                rows.append([run.label, c["id"], "planted fault NOT caught", "the check passed with a fault planted"])
                continue
            if cat in ("pass", "skip"):
                continue
            detail = c.get("error") or "; ".join(c.get("conformance", {}).get("failures", [])[:3])
            if cat == "near":
                t = max(c["conformance"]["tensors"], key=lambda t: (t["error"] or 0) / (t["bound"] or 1))
                detail = f"{t['name']}: error {fmt(t['error'])} vs bound {fmt(t['bound'])}"
            verdict = "planted fault caught (expected)" if cat == "caught" else cat
            rows.append([run.label, c["id"], verdict, detail])
    return Table("Failures, errors and near-bound instances", ["run", "case", "verdict", "detail"], rows)


def build(runs, out):
    pairs = [(r, c) for r in runs for c in r.cases]
    if not pairs:
        return Section.skip(TITLE, "no case records in the results")
    section = Section(TITLE)
    for index, (label, members) in enumerate(system_groups([r for r in runs if r.cases])):
        section.figures.append(draw(index, label, members, out))
    table = problem_table(runs)
    if table.rows:
        section.tables.append(table)
    else:
        section.notes.append("No failures, errors or instances near their bound.")
    return section
