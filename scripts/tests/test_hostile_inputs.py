"""Hostile inputs: validate.py, compare.py and report.py on broken files never
print a traceback. Each answers as its docstring promises: validate.py with an
INVALID line (exit 1); compare.py and report.py with exit 2 and one line on
stderr naming the file, for every input that is not a valid results document.
A valid document with odd values is compared (exit 0 or 1, with a verdict) or
drawn (exit 0, or 1 with an "ERROR in" line per section that could not draw).

Two kinds of test. Table-driven: one file per kind of damage (NaN metric,
NaN median, non-UTF-8, directory, ...), each through every script. Property
(hypothesis): a small valid document with random subtrees replaced (by any
JSON value, NaN and Infinity included), keys deleted, then written as JSON,
truncated, with bytes that are not UTF-8, or empty.

SEXTANT_FUZZ_EXAMPLES sets the examples per script (default 30, which keeps
the module to about a minute on two cores); raise it to search harder."""
import copy
import json
import math
import os
import shutil
import tempfile
import unittest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import helpers
from helpers import REAL_FIXTURE, SCREEN_FIXTURE, SYNTHETIC_FIXTURE, run_script, write
from sextant_results.compare import compare_docs, judge, Thresholds
from sextant_results.load import ResultsError
from sextant_results.schema import load_schema, read_valid_document, validate_document

# Hypothesis caches into ./.hypothesis; ctest runs here, in the source folder, which tests leave clean.
HYPOTHESIS_HOME = tempfile.TemporaryDirectory(prefix="hypothesis-")
set_hypothesis_home_dir(HYPOTHESIS_HOME.name)
EXAMPLES = int(os.environ.get("SEXTANT_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SCHEMA = load_schema()


# ---- small valid documents to break -------------------------------------------

def small_document(path, suites, per_suite):
    """The first per_suite cases of each suite in the fixture at path (the
    summary recounted): valid, and quick to validate and draw."""
    doc = helpers.load(path)
    kept, seen = [], {}
    for c in doc["cases"]:
        if c["suite"] in suites and seen.get(c["suite"], 0) < per_suite:
            seen[c["suite"]] = seen.get(c["suite"], 0) + 1
            kept.append(c)
    doc["cases"] = kept
    helpers.recount(doc)
    return doc


def multi_rank_collectives():
    """Two real collectives cases, one of them on several ranks (a busbw figure)."""
    doc = helpers.load(REAL_FIXTURE)
    doc["cases"] = [doc["cases"][0], next(c for c in doc["cases"] if c["params"]["group_size"] > 1)]
    helpers.recount(doc)
    return doc


BASES = {
    "collectives": multi_rank_collectives(),
    "pipeline+step": small_document(SYNTHETIC_FIXTURE, ("pipeline", "step"), 1),
    "tp_sp+attention+moe": small_document(SYNTHETIC_FIXTURE, ("tp_sp", "attention", "moe"), 1),
    "screen": helpers.load(SCREEN_FIXTURE),  # per-rank timings, a link matrix, suspects
}


# ---- strategies: damage to a document and to its file --------------------------

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | NON_FINITE | st.text(max_size=8)
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
# Bytes that no UTF-8 decoder accepts: a lone 0xff, a cut two-byte sequence, an
# encoded surrogate, a five-byte lead.
NOT_UTF8 = st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])


def damage_once(draw, doc):
    """doc with one subtree replaced or deleted; the root may be replaced whole."""
    parent, key, node = None, None, doc
    # Walk down, stopping at each level with probability 1/5: shallow and deep damage both happen.
    while isinstance(node, (dict, list)) and node and draw(st.integers(0, 4)) > 0:
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        parent, node = node, node[key]
    action = draw(st.sampled_from(["replace", "replace", "non-finite", "delete"]))
    value = draw(NON_FINITE) if action == "non-finite" else draw(JSON_VALUES)
    if parent is None:
        return value
    if action == "delete":
        del parent[key]
    else:
        parent[key] = value
    return doc


FINITE = st.floats(allow_nan=False, allow_infinity=False)
NUMBERS = st.none() | st.integers() | FINITE | st.sampled_from([0, 0.0, 1e-300, 1.7e308, -1.0])


def damage_open_part(draw, doc):
    """doc with one value changed where the schema leaves room (params, notes,
    extras, values of metrics and times, ids): the document often stays valid,
    so the scripts' own handling of odd values is exercised, not only refusal."""
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        return doc
    case = draw(st.sampled_from(cases))
    perf = case.get("perf") if isinstance(case.get("perf"), dict) else {}
    conformance = case.get("conformance") if isinstance(case.get("conformance"), dict) else {}
    metrics, times = perf.get("metrics", {}), perf.get("time", {})
    where = draw(st.sampled_from(["params", "notes", "extra", "metric", "time", "id", "fault"]))
    if where in ("params", "notes", "extra"):
        target = {"params": case.get("params"), "notes": conformance.get("notes"), "extra": metrics}[where]
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target)) | st.text(max_size=8)) if target else draw(st.text(max_size=8))
            target[key] = draw(JSON_VALUES)
    elif where == "metric" and isinstance(metrics, dict):
        measured = [k for k, m in metrics.items() if isinstance(m, dict) and "value" in m]
        if measured:
            metrics[draw(st.sampled_from(measured))]["value"] = draw(NUMBERS)
    elif where == "time" and isinstance(times, dict) and times:
        stats = times[draw(st.sampled_from(sorted(times)))]
        if isinstance(stats, dict) and stats:
            stats[draw(st.sampled_from(sorted(stats)))] = draw(NUMBERS)
    elif where == "id":
        case["id"] = draw(st.text(max_size=12))
    else:
        case["fault"] = draw(st.none() | st.text(max_size=8))
    return doc


@st.composite
def damaged_documents(draw):
    """(base name, damaged copy of that base)."""
    name = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 2))):
        damage = draw(st.sampled_from([damage_once, damage_open_part, damage_open_part]))
        doc = damage(draw, doc)
    return name, doc


@st.composite
def damaged_files(draw):
    """(base name, bytes of a damaged document as a file might hold them)."""
    name, doc = draw(damaged_documents())
    data = json.dumps(doc).encode("utf-8")  # NaN and Infinity as Python writes them
    form = draw(st.sampled_from(["json"] * 8 + ["truncated", "not utf-8", "empty"]))
    if form == "truncated":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif form == "not utf-8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(NOT_UTF8) + data[at:]
    elif form == "empty":
        data = b""
    return name, data


# ---- what every script must do ---------------------------------------------------

class ScriptContract(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def write_bytes(self, data, name="damaged.json"):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def is_valid(self, path):
        """Whether compare.py and report.py must accept the file."""
        try:
            read_valid_document(path, SCHEMA)
            return True
        except ResultsError:
            return False

    def assert_refused(self, result, path):
        """Exit 2 and exactly one line on stderr that names the file."""
        rc, out, err = result
        self.assertNotIn("Traceback", err)
        self.assertEqual(rc, 2, out + err)
        lines = [line for line in err.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertIn(path, lines[0])

    def check_validate(self, *paths):
        """validate.py's contract: a line per file on stdout, nothing on stderr, exit 0 or 1."""
        rc, out, err = run_script("validate.py", *paths)
        self.assertNotIn("Traceback", err)
        self.assertEqual(err, "")
        self.assertIn(rc, (0, 1), out)
        self.assertEqual(len(out.splitlines()), len(paths), out)
        self.assertIn(": ok (" if rc == 0 else ": INVALID", out)
        return rc, out

    def check_compare(self, path, good):
        for base, cand in ((path, good), (good, path)):
            result = run_script("compare.py", base, cand)
            if self.is_valid(path):
                rc, out, err = result
                self.assertNotIn("Traceback", err)
                self.assertIn(rc, (0, 1), out + err)
                self.assertIn("verdict: ", out)
            else:
                self.assert_refused(result, path)

    def check_report(self, path):
        out_dir = os.path.join(self.tmp, "report")
        shutil.rmtree(out_dir, ignore_errors=True)
        result = run_script("report.py", path, "-o", out_dir)
        if not self.is_valid(path):
            self.assert_refused(result, path)
            return
        rc, out, err = result
        self.assertNotIn("Traceback", err)
        self.assertIn(rc, (0, 1), out + err)
        if rc == 1:  # a section failed to draw: said in one line, the rest written
            self.assertIn("report: ERROR in ", err)
        self.assertTrue(os.path.isfile(os.path.join(out_dir, "index.html")), out + err)


class DamagedFiles(ScriptContract):
    """Property tests: any damage, any script, the contract holds."""

    def good(self, name):
        return write(BASES[name], self.tmp, "good.json")

    @FUZZ
    @given(damaged_files())
    def test_validate(self, damaged):
        path = self.write_bytes(damaged[1])
        rc, out = self.check_validate(path)
        self.assertEqual(rc == 0, self.is_valid(path) and not validate_document(helpers.load(path), SCHEMA), out)

    @FUZZ
    @given(damaged_files())
    def test_compare_both_ways(self, damaged):
        name, data = damaged
        self.check_compare(self.write_bytes(data), self.good(name))

    @FUZZ
    @given(damaged_files())
    def test_report(self, damaged):
        self.check_report(self.write_bytes(damaged[1]))

    def test_the_bases_are_valid(self):
        for name, doc in BASES.items():
            self.assertEqual(validate_document(doc, SCHEMA), [], name)


# ---- one file per kind of damage ------------------------------------------------

def edited(edit, base="collectives"):
    doc = copy.deepcopy(BASES[base])
    edit(doc)
    return json.dumps(doc).encode("utf-8")


def metric_value(value):
    return lambda d: d["cases"][1]["perf"]["metrics"]["busbw_GBps"].update(value=value)


# (what, file bytes, text the refusal must contain)
DAMAGE = [
    ("NaN metric value", edited(metric_value(math.nan)), "$.cases[1].perf.metrics.busbw_GBps.value: NaN"),
    ("Infinity metric value", edited(metric_value(math.inf)), "Infinity is not a finite number"),
    ("overflowing metric value", edited(metric_value(1.0)).replace(b'"value": 1.0', b'"value": 1e999'),
     "inf is not a finite number"),
    ("NaN median", edited(lambda d: d["cases"][0]["perf"]["time"]["run"].update(median=math.nan)),
     "$.cases[0].perf.time.run.median: NaN"),
    ("NaN conformance status", edited(lambda d: d["cases"][0]["conformance"].update(status=math.nan)),
     "$.cases[0].conformance.status: NaN"),
    ("cases an object", edited(lambda d: d.update(cases={"0": d["cases"][0]})), "$.cases: "),
    ("cases a string", edited(lambda d: d.update(cases="all of them")), "is not of type 'array'"),
    ("perf null", edited(lambda d: d["cases"][0].update(perf=None)), "$.cases[0].perf: None is not of type"),
    ("metrics a list", edited(lambda d: d["cases"][0]["perf"].update(metrics=[1])), "$.cases[0].perf.metrics"),
    ("params of the wrong type", edited(lambda d: d["cases"][0]["params"].update(bytes="1k")),
     "$.cases[0].params.bytes"),
    ("comm not an object", edited(lambda d: d["cases"][0]["perf"]["metrics"].update(comm=5)),
     "$.cases[0].perf.metrics.comm"),
    ("unpaired surrogate in an id", edited(lambda d: d["cases"][0].update(id="x\udc80")), "unpaired surrogate"),
    ("not UTF-8", b'{"schema": "sextant.result/1", "run": "\xff"}', "not UTF-8: byte 0xff at offset 39"),
    ("UTF-16", json.dumps(BASES["collectives"]).encode("utf-16"), "not UTF-8"),
    ("empty file", b"", "not JSON"),
    ("truncated JSON", edited(lambda d: None)[:200], "not JSON"),
    ("top level a list", b"[1, 2]", "not a sextant.result/1 document"),
    ("top level a number", b"42", "not a sextant.result/1 document"),
    ("top level NaN", b"NaN", "NaN is not a finite number"),
    ("nested too deeply", b"[" * 100_000, "nested too deeply"),
    ("an integer Python will not convert", b'{"schema": ' + b"9" * 5000 + b"}", "not JSON"),
]


class EachKindOfDamage(ScriptContract):
    def test_every_script_refuses_it_in_one_line(self):
        good = write(BASES["collectives"], self.tmp, "good.json")
        paths = [self.write_bytes(data, f"damage{i}.json") for i, (_, data, _) in enumerate(DAMAGE)]
        rc, out = self.check_validate(*paths)  # one run for all: a line per file, in order
        self.assertEqual(rc, 1, out)
        for (what, _, message), path, line in zip(DAMAGE, paths, out.splitlines()):
            with self.subTest(what):
                self.assertTrue(line.startswith(f"{path}: INVALID"), line)
                self.assertIn(message, line)
                for args in ((path, good), (good, path)):
                    result = run_script("compare.py", *args)
                    self.assert_refused(result, path)
                    self.assertIn(message, result[2])
                result = run_script("report.py", path, "-o", os.path.join(self.tmp, "report"))
                self.assert_refused(result, path)
                self.assertIn(message, result[2])

    def test_missing_file(self):
        path, good = os.path.join(self.tmp, "absent.json"), write(BASES["collectives"], self.tmp, "good.json")
        rc, out = self.check_validate(path)
        self.assertIn("cannot read: No such file", out)
        self.assert_refused(run_script("compare.py", good, path), path)
        self.assert_refused(run_script("report.py", path, "-o", self.tmp), path)

    def test_directory_given_as_a_file(self):
        folder, good = os.path.join(self.tmp, "folder.json"), write(BASES["collectives"], self.tmp, "good.json")
        os.mkdir(folder)
        for args in ((folder, good), (good, folder)):
            result = run_script("compare.py", *args)
            self.assert_refused(result, folder)
            self.assertIn("cannot read: Is a directory", result[2])
        # validate.py and report.py read folders: an empty one has no results in it.
        for script in ("validate.py", "report.py"):
            rc, _, err = run_script(script, folder, *(["-o", self.tmp] if script == "report.py" else []))
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("no results files", err)

    def test_a_folder_holding_a_damaged_file(self):
        folder = os.path.join(self.tmp, "runs")
        os.mkdir(folder)
        write(BASES["collectives"], folder, "good.json")
        damaged = os.path.join(folder, "nan.json")
        with open(damaged, "wb") as f:
            f.write(DAMAGE[0][1])
        rc, out, err = run_script("validate.py", folder)
        self.assertEqual((rc, err), (1, ""), out)
        self.assertIn("nan.json: INVALID", out)
        self.assert_refused(run_script("report.py", folder, "-o", os.path.join(self.tmp, "report")), damaged)

    def test_an_unwritable_report_folder(self):
        good = write(BASES["collectives"], self.tmp, "good.json")
        rc, _, err = run_script("report.py", good, "-o", good)  # a file, not a folder
        self.assertEqual(rc, 2, err)
        self.assertIn("cannot write the report", err)


# ---- documents built in Python, and the gate's own rules -------------------------

class InProcess(unittest.TestCase):
    def test_validation_names_the_first_non_finite_number(self):
        doc = copy.deepcopy(BASES["collectives"])
        doc["cases"][1]["perf"]["time"]["run"]["p90"] = math.inf
        doc["cases"][1]["conformance"]["notes"]["residual"] = math.nan  # open object: no schema type
        problems = validate_document(doc, SCHEMA)
        self.assertEqual([p for p, _ in problems],
                         ["$.cases[1].conformance.notes.residual", "$.cases[1].perf.time.run.p90"])
        self.assertIn("nan is not a finite number", problems[0][1])

    def test_null_stays_allowed_where_a_value_could_not_be_computed(self):
        doc = copy.deepcopy(BASES["collectives"])
        doc["cases"][1]["perf"]["metrics"]["busbw_GBps"]["value"] = None
        doc["cases"][1]["conformance"]["tensors"] = [
            {"name": "out", "error": None, "base_error": None, "bound": 0.01, "max_abs": None, "nonfinite": 2,
             "count": 4, "pass": False}]
        doc["cases"][1]["conformance"].update(status="fail", failures=["out: 2 NaN/Inf"])
        helpers.recount(doc)
        self.assertEqual(validate_document(doc, SCHEMA), [])

    def test_compare_docs_refuses_non_finite_numbers(self):
        doc = copy.deepcopy(BASES["collectives"])
        doc["cases"][1]["perf"]["metrics"]["busbw_GBps"]["value"] = math.nan
        for base, cand, role in ((doc, BASES["collectives"], "baseline"), (BASES["collectives"], doc, "candidate")):
            with self.assertRaisesRegex(ResultsError, rf"{role}: at \$\.cases\[1\]\.perf\.metrics\.busbw_GBps"):
                compare_docs(base, cand)

    def test_a_gated_metric_that_becomes_null_fails_the_gate(self):
        lost = judge("c", "busbw_GBps", (10.0, "GB/s"), (None, "GB/s"), Thresholds())
        self.assertEqual(lost.verdict, "lost")
        found = judge("c", "busbw_GBps", (None, "GB/s"), (10.0, "GB/s"), Thresholds())
        self.assertEqual(found.verdict, "changed")  # measurable again: shown, not a failure
        cand = copy.deepcopy(BASES["collectives"])
        cand["cases"][1]["perf"]["metrics"]["busbw_GBps"]["value"] = None
        self.assertTrue(compare_docs(BASES["collectives"], cand).failed)
        self.assertFalse(compare_docs(cand, BASES["collectives"]).failed)


if __name__ == "__main__":
    unittest.main()
