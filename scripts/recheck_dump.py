#!/usr/bin/env python3
"""Recompute the cases of a sextant --dump folder in numpy float64, independently of sextant.

    python3 scripts/recheck_dump.py DUMP_DIR [--results RESULTS.json] [--json REPORT.json]

For every case folder it covers (ops/attention, ops/layernorm, ops/gelu,
ops/cross_entropy, the attention suite's CP variants with the full or the
spot reference, attention/dynamic_cp, moe/layer with its routing table; see
scripts/recheck/), it recomputes each checked tensor from the dumped inputs
and prints, per tensor: `ref` the relative L2 difference between sextant's
float64 reference (NAME.ref.npy) and this one, and `dist`, `base` the relative
L2 errors of sextant's distributed and one-device results against this one
(error(x) = ||x - own|| / ||own||, absolute when own is zero, inf with NaN or
Inf); a table checked exactly (the routing) must equal sextant's reference.
With --results, the `error` and `base_error` recorded in the results
file for the same case id and tensor must agree with those. Other cases are
listed as skipped (not re-implemented).

Exit status 0 when every recomputed tensor is within --threshold of sextant's
reference (and, with --results, every recorded error agrees); 1 otherwise;
2 for bad usage or unreadable input (one line on stderr).
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recheck.cases import EXACT, Inconsistent, Skip, recompute  # noqa: E402
from sextant_results.load import ResultsError, expand_paths, read_document  # noqa: E402

# Recorded and recomputed errors agree when they differ by less than this
# fraction, plus what the two references' own difference can explain.
RESULTS_RTOL = 1e-6


class InputError(Exception):
    """A dump or results file that cannot be read (exit 2)."""


def read_npy(path):
    """A dumped tensor as float64 (f64, f32, f16; bf16 is dumped as the f32 of the same value)."""
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise InputError(f"{path}: not a .npy file (no NUMPY magic)")
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: missing") from None
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{path}: not a .npy file numpy can read: {e}") from None
    if array.dtype.kind != "f":
        raise InputError(f"{path}: dtype {array.dtype}, expected a float tensor")
    return array.astype(np.float64)


def read_params(folder):
    path = os.path.join(folder, "params.json")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    kinds = {"suite": str, "case": str, "id": str, "params": dict, "ranks": int}
    wrong = [k for k, kind in kinds.items() if not isinstance(meta, dict) or not isinstance(meta.get(k), kind)]
    if wrong:
        raise InputError(f"{path}: no {', '.join(wrong)} of the right type (a dump's params.json has "
                         "suite, case, id, params, ranks)")
    return meta


def case_folders(dump_dir):
    """The case folders of a dump (or dump_dir itself when it is one), in name order."""
    if not os.path.isdir(dump_dir):
        raise InputError(f"{dump_dir}: not a folder")
    if os.path.isfile(os.path.join(dump_dir, "params.json")):
        return [dump_dir]
    folders = sorted(os.path.join(dump_dir, n) for n in os.listdir(dump_dir)
                     if os.path.isfile(os.path.join(dump_dir, n, "params.json")))
    if not folders:
        raise InputError(f"{dump_dir}: no case folders (folders with a params.json), not a --dump folder")
    return folders


def rel_l2(x, own):
    """||x - own|| / ||own|| (absolute when own is zero); inf when x has NaN or Inf, as sextant's error."""
    if not np.all(np.isfinite(x)):
        return math.inf
    scale = np.linalg.norm(own)
    diff = np.linalg.norm(x - own)
    return float(diff / scale) if scale > 0 else float(diff)


def agree(recorded, mine, own_vs_ref):
    """Whether a recorded error (null when not finite) equals the recomputed one, up to what the
    difference between the two references explains: |e_own - e_ref| <= d (1 + e_ref) for d = own_vs_ref."""
    if recorded is None or not math.isfinite(mine):
        return recorded is None and not math.isfinite(mine)
    slack = RESULTS_RTOL * max(abs(recorded), mine) + 2.0 * own_vs_ref * (1.0 + recorded) + 1e-300
    return abs(recorded - mine) <= slack


def check_tensor(folder, name, mine, threshold, recorded):
    """The numbers of one checked tensor and the problems they show.

    mine: the recomputed tensor; recorded: its results entry (None without --results)."""
    t, problems = {"name": name}, []
    ref, dist, base = (read_npy(os.path.join(folder, f"{name}.{side}.npy")) for side in ("ref", "dist", "base"))
    if any(a.shape != mine.shape for a in (ref, dist, base)):
        problems.append(f"{name}: shapes ref {ref.shape}, dist {dist.shape}, base {base.shape}, "
                        f"recomputed {mine.shape}")
        return t, problems
    t.update(own_vs_ref=rel_l2(ref, mine), dist=rel_l2(dist, mine), base=rel_l2(base, mine))
    if name in EXACT:  # a table: equal or not, and no recorded error to compare
        t["exact"] = True
        if t["own_vs_ref"] != 0:
            problems.append(f"{name}: sextant's reference table differs from the one recomputed here")
        return t, problems
    if not t["own_vs_ref"] <= threshold:
        problems.append(f"{name}: sextant's reference differs by {t['own_vs_ref']:.3g} > {threshold:g}")
    if recorded is not None:
        t.update(recorded_dist=recorded[0], recorded_base=recorded[1])
        for side, value in (("dist", recorded[0]), ("base", recorded[1])):
            if not agree(value, t[side], t["own_vs_ref"]):
                problems.append(f"{name}: {side} error {t[side]:.6g} here, {value} recorded")
    return t, problems


def recheck_case(folder, threshold, results):
    """A report for one case folder: status rechecked or skipped, per-tensor numbers, problems.

    results: {case id: {tensor name: (error, base_error)}}, or None."""
    meta = read_params(folder)
    report = {"id": meta["id"], "folder": os.path.basename(folder), "status": "rechecked", "tensors": [],
              "problems": []}
    try:
        own = recompute(meta, lambda name: read_npy(os.path.join(folder, name + ".npy")))
    except Skip as e:
        report.update(status="skipped", reason=str(e))
        return report
    except (KeyError, TypeError) as e:
        raise InputError(f"{os.path.join(folder, 'params.json')}: params lack or misstate {e}") from None
    except (Inconsistent, ValueError, IndexError) as e:
        report["problems"].append(f"cannot recompute: {e}")
        return report
    recorded = {}
    if results is not None:
        if meta["id"] not in results:
            report["problems"].append("no record with this id in the results file")
        recorded = results.get(meta["id"], {})
    dumped = {n[:-len(".ref.npy")] for n in os.listdir(folder) if n.endswith(".ref.npy")}
    for name in [n for n in own if n in dumped] + sorted(dumped - set(own)):  # in the order of the math
        if name not in own:
            report["problems"].append(f"{name}: checked by sextant, not recomputed here")
            continue
        if results is not None and meta["id"] in results and name not in recorded and name not in EXACT:
            report["problems"].append(f"{name}: not in the results record")
        t, problems = check_tensor(folder, name, own[name], threshold,
                                   recorded.get(name) if results is not None else None)
        report["tensors"].append(t)
        report["problems"] += problems
    return report


def finite_or_null(value):
    """value with every non-finite float as None: JSON has no inf."""
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def number(x):
    return "   n/a   " if x is None else f"{x:9.3g}" if math.isfinite(x) else "      inf"


def print_report(report, with_results):
    if report["status"] == "skipped":
        print(f"skip  {report['id']}: {report['reason']}")
        return
    print(f"{'FAIL' if report['problems'] else 'ok  '}  {report['id']}")
    for t in report["tensors"]:
        if "own_vs_ref" not in t:
            continue
        line = (f"      {t['name']:<9} ref {number(t['own_vs_ref'])}   dist {number(t['dist'])}   "
                f"base {number(t['base'])}")
        if with_results and "recorded_dist" in t:
            line += f"   recorded {number(t['recorded_dist'])} {number(t['recorded_base'])}"
        print(line)
    for p in report["problems"]:
        print(f"      problem: {p}")


def load_results(path):
    """{case id: {tensor name: (error, base_error)}} of one results file (or a folder holding exactly one)."""
    paths = expand_paths([path])
    if len(paths) != 1:
        raise InputError(f"--results {path}: {len(paths)} results files there, name one")
    try:
        doc = read_document(paths[0])
    except ResultsError as e:
        raise InputError(f"--results: {e}") from None
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise InputError(f"--results {paths[0]}: cases is not a list")
    out = {}
    for i, case in enumerate(cases):
        try:
            tensors = (case.get("conformance") or {}).get("tensors") or []
            out[str(case["id"])] = {t["name"]: (error_value(t, "error"), error_value(t, "base_error")) for t in tensors}
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise InputError(f"--results {paths[0]}: cases[{i}] is not a case record with conformance tensors "
                             f"({type(e).__name__}: {e})") from None
    return out


def error_value(tensor, key):
    """A recorded error: a number, or None where it was not finite."""
    value = tensor[key]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"{key} {value!r} of {tensor['name']} is not a number")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("dump", metavar="DUMP_DIR", help="the folder given to sextant --dump (or one case folder)")
    parser.add_argument("--results", metavar="RESULTS.json", help="the results file of the same run")
    parser.add_argument("--threshold", type=float, default=1e-10,
                        help="largest relative difference from sextant's reference (default 1e-10)")
    parser.add_argument("--json", metavar="REPORT.json", help="also write the per-case reports as JSON")
    args = parser.parse_args(argv)
    if not args.threshold > 0:
        print(f"recheck_dump: --threshold {args.threshold} must be positive", file=sys.stderr)
        return 2
    try:
        results = load_results(args.results) if args.results else None
        reports = []
        for folder in case_folders(args.dump):
            reports.append(recheck_case(folder, args.threshold, results))
            print_report(reports[-1], results is not None)
    except InputError as e:
        print(f"recheck_dump: {e}", file=sys.stderr)
        return 2
    rechecked = [r for r in reports if r["status"] == "rechecked"]
    failed = [r for r in rechecked if r["problems"]]
    tensors = [t for r in rechecked for t in r["tensors"] if "own_vs_ref" in t]
    worst = max((t["own_vs_ref"] for t in tensors), default=0.0)
    print(f"# {len(reports)} cases: {len(rechecked)} rechecked ({len(failed)} with problems), "
          f"{len(reports) - len(rechecked)} skipped (not re-implemented); {len(tensors)} tensors, "
          f"largest difference from sextant's reference {worst:.3g} (threshold {args.threshold:g})"
          + ("; recorded errors compared" if results is not None else ""))
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"threshold": args.threshold, "cases": finite_or_null(reports)}, f, indent=1)
        except OSError as e:
            print(f"recheck_dump: --json {args.json}: cannot write: {e.strerror or e}", file=sys.stderr)
            return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
