#!/usr/bin/env python3
"""Compare a candidate sextant run with a baseline: the CI gate.

    python3 scripts/compare.py results/baseline.json out/results/sextant-....json
    python3 scripts/compare.py base.json cand.json --threshold 10 --threshold 'time.*=20'
    python3 scripts/compare.py base.json cand.json --only busbw_GBps --only 'tflops*'

Cases match on suite, case, params, parallel config, dtype, ranks and planted
fault. Prints conformance problems, metrics that moved beyond their threshold
(direction-aware: bandwidth, TFLOP/s, MFU, tokens/s higher is better; times
and bubbles lower), and cases found on one side only.

Beside the gate, never deciding it: "stragglers", the matched cases whose
primary region has per-rank timings in both runs and whose slowest rank's
straggler_score (its median time over the median rank's) exceeds 1.5 in the
candidate, with the baseline's largest score beside it (--all lists every
such case); and "suspects", the ranks, links and nodes the candidate's cases
name (the screen suite): case, kind, rank(s) or node, host, the rule broken,
and whether the baseline named it too.

Exit status 1 (gate fails) when a candidate case fails conformance or could
not run, a planted fault is not caught, a check was dropped, a metric
regresses beyond its threshold (default 5%), a metric measured in the baseline
is null in the candidate (not computable: the harness measured NaN or Inf),
or a baseline case is missing from the candidate (unless --allow-missing).
0 otherwise.

Exit status 2, with one line on stderr, on bad usage and on any input that is
not a valid results document: unreadable, not UTF-8, not JSON, holding NaN or
Infinity (Python writes them, JSON has no such numbers: there is nothing to
compare a NaN with, so the gate refuses the file rather than pass or fail on
it), or against results/schema.json (scripts/validate.py says where). The
consistency rules validate.py adds (unique ids, summary counts) are not
required here.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sextant_results.compare import DEFAULT_THRESHOLD_PCT, Thresholds, compare_docs  # noqa: E402
from sextant_results.load import STRAGGLER_LIMIT, ResultsError, Run, suspect_where  # noqa: E402
from sextant_results.schema import load_schema, read_valid_document  # noqa: E402

LIST_LIMIT = 25  # ids listed per one-side group before "... and N more"


class UsageError(Exception):
    pass


def finite_number(text):
    """A finite float (argparse's float takes 'nan')."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_thresholds(specs):
    """['10', 'busbw_GBps=3', 'time.*=20'] -> Thresholds."""
    default, overrides = DEFAULT_THRESHOLD_PCT, {}
    for spec in specs or []:
        name, _, pct = spec.rpartition("=")
        try:
            value = float(pct)
        except ValueError:
            raise UsageError(f"--threshold '{spec}': '{pct}' must be a percentage, e.g. busbw_GBps=3") from None
        if not math.isfinite(value) or value < 0:  # a NaN threshold would pass every change
            raise UsageError(f"--threshold '{spec}': {value} must be a finite number >= 0")
        if name:
            overrides[name] = value
        else:
            default = value
    return Thresholds(default, overrides)


def fmt_value(x):
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    return f"{x:.4g}"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  " + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def change_rows(changes):
    rows = []
    for c in changes:
        pct = c.change_pct
        better = {"higher": "higher is better", "lower": "lower is better"}.get(c.direction, "info")
        rows.append([c.case_id, c.metric, f"{fmt_value(c.base)} {c.unit}", f"{fmt_value(c.cand)} {c.unit}",
                     "-" if pct is None else f"{pct:+.1f}%", f"{c.threshold:g}%" if c.direction != "info" else "-",
                     better])
    return rows


def id_list(ids):
    shown = [f"  {i}" for i in ids[:LIST_LIMIT]]
    return "\n".join(shown + ([f"  ... and {len(ids) - LIST_LIMIT} more"] if len(ids) > LIST_LIMIT else []))


def straggler_rows(stragglers):
    return [[s.case_id, s.region, f"{s.base:.3g} (rank {s.base_rank})", f"{s.cand:.3g} (rank {s.cand_rank})"]
            for s in stragglers]


def suspect_rows(found):
    rows = []
    for f in found:
        s = f.suspect
        value = "" if s.get("value") is None else fmt_value(s["value"])
        if s.get("class_median") is not None:
            value += f" (class median {fmt_value(s['class_median'])})"
        rows.append([f.case_id, s["kind"], suspect_where(s), s["figure"], value.strip() or "-",
                     "no" if f.new else "yes", s["rule"]])
    return rows


def print_findings(result, show_all):
    """Stragglers and suspects: reported, not gated."""
    slow = result.slow_stragglers()
    shown = sorted(result.stragglers, key=lambda s: -s.cand) if show_all else slow
    if shown:
        print(f"\nstragglers ({len(slow)} of {len(result.stragglers)} cases with per-rank timings exceed "
              f"straggler_score {STRAGGLER_LIMIT:g} in the candidate; not gated):")
        print(table(straggler_rows(shown[:LIST_LIMIT]), ["case", "region", "baseline max", "candidate max"]))
        if len(shown) > LIST_LIMIT:
            print(f"  ... and {len(shown) - LIST_LIMIT} more")
    if result.suspects:
        new = sum(f.new for f in result.suspects)
        print(f"\nsuspects named by the candidate ({len(result.suspects)}, {new} not named by the baseline; "
              f"not gated):")
        print(table(suspect_rows(result.suspects), ["case", "kind", "where", "figure", "value",
                                                     "in baseline", "rule"]))


def print_report(result, base_run, cand_run, show_all):
    print(f"baseline:  {base_run.path}\n           {base_run.describe()}")
    print(f"candidate: {cand_run.path}\n           {cand_run.describe()}")
    if base_run.device_name() != cand_run.device_name():
        print(f"warning: the runs used different devices ({base_run.device_name()} vs {cand_run.device_name()})")
    for role, run in (("baseline", base_run), ("candidate", cand_run)):
        if not run.timings_representative():
            print(f"warning: the {role}'s timings do not represent the hardware (e.g. mpi-staged ranks sharing a "
                  f"GPU): treat its performance changes with care")
    header = ["case", "metric", "baseline", "candidate", "change", "threshold", "direction"]
    if result.conformance:
        print(f"\nCONFORMANCE ({len(result.conformance)}): candidate cases that fail the gate")
        print("\n".join(f"  {case_id}: {reason}" for case_id, reason in result.conformance))
    if result.of("lost"):
        print(f"\nLOST ({len(result.of('lost'))}): measured in the baseline, null (NaN or Inf) in the candidate")
        print(table(change_rows(result.of("lost")), header))
    for verdict, title in (("regressed", "REGRESSED beyond threshold"), ("improved", "improved beyond threshold")):
        changes = sorted(result.of(verdict), key=lambda c: -abs(c.change_pct or 0))
        if changes:
            print(f"\n{title} ({len(changes)}):")
            print(table(change_rows(changes), header))
    changed = result.of("changed")
    if changed:
        print(f"\nchanged without a percentage to judge, or configuration facts (not gated) ({len(changed)}):")
        print(table(change_rows(changed), header))
    if show_all and result.of("within"):
        print(f"\nwithin threshold ({len(result.of('within'))}):")
        print(table(change_rows(result.of("within")), header))
    if result.only_base:
        note = "" if result.allow_missing else "; fails the gate (--allow-missing to accept)"
        print(f"\nonly in the baseline ({len(result.only_base)}{note}):\n{id_list(result.only_base)}")
    if result.only_cand:
        print(f"\nonly in the candidate ({len(result.only_cand)}; new, not compared):\n{id_list(result.only_cand)}")
    print_findings(result, show_all)
    gated = [c for c in result.changes if c.direction != "info"]
    print(f"\nsummary: {result.matched} cases matched, {len(gated)} performance metrics compared: "
          f"{len(result.of('regressed'))} regressed, {len(result.of('improved'))} improved, "
          f"{len(result.of('within'))} within threshold, {len(result.of('noise'))} below --min-time, "
          f"{len(result.of('lost'))} lost, "
          f"{len([c for c in changed if c.direction != 'info'])} not comparable; "
          f"{len(result.conformance)} conformance problems; "
          f"{len(result.only_base)} only in baseline, {len(result.only_cand)} only in candidate")
    print(f"verdict: {'FAIL' if result.failed else 'PASS'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("baseline", help="results file of the baseline run")
    parser.add_argument("candidate", help="results file of the run under test")
    parser.add_argument("--threshold", action="append", metavar="[NAME=]PCT",
                        help=f"allowed regression in percent (default {DEFAULT_THRESHOLD_PCT:g}); NAME=PCT for one "
                             "metric or a glob (time.*=20); repeatable")
    parser.add_argument("--only", action="append", metavar="GLOB",
                        help="compare only these metrics (e.g. busbw_GBps, 'time.*'); repeatable")
    parser.add_argument("--min-time", type=finite_number, default=0.0, metavar="SECONDS",
                        help="do not gate instances whose baseline time (first region, median) is below this; "
                             "they are counted as noise (default 0: gate everything)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="baseline cases absent from the candidate are listed but do not fail the gate")
    parser.add_argument("--all", action="store_true",
                        help="also list metrics that stayed within threshold, and every case's largest "
                             f"straggler_score (not only those above {STRAGGLER_LIMIT:g})")
    args = parser.parse_args(argv)
    try:
        thresholds = parse_thresholds(args.threshold)
        schema = load_schema()
        docs = [read_valid_document(p, schema) for p in (args.baseline, args.candidate)]
    except (UsageError, ResultsError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    result = compare_docs(docs[0], docs[1], thresholds, args.only, args.allow_missing, args.min_time)
    runs = [Run(path, doc, cases=doc.get("cases", [])) for path, doc in zip((args.baseline, args.candidate), docs)]
    print_report(result, runs[0], runs[1], args.all)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
