"""Collectives: bus bandwidth vs message size per operation (a line per
group size), and the peak bus bandwidth per group size (nccl-tests style)."""
from matplotlib.ticker import FuncFormatter

from ..load import cases_of, metric, param
from .common import (MARKERS, Section, Table, figure_legend, fmt, fmt_bytes, run_style, runs_used, series_label,
                     subplots, systems_caption)

TITLE = "Collectives"
OP_ORDER = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_v", "sendrecv", "broadcast",
            "sp_identity"]


def group_label(case):
    """'n=4' for the whole group; 'n=2 (tp groups of 4 ranks)' for --group runs."""
    n = param(case, "group_size", case["ranks"])
    group = param(case, "group", "world")
    return f"n={n}" if group == "world" else f"n={n} ({group} groups of {case['ranks']} ranks)"


def drawable(pairs):
    """Out-of-place instances (in-place only where an op has nothing else)
    whose busbw means something: groups of two or more ranks (a one-rank
    group uses no bus: its "busbw" is a local copy, or a no-op for MPI's
    in-place broadcast) with a positive factor."""
    out_of_place_ops = {c["case"] for _, c in pairs if not param(c, "in_place", False)}
    keep = []
    for run, c in pairs:
        if param(c, "in_place", False) and c["case"] in out_of_place_ops:
            continue
        if param(c, "group_size", c["ranks"]) < 2 or metric(c, "busbw_GBps") is None or not metric(c, "busbw_factor"):
            continue
        keep.append((run, c))
    return keep


def ops_of(pairs):
    ops = {c["case"] for _, c in pairs}
    return [o for o in OP_ORDER if o in ops] + sorted(ops - set(OP_ORDER))


def curves(pairs, op, dtype):
    """{(run, group label): sorted [(bytes, busbw)]}."""
    out = {}
    for run, c in pairs:
        if c["case"] == op and c["dtype"] == dtype:
            out.setdefault((run.index, group_label(c)), (run, []))[1].append(
                (param(c, "bytes"), metric(c, "busbw_GBps")))
    return {k: (run, sorted(points)) for k, (run, points) in out.items()}


def busbw_figure(runs, pairs, dtype, out):
    ops = ops_of(pairs)
    ncols = min(4, len(ops))
    nrows = (len(ops) + ncols - 1) // ncols
    fig, axes = subplots(nrows, ncols, width=4.2, height=3.2)
    labels = sorted({group_label(c) for _, c in pairs}, key=lambda s: (len(s), s))
    for k, op in enumerate(ops):
        ax = axes[k // ncols][k % ncols]
        for (_, glabel), (run, points) in sorted(curves(pairs, op, dtype).items(), key=lambda kv: kv[0]):
            i = labels.index(glabel)
            ax.plot([p[0] for p in points], [p[1] for p in points], run_style(runs, run),
                    marker=MARKERS[i % len(MARKERS)], color=f"C{i}", markersize=3,
                    label=series_label(glabel, run, runs))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(int(x)) if x >= 1 else ""))
        ax.set_title(op + (" (rs + ag)" if op == "sp_identity" else ""), fontsize=10)
        ax.set_xlabel("message size per rank (bytes)")
        ax.set_ylabel("busbw (GB/s, log scale)")
        ax.grid(True, alpha=0.3)
    figure_legend(fig, axes, ncol=6)  # the same series in every panel: one legend, below, hiding nothing
    for k in range(len(ops), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    caption = (f"Bus bandwidth vs message size, {dtype}, out of place, one line per group size n (nccl-tests "
               f"convention: busbw = algbw x factor, 2(n-1)/n for all_reduce, (n-1)/n for gather/scatter/"
               f"all-to-all, 1 for send/recv and broadcast; GB/s = 1e9 B/s). One-rank groups (no bus "
               f"involved) are not drawn. {systems_caption(runs_used(runs, pairs))}")
    return out.save(fig, f"collectives_busbw_{dtype}.png", f"Collectives: busbw vs message size ({dtype})", caption)


def peaks(pairs):
    """{(run index, dtype, op, group label): (peak busbw, bytes at peak)}."""
    best = {}
    for run, c in pairs:
        k = (run.index, c["dtype"], c["case"], group_label(c))
        v = metric(c, "busbw_GBps")
        if k not in best or v > best[k][0]:
            best[k] = (v, param(c, "bytes"))
    return best


def peak_figure(runs, pairs, dtypes, out):
    best = peaks(pairs)
    used = runs_used(runs, pairs)
    fig, axes = subplots(len(used), len(dtypes), width=5.5, height=3.4)
    ops = ops_of(pairs)
    for i, run in enumerate(used):
        for j, dtype in enumerate(dtypes):
            ax = axes[i][j]
            groups = sorted({k[3] for k in best if k[0] == run.index and k[1] == dtype}, key=lambda s: (len(s), s))
            width = 0.8 / max(1, len(ops))
            for o, op in enumerate(ops):
                ys = [best.get((run.index, dtype, op, g), (0, 0))[0] for g in groups]
                ax.bar([x + o * width for x in range(len(groups))], ys, width, label=op, color=f"C{o}")
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))], groups, fontsize=8)
            ax.set_xlabel("group size")
            ax.set_yscale("log")
            ax.set_ylabel("peak busbw (GB/s, log scale)")
            ax.set_title(f"{dtype}" + (f" [{run.label}]" if len(used) > 1 else ""), fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
    figure_legend(fig, axes, ncol=len(ops))  # below the panels: a legend inside would hide bars
    caption = (f"Peak bus bandwidth over message sizes for each operation and group size (out of place). "
               f"{systems_caption(used)}")
    return out.save(fig, "collectives_peak_busbw.png", "Collectives: peak busbw per group size", caption)


def peak_table(runs, pairs):
    best = peaks(pairs)
    label = {r.index: r.label for r, _ in pairs}
    rows = [[label[k[0]], k[1], k[2], k[3], fmt(v), fmt_bytes(b)]
            for k, (v, b) in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], len(kv[0][3]),
                                                                    kv[0][3]))]
    return Table("Peak busbw", ["run", "dtype", "op", "group", "busbw (GB/s)", "at size"], rows)


def build(runs, out):
    pairs = cases_of(runs, "collectives")
    if not pairs:
        return Section.skip(TITLE, "no collectives cases in the results")
    pairs = drawable(pairs)
    if not pairs:
        return Section.skip(TITLE, "collectives ran without timing or only on one rank: no bus bandwidth to show")
    runs = runs_used(runs, pairs)
    dtypes = sorted({c["dtype"] for _, c in pairs}, key=["f64", "f32", "bf16", "f16"].index)
    section = Section(TITLE)
    section.figures += [busbw_figure(runs, pairs, d, out) for d in dtypes]
    section.figures.append(peak_figure(runs, pairs, dtypes, out))
    section.tables.append(peak_table(runs, pairs))
    return section
