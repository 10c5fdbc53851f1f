#!/usr/bin/env python3
"""Margins of the conformance gates: for each tolerance row (op), dtype and
profile, the largest one-device baseline error seen in the given results and
the gate it is held to.

    python3 scripts/gate_margins.py out/results/*.json
    python3 scripts/gate_margins.py --markdown results/runs/xeon-2core

margin = gate / largest baseline error: how far a correct kernel sits below
its gate (at least 3 is the aim; far above 1000 means the row could be
tighter for that dtype). Exit 0, or 2 on unreadable input.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sextant_results.load import ResultsError, expand_paths, read_document  # noqa: E402


def profile_of(doc):
    words = doc.get("run", {}).get("command", "").split()
    return words[words.index("--profile") + 1] if "--profile" in words[:-1] else "default"


def collect(paths):
    rows = collections.defaultdict(lambda: {"worst": 0.0, "gate": None, "count": 0, "where": ""})
    for path in paths:
        doc = read_document(path)
        profile = profile_of(doc)
        for case in doc["cases"]:
            for t in case["conformance"]["tensors"]:
                if not t.get("op") or t.get("base_error") is None:
                    continue
                r = rows[(t["op"], case["dtype"], profile)]
                r["count"] += 1
                r["gate"] = t["base_bound"]
                if t["base_error"] >= r["worst"]:
                    r["worst"], r["where"] = t["base_error"], f"{case['suite']}/{case['case']} {t['name']}"
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="results files or folders of them")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)
    try:
        rows = collect(expand_paths(args.files))
    except ResultsError as e:
        print(f"gate_margins: {e}", file=sys.stderr)
        return 2
    header = ["op", "dtype", "profile", "checks", "largest baseline error", "gate", "margin", "where"]
    lines = []
    for (op, dtype, profile), r in sorted(rows.items()):
        margin = r["gate"] / r["worst"] if r["worst"] > 0 else float("inf")
        lines.append([op, dtype, profile, str(r["count"]), f"{r['worst']:.3g}", f"{r['gate']:.3g}",
                      "exact" if margin == float("inf") else f"{margin:.3g}", r["where"]])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(header, *lines)]
        for line in [header] + lines:
            print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
