"""What every figure module shares: the Section / Figure / Table records a
module returns, the headless matplotlib setup, and small formatting helpers.

A figure module exposes `build(runs, out) -> Section`. It returns
Section.skip(...) when its suite is absent, never raises for missing data."""
import json
import os
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # headless: no display, no GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402

# Run i is drawn with LINESTYLES[i]; series within a run get colours.
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
STATUS_COLOURS = {"pass": "#4daf4a", "near": "#ff9f1c", "fail": "#e41a1c", "error": "#7b1fa2",
                  "caught": "#9ecae1", "skip": "#bdbdbd", "absent": "#ffffff"}


@dataclass
class Figure:
    file: str     # PNG name inside the output folder
    title: str
    caption: str


@dataclass
class Link:
    """A table cell that links to a file: the page writes an <a>, the markdown [text](href)."""
    text: str
    href: str  # relative to the report folder

    def __str__(self):
        return self.text


@dataclass
class Cell:
    """A table cell with a background colour and a hover text (the page's
    title attribute); the markdown shows its text."""
    text: str
    colour: str
    title: str = ""

    def __str__(self):
        return self.text


@dataclass
class Table:
    title: str
    columns: list
    rows: list    # lists of cell strings (or Links), same length as columns


@dataclass
class Section:
    title: str
    figures: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # one-line remarks shown under the title
    skipped: str = ""                          # set when the section has nothing to show

    @staticmethod
    def skip(title, reason):
        return Section(title=title, skipped=reason)


class FigureWriter:
    """Saves matplotlib figures into the report folder and records them."""

    def __init__(self, out_dir, dpi=110):
        self.out_dir = out_dir
        self.dpi = dpi
        os.makedirs(out_dir, exist_ok=True)

    def save(self, fig, name, title, caption):
        fig.suptitle(title, fontsize=12, fontweight="bold")
        fig.savefig(os.path.join(self.out_dir, name), dpi=self.dpi, bbox_inches="tight")
        plt.close(fig)
        return Figure(file=name, title=title, caption=caption)


def subplots(nrows, ncols, width=5.0, height=3.6, **kw):
    """A grid of axes (always 2-D) sized per panel, laid out without overlaps."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained", **kw)
    return fig, axes


def power_of_two_axis(ax, values, label):
    """A log2 x axis ticked at the values themselves (1, 2, 4, 8), not 2^k."""
    ticks = sorted(set(values))
    ax.set_xscale("log", base=2)
    if ticks:
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    ax.set_xlabel(label)


def systems_caption(runs):
    """'System: ...' for a caption: one clause per run that contributed."""
    if len(runs) == 1:
        return f"System: {runs[0].describe()}."
    return "Systems: " + "; ".join(f"[{r.label}] {r.describe()}" for r in runs) + "."


def runs_used(runs, pairs):
    """The runs that appear in (run, case) pairs, in run order."""
    used = {id(r) for r, _ in pairs}
    return [r for r in runs if id(r) in used]


def position(runs, run):
    return next(i for i, r in enumerate(runs) if r is run)


def run_style(runs, run):
    """Line style of a run among the runs drawn in one figure."""
    return LINESTYLES[position(runs, run) % len(LINESTYLES)]


def series_label(base, run, runs):
    """The legend names the run only when the figure draws several."""
    return f"{base} [{run.label}]" if len(runs) > 1 else base


def fmt(x, digits=3):
    """Compact number for tables: 1.23e-05, 0.0123, 12.3, 1.23e+04; '-' for None."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e4 or a < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def fmt_bytes(n):
    """1024 -> '1K', 4194304 -> '4M' (binary, as sextant's --min-bytes takes them)."""
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.3g}K"


def as_percent(value, unit):
    """A fraction (unit '1' or '') or a percentage (unit '%') as a percentage."""
    if value is None:
        return None
    return value if unit == "%" else 100.0 * value


def legend(ax, **kw):
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, **kw)


def one_slice(pairs, line_of, x_of, exclude=()):
    """(run, case) pairs reduced to one slice of the parameter space, so a
    figure draws one point per (run, line, x) instead of a tangle of every
    combination of the other params.

    Params (and dtype) that still take several values at one (run, line, x)
    are fixed one at a time to the value that keeps the most lines, then
    the most points (ties: the most instances, then the largest value). Returns (kept pairs,
    {param: fixed value}); the fixed values belong in the caption (see
    fixed_text), and the tables keep every instance."""
    def point(rc):
        return (rc[0].index, line_of(rc[1]), x_of(rc[1]))

    def value(c, k):
        return json.dumps(c.get("dtype") if k == "dtype" else c.get("params", {}).get(k), sort_keys=True)

    fixed = {}
    while True:
        values = {}
        for rc in pairs:
            for k in list(rc[1].get("params", {})) + ["dtype"]:
                if k not in exclude:
                    values.setdefault((k, point(rc)), set()).add(value(rc[1], k))
        keys = sorted({k for (k, _), vals in values.items() if len(vals) > 1})
        if not keys:
            return pairs, fixed
        options = {}
        for rc in pairs:
            options.setdefault(value(rc[1], keys[0]), []).append(rc)
        text, pairs = max(options.items(), key=lambda kv: (len({point(rc)[:2] for rc in kv[1]}),
                                                           len({point(rc) for rc in kv[1]}), len(kv[1]), kv[0]))
        fixed[keys[0]] = json.loads(text)


def fixed_text(fixed):
    """'Shown at dtype f32, kv_heads=4 (every instance is in the table).' or ''."""
    if not fixed:
        return ""
    parts = [f"{v}" if k == "dtype" else f"{k}={v}" for k, v in fixed.items()]
    return f"Drawn at {', '.join(parts)}; the table lists every instance. "


def figure_legend(fig, axes, ncol=4):
    """One legend for the whole figure, below the panels, with each label once."""
    seen = {}
    for ax in (a for row in axes for a in row):
        for h, l in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(l, h)
    if seen:
        fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center", fontsize=7,
                   ncol=min(ncol, len(seen)), frameon=False)
