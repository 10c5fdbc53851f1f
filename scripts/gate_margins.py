#!/usr/bin/env python3
"""Margins of the conformance gates: for each tolerance row (op), dtype and
profile, the smallest and the largest margin of a one-device baseline error
below its gate in the given results (each tensor against its own gate).

    python3 scripts/gate_margins.py out/results/*.json
    python3 scripts/gate_margins.py --markdown results/runs/xeon-2core

margin = gate / baseline error: how far a correct kernel sits below its gate (at least 3 is the aim; far above 1000 means the row could be
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
    """{(op, dtype, profile): the tensors with the smallest and the largest margin}.

    Each tensor has a gate of its own (the step suite scales the row's gate with
    the steps and the distance from the loss), so margins are taken per tensor."""
    rows = collections.defaultdict(lambda: {"count": 0, "exact": 0, "low": None, "high": None})
    for path in paths:
        doc = read_document(path)
        profile = profile_of(doc)
        for case in doc["cases"]:
            for t in case["conformance"]["tensors"]:
                if not t.get("op") or t.get("base_error") is None:
                    continue
                r = rows[(t["op"], case["dtype"], profile)]
                r["count"] += 1
                if t["base_error"] <= 0:
                    r["exact"] += 1
                    continue
                m = {"margin": t["base_bound"] / t["base_error"], "error": t["base_error"], "gate": t["base_bound"],
                     "where": f"{case['suite']}/{case['case']} {t['name']}"}
                if r["low"] is None or m["margin"] < r["low"]["margin"]:
                    r["low"] = m
                if r["high"] is None or m["margin"] > r["high"]["margin"]:
                    r["high"] = m
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
    header = ["op", "dtype", "profile", "checks", "smallest margin", "its error", "its gate", "where",
              "largest margin", "where"]
    lines = []
    for (op, dtype, profile), r in sorted(rows.items()):
        low, high = r["low"], r["high"]
        if low is None:  # every error exactly zero
            lines.append([op, dtype, profile, str(r["count"]), "exact", "", "", "", "exact", ""])
            continue
        lines.append([op, dtype, profile, str(r["count"]), f"{low['margin']:.3g}", f"{low['error']:.3g}",
                      f"{low['gate']:.3g}", low["where"], f"{high['margin']:.3g}", high["where"]])
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
