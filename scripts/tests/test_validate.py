"""validate.py and results/schema.json: real files pass; each kind of broken
file fails with the JSON path of the problem; the synthetic fixtures are
valid and up to date."""
import json
import os
import shutil
import tempfile
import unittest

import helpers
import validate
from helpers import REAL_FIXTURE, SYNTHETIC_FIXTURE, derived, run_script, write
from sextant_results.schema import load_schema, validate_document


def first_problem(doc):
    problems = validate_document(doc, load_schema())
    return problems[0] if problems else None


class AcceptsRealFiles(unittest.TestCase):
    def test_real_and_synthetic_files_are_valid(self):
        paths = helpers.real_results() + [SYNTHETIC_FIXTURE]
        rc, out, err = run_script("validate.py", *paths)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(out.splitlines()), len(paths), out)
        for line in out.splitlines():
            self.assertRegex(line, r": ok \(\d+ cases: ")

    def test_a_folder_is_read_file_by_file(self):
        rc, out, _ = run_script("validate.py", os.path.dirname(REAL_FIXTURE))
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(out.splitlines()), 2)

    def test_a_folder_skips_json_without_a_schema_and_searches_subfolders(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "machine"))
            shutil.copy(REAL_FIXTURE, os.path.join(tmp, "machine", "run.json"))
            write({"benchmark": "ops", "rows": []}, tmp, "bench_ops.json")  # a device check leaves these
            with open(os.path.join(tmp, "broken.json"), "w", encoding="utf-8") as f:
                f.write("{not json")
            rc, out, err = run_script("validate.py", tmp)
            self.assertEqual(rc, 1, out + err)
            self.assertIn("machine/run.json: ok", out)
            self.assertNotIn("bench_ops", out + err)
            self.assertIn("broken.json", out + err)  # unreadable files are reported, not skipped

    def test_error_records_and_nonfinite_errors_are_allowed(self):
        def edit(doc):
            c = doc["cases"][0]
            c["error"] = "rank 1 setup: out of memory"
            c["conformance"].update(status="fail", failures=[])
            c["perf"] = {"time": {}, "metrics": {}}
            t = {"name": "out", "error": None, "base_error": 1e-3, "bound": 2.5e-2, "max_abs": None,
                 "nonfinite": 3, "count": 16, "pass": False}
            doc["cases"][1]["conformance"].update(status="fail", tensors=[t], failures=["out: 3 NaN/Inf"])
            summary = doc["run"]["summary"]
            summary.update({"pass": summary["pass"] - 2, "fail": 1, "error": 1})
        self.assertIsNone(first_problem(derived(REAL_FIXTURE, edit)))


class RejectsBrokenFiles(unittest.TestCase):
    """Each edit breaks one rule; the message names where."""

    CASES = [
        ("missing field", lambda d: d["cases"][3].pop("dtype"), "$.cases[3]", "'dtype' is a required property"),
        ("missing run field", lambda d: d["run"].pop("git_sha"), "$.run", "'git_sha' is a required property"),
        ("unknown status", lambda d: d["cases"][0]["conformance"].update(status="maybe"),
         "$.cases[0].conformance.status", "is not one of"),
        ("unknown dtype", lambda d: d["cases"][2].update(dtype="fp8"), "$.cases[2].dtype", "is not one of"),
        ("unknown device", lambda d: d["system"].update(device_kind="tpu"), "$.system.device_kind", "is not one of"),
        ("bandwidth in the wrong unit", lambda d: d["cases"][5]["perf"]["metrics"]["busbw_GBps"].update(unit="B/s"),
         "$.cases[5].perf.metrics.busbw_GBps.unit", "'GB/s' was expected"),
        ("metric without unit", lambda d: d["cases"][5]["perf"]["metrics"].update(tflops_per_rank={"value": 1.0}),
         "$.cases[5].perf.metrics.tflops_per_rank", "'unit' is a required property"),
        ("time without seconds", lambda d: d["cases"][1]["perf"]["time"]["run"].update(unit="ms"),
         "$.cases[1].perf.time.run.unit", "'s' was expected"),
        ("negative time", lambda d: d["cases"][1]["perf"]["time"]["run"].update(median=-1.0),
         "$.cases[1].perf.time.run.median", "less than the minimum"),
        ("unknown case field", lambda d: d["cases"][0].update(metric={}), "$.cases[0]",
         "Additional properties are not allowed"),
        ("pass with failure lines", lambda d: d["cases"][0]["conformance"].update(failures=["x: 1 wrong"]),
         "$.cases[0].conformance.failures", "is expected to be empty"),
        ("fail without a reason", lambda d: d["cases"][0]["conformance"].update(status="fail"),
         "$.cases[0].conformance.failures", "should be non-empty"),
        ("collectives without bytes", lambda d: d["cases"][0]["params"].pop("bytes"), "$.cases[0].params",
         "'bytes' is a required property"),
        ("timed collectives without busbw", lambda d: d["cases"][0]["perf"]["metrics"].pop("busbw_GBps"),
         "$.cases[0].perf.metrics", "'busbw_GBps' is a required property"),
        ("bad timestamp", lambda d: d["run"].update(start="yesterday"), "$.run.start", "does not match"),
        ("wrong schema name", lambda d: d.update(schema="sextant.result/2"), None, "not a sextant.result/1 document"),
        # Consistency rules (beyond the schema):
        ("sizes do not multiply to ranks", lambda d: d["cases"][-1]["parallel"].update(dp=3),
         "$.cases[", "must equal ranks"),
        ("duplicate id", lambda d: d["cases"][1].update(id=d["cases"][0]["id"]), "$.cases[1].id", "duplicate id"),
        ("summary disagrees", lambda d: d["run"]["summary"].update(fail=7), "$.run.summary.fail",
         "says 7 but the cases give 0"),
    ]

    def test_each_broken_file_is_rejected_with_its_path(self):
        schema = load_schema()
        with tempfile.TemporaryDirectory() as tmp:
            for what, edit, where, message in self.CASES:
                with self.subTest(what):
                    path = write(derived(REAL_FIXTURE, edit, keep=12), tmp, "broken.json")
                    ok, line = validate.check_file(path, schema)  # the line validate.py prints
                    self.assertFalse(ok, line)
                    self.assertIn("INVALID", line)
                    if where:
                        self.assertIn(f"at {where}", line)
                    self.assertIn(message, line)

    def test_a_broken_file_fails_the_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = write(derived(REAL_FIXTURE, lambda d: d["cases"][3].pop("dtype")), tmp, "missing.json")
            rc, out, _ = run_script("validate.py", path)
            self.assertEqual(rc, 1, out)
            self.assertIn("INVALID at $.cases[3]: 'dtype' is a required property", out)

    def test_one_bad_file_among_good_ones_fails_the_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = write(derived(REAL_FIXTURE, lambda d: d["cases"][0].pop("perf")), tmp, "bad.json")
            rc, out, _ = run_script("validate.py", REAL_FIXTURE, bad, SYNTHETIC_FIXTURE)
            self.assertEqual(rc, 1)
            self.assertEqual([l.split(": ")[1].split()[0] for l in out.splitlines()], ["ok", "INVALID", "ok"])

    def test_not_json_and_missing_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            garbage = os.path.join(tmp, "garbage.json")
            with open(garbage, "w") as f:
                f.write("{not json")
            rc, out, _ = run_script("validate.py", garbage, os.path.join(tmp, "absent.json"))
            self.assertEqual(rc, 1)
            self.assertIn("not JSON", out)
            self.assertIn("cannot read", out)

    def test_all_lists_every_problem(self):
        def edit(doc):
            doc["cases"][0].pop("dtype")
            doc["cases"][9]["conformance"].update(status="maybe")
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, _ = run_script("validate.py", "--all", write(derived(REAL_FIXTURE, edit), tmp, "two.json"))
            self.assertEqual(rc, 1)
            self.assertIn("(+1 more)", out)
            self.assertIn("$.cases[9].conformance.status", out)


class Fixtures(unittest.TestCase):
    def test_synthetic_fixtures_are_marked_and_up_to_date(self):
        import make_fixtures
        for name, doc in make_fixtures.fixtures().items():
            with open(os.path.join(helpers.FIXTURES, name), encoding="utf-8") as f:
                stored = f.read()
            self.assertEqual(stored, make_fixtures.dumps(make_fixtures.rounded(doc)),
                             f"{name} is stale: run python3 scripts/tests/make_fixtures.py")
            self.assertTrue(json.loads(stored)["run"]["synthetic"])
            self.assertIn("SYNTHETIC", json.loads(stored)["run"]["command"])

    def test_schema_is_valid_draft_2020_12(self):
        schema = load_schema()  # raises SchemaError otherwise
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")


if __name__ == "__main__":
    unittest.main()
