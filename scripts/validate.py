#!/usr/bin/env python3
"""Validate sextant results files against results/schema.json.

    python3 scripts/validate.py results/*.json
    python3 scripts/validate.py out/results          # every *.json in a folder

One line per file on stdout: "ok" with the case count, or "INVALID" with the
JSON path of the first problem (and how many more there are). A file that
cannot be read, is not UTF-8, is not JSON or holds NaN or Infinity (not JSON,
though Python writes them) is INVALID too, with the reason. Exit status 0
when every file is valid, 1 when any is not, 2 on bad usage (no results
files, an unusable --schema), with one line on stderr. After the schema,
checks what a schema cannot: unique ids, the run summary matches the cases
(run.summary.suspects, where present, counts every case's
perf.metrics.suspects), tp*cp*pp*dp equals the case's rank count, and the
per-rank figures fit the case's group: every time.<region>.per_rank array
and per_iteration.by_rank has one entry per rank, each by_rank row one per
iteration (as long as per_iteration.max), and the screen suite's per-rank
metrics, link matrix and suspects stay within its ranks.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sextant_results.load import SCHEMA_PATH, ResultsError, expand_paths, read_document  # noqa: E402
from sextant_results.schema import first_problem_text, load_schema, validate_document  # noqa: E402


def check_file(path, schema, show_all=False):
    """(ok, line) for one file."""
    try:
        doc = read_document(path)
    except ResultsError as e:
        return False, f"{path}: INVALID: {str(e).removeprefix(path + ': ')}"
    problems = validate_document(doc, schema)
    if not problems:
        summary = doc["run"]["summary"]
        named = f"; {summary['suspects']} suspects" if "suspects" in summary else ""
        return True, (f"{path}: ok ({summary['cases']} cases: {summary['pass']} pass, {summary['fail']} fail, "
                      f"{summary['skip']} skip, {summary['error']} error{named})")
    line = f"{path}: INVALID {first_problem_text(problems)}"
    if show_all:
        line += "".join(f"\n    {w}: {m}" for w, m in problems[1:])
    return False, line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("files", nargs="+", help="results files or folders of them")
    parser.add_argument("--schema", default=SCHEMA_PATH, help="schema file (default: results/schema.json)")
    parser.add_argument("--all", action="store_true", help="list every problem, not only the first")
    args = parser.parse_args(argv)
    try:
        schema = load_schema(args.schema)
    except ResultsError as e:
        print(f"validate: cannot use the schema: {e}", file=sys.stderr)
        return 2
    paths = expand_paths(args.files)
    if not paths:
        print("validate: no results files (*.json, not schema.json) in " + " ".join(args.files), file=sys.stderr)
        return 2
    all_ok = True
    for path in paths:
        ok, line = check_file(path, schema, args.all)
        print(line)
        all_ok &= ok
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
