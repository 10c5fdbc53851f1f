#!/usr/bin/env python3
"""Turn sextant results into a report: PNG figures, a self-contained
index.html (figures embedded, so the page can be mailed) and summary.md.

    python3 scripts/report.py results/*.json -o out/report
    python3 scripts/report.py out/results -o out/report      # a folder of runs

Several files (runs, machines) go into one report; their lines are told
apart by line style and a label (device x world size). Suites that are not in
the results are skipped with a line saying so. Exit status: 0 when every
section was drawn or skipped for lack of data; 1 when a section failed to
draw (one "ERROR in" line each on stderr, the tracebacks in
report-errors.txt beside index.html; the rest of the report is still
written); 2, with one line on stderr, on bad usage or bad input: a file that
cannot be read, is not UTF-8, is not JSON, holds NaN or Infinity, or is not
valid against results/schema.json (scripts/validate.py says where).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sextant_results.load import ResultsError, expand_paths, load_runs  # noqa: E402
from sextant_results.schema import load_schema, read_valid_document  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("results", nargs="+", help="results files or folders of them")
    parser.add_argument("-o", "--out", required=True, help="folder for the figures, index.html and summary.md")
    parser.add_argument("--title", default="sextant report", help="page title")
    args = parser.parse_args(argv)

    paths = expand_paths(args.results)
    if not paths:
        print("report: no results files (*.json, not schema.json) in " + " ".join(args.results), file=sys.stderr)
        return 2
    try:
        schema = load_schema()
        runs = load_runs(paths, read=lambda path: read_valid_document(path, schema))
    except ResultsError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"report: cannot write the report to {args.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    from sextant_results.report import build_report  # imports matplotlib: only when there is work

    result = build_report(runs, args.out, args.title)
    for s in result.sections:
        if s.skipped:
            print(f"report: {s.title}: skipped: {s.skipped}")
        else:
            print(f"report: {s.title}: {len(s.figures)} figure(s), {len(s.tables)} table(s)")
    for error in result.errors:
        print(f"report: ERROR in {error} (traceback in {result.error_log})", file=sys.stderr)
    print(f"report: {result.html} ({len(result.figures)} figures), {result.markdown}")
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
