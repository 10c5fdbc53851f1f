"""Shared by the script tests: where things are, and how to run a script."""
import copy
import glob
import json
import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(TESTS)
REPO = os.path.dirname(SCRIPTS)
FIXTURES = os.path.join(TESTS, "fixtures")
REAL_FIXTURE = os.path.join(FIXTURES, "real-collectives-cpu-np4-ci.json")
SYNTHETIC_FIXTURE = os.path.join(FIXTURES, "synthetic-suites.json")
SCREEN_FIXTURE = os.path.join(FIXTURES, "synthetic-screen.json")  # two nodes, suspects, per-rank timings

sys.path.insert(0, SCRIPTS)


def stored_results():
    """Real runs stored anywhere under results/ (results/<machine>/sextant-*.json,
    the names sextant gives its results files; benchmark and summary JSON beside
    them are not results documents), if any; new runs are picked up as they land."""
    return sorted(glob.glob(os.path.join(REPO, "results", "**", "sextant-*.json"), recursive=True))


def real_results():
    """Every real (measured) results file available to the tests."""
    return [REAL_FIXTURE] + stored_results()


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(doc, folder, name):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def derived(path, edit, keep=None):
    """A deep copy of the document at path, changed by edit(doc). keep: only
    the first keep cases and the last one (summary recounted), for speed."""
    doc = copy.deepcopy(load(path))
    if keep is not None:
        doc["cases"] = doc["cases"][:keep] + doc["cases"][-1:]
        recount(doc)
    edit(doc)
    return doc


def recount(doc):
    """run.summary from the cases, as the harness computes it."""
    summary = {"cases": len(doc["cases"]), "pass": 0, "fail": 0, "skip": 0, "error": 0}
    for c in doc["cases"]:
        summary["error" if c.get("error") else c["conformance"]["status"]] += 1
    doc["run"]["summary"] = summary


def run_script(name, *args):
    """(exit status, stdout, stderr) of scripts/<name> with args."""
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, name)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr
