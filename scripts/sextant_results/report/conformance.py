"""Conformance matrix, one per system (device and kind: the runs of one
machine are pooled, e.g. a device check's one file per suite and mode):
rows are cases (suite/case, dtype, planted fault), columns rank counts (and
the backend, where the system's runs used several); a cell is the worst
instance there and shows its margin: the smaller of the one-device
error's margin to its float64 gate (gate / base_error) and the
distributed error's margin to its bound (bound / error, and the
systematic check's limit / value), over its checked tensors. A cell is
near when that margin, as shown to two digits, is under 2 (a distributed
run exactly as accurate as one device has a margin of 2), pass above it, or fail, error, skip. A
planted fault is meant to fail: caught, it is light blue; not caught, red.
The HTML page repeats the matrix as a table whose cells name, on hover,
the tensor that sets the margin and both its errors."""
import math

from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..load import status
from .common import STATUS_COLOURS, Cell, Section, Table, fmt, subplots

TITLE = "Conformance"
NEAR = 2.0  # a margin under this is "near" its gate or bound
CATEGORIES = ["absent", "skip", "pass", "caught", "near", "fail", "error"]
LEGEND = {"pass": "pass (margin >= 2)", "near": "near a gate or bound (margin < 2)",
          "fail": "fail (or a planted fault not caught)", "error": "could not run", "skip": "not checked",
          "caught": "planted fault caught (expected fail)", "absent": "not run at this rank count"}


def _margin(limit, value):
    """limit / |value|: inf for an exact 0, 0 for NaN/Inf, None when there is no limit."""
    if value is None:
        return 0.0
    if limit is None or limit <= 0:
        return None if value == 0 or limit is None else 0.0
    return math.inf if value == 0 else limit / abs(value)


def tensor_margins(t):
    """(one-device margin, distributed margin) of a checked tensor; None where not recorded."""
    if t.get("nonfinite", 0) > 0:
        return None, 0.0
    base = _margin(t.get("base_bound"), t.get("base_error")) if "base_bound" in t else None
    dist = [_margin(t.get("bound"), t.get("error"))]
    sy = t.get("systematic")
    if sy:
        dist += [_margin(sy.get("scale_limit"), sy.get("scale")), _margin(sy.get("offset_limit"), sy.get("offset"))]
    dist = [m for m in dist if m is not None]
    return base, (min(dist) if dist else None)


def worst_tensor(case):
    """(margin, tensor) of the tensor with the smallest margin; (None, None) when nothing numeric was checked."""
    best = (None, None)
    for t in case.get("conformance", {}).get("tensors", []):
        margins = [m for m in tensor_margins(t) if m is not None]
        if margins and (best[0] is None or min(margins) < best[0]):
            best = (min(margins), t)
    return best


def margin(case):
    """The case's margin: the worst over its tensors of min(gate / base_error,
    bound / error); exact checks count inf, or 0 with a wrong element."""
    conf = case.get("conformance", {})
    m, _ = worst_tensor(case)
    if conf.get("checked"):
        exact = 0.0 if conf.get("wrong", 0) > 0 else math.inf
        m = exact if m is None else min(m, exact)
    return m


def category(case):
    s = status(case)
    if case.get("fault") and s in ("pass", "fail"):
        return "caught" if s == "fail" else "fail"
    if s in ("error", "skip", "fail"):
        return s
    m = margin(case)
    return "near" if m is not None and shown(m) < NEAR else "pass"


def shown(m):
    """A margin as the cell shows it (2 significant digits): the colour follows
    the number, so a distributed run as accurate as one device (margin 2, or
    1.99 from another summation order) is not near."""
    return m if math.isinf(m) or m == 0 else float(f"{m:.2g}")


def margin_text(m):
    if m is None:
        return "-"
    if math.isinf(m):
        return "exact"
    return "NaN/Inf" if m == 0 else (f"{m:.2g}" if m < 1000 else ">1e3")


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
    m = margin(case)
    if m is None:
        return s
    return margin_text(m)


def tensor_detail(t):
    """One line naming a tensor and both of its errors against their limits."""
    if t is None:
        return ""
    base, dist = tensor_margins(t)
    parts = [f"{t['name']}: one-device error {fmt(t.get('base_error'))}"
             + (f" (gate {fmt(t.get('base_bound'))}, margin {margin_text(base)})" if base is not None else ""),
             f"distributed error {fmt(t.get('error'))} (bound {fmt(t.get('bound'))})"]
    sy = t.get("systematic")
    if sy:
        parts.append(f"systematic scale {fmt(sy.get('scale'))} (limit {fmt(sy.get('scale_limit'))}), offset "
                     f"{fmt(sy.get('offset'))} (limit {fmt(sy.get('offset_limit'))})")
    parts.append(f"distributed margin {margin_text(dist)}")
    return "; ".join(parts)


def cell_title(case):
    """The hover text of a cell: the instance, and the tensor that sets its margin."""
    _, t = worst_tensor(case)
    conf = case.get("conformance", {})
    text = case.get("id", row_key(case))
    if t is not None:
        text += "\n" + tensor_detail(t)
    if conf.get("checked"):
        text += f"\nexact check: {conf.get('wrong', 0)} wrong of {conf['checked']}"
    if case.get("error"):
        text += "\nerror: " + case["error"]
    return text


def row_key(case):
    fault = case.get("fault")
    name = f"{case['suite']}/{case['case']} {case['dtype']}"
    return name + (f" [fault {fault}]" if fault else "")


def worst(cases):
    """The case that colours a cell: highest category, then smallest margin."""
    def key(c):
        m = margin(c)
        return (CATEGORIES.index(category(c)), -math.inf if m is None else -m)
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
               f"number is the margin: the smaller of the one-device error's to its float64 gate (gate / error) "
               f"and the distributed error's to its bound (bound = max(2 x one-rank error, floor), and the "
               f"systematic check's limits), over the checked tensors; 'exact' for exact checks that pass, or "
               f"the wrong-element count. Near means a margin under 2. Rows marked [fault] plant a fault on "
               f"purpose: light blue when the check caught it, red when it did not. The page's table of margins "
               f"names the tensor and both errors of each cell on hover. System: {describe_group(runs)}.")
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
                detail = tensor_detail(worst_tensor(c)[1])
            verdict = "planted fault caught (expected)" if cat == "caught" else cat
            rows.append([run.label, c["id"], verdict, detail])
    return Table("Failures, errors and near-bound instances", ["run", "case", "verdict", "detail"], rows)


def margin_table(label, runs):
    """The matrix as a table of coloured cells: margin in the cell, the
    tensor that sets it and both errors on hover."""
    rows, columns, cells, _ = matrix(runs)
    header = ["case"] + [f"{n} {b}".strip() for n, b in columns]
    body = []
    for r in rows:
        line = [r]
        for n in columns:
            c = cells.get((r, n))
            if c is None:
                line.append(Cell("", STATUS_COLOURS["absent"], "not run at this rank count"))
            else:
                line.append(Cell(cell_text(c), STATUS_COLOURS[category(c)], cell_title(c)))
        body.append(line)
    return Table(f"Margins [{label}] (hover a cell: the tensor that sets its margin and both errors)", header, body)


def build(runs, out):
    pairs = [(r, c) for r in runs for c in r.cases]
    if not pairs:
        return Section.skip(TITLE, "no case records in the results")
    section = Section(TITLE)
    for index, (label, members) in enumerate(system_groups([r for r in runs if r.cases])):
        section.figures.append(draw(index, label, members, out))
        section.tables.append(margin_table(label, members))
    table = problem_table(runs)
    if table.rows:
        section.tables.append(table)
    else:
        section.notes.append("No failures, errors or instances near their bound.")
    return section
