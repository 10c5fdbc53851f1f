"""validate.py and results/schema.json: real files pass; each kind of broken
file fails with the JSON path of the problem; the synthetic fixtures are
valid and up to date; per-rank figures and suspects are checked against the
case's ranks and the run summary."""
import json
import os
import shutil
import tempfile
import unittest

import helpers
import validate
from helpers import REAL_FIXTURE, SCREEN_FIXTURE, SYNTHETIC_FIXTURE, derived, load, run_script, write
from sextant_results.schema import load_schema, validate_document


def first_problem(doc):
    problems = validate_document(doc, load_schema())
    return problems[0] if problems else None


class AcceptsRealFiles(unittest.TestCase):
    def test_real_and_synthetic_files_are_valid(self):
        paths = helpers.real_results() + [SYNTHETIC_FIXTURE, SCREEN_FIXTURE]
        rc, out, err = run_script("validate.py", *paths)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(out.splitlines()), len(paths), out)
        for line in out.splitlines():
            self.assertRegex(line, r": ok \(\d+ cases: ")

    def test_a_folder_is_read_file_by_file(self):
        rc, out, _ = run_script("validate.py", os.path.dirname(REAL_FIXTURE))
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(out.splitlines()), 3)

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


def case_index(doc, name):
    return next(i for i, c in enumerate(doc["cases"]) if (c["suite"], c["case"]) == ("screen", name))


def per_rank_of(doc, name):
    """The per_rank figures of a screen case's primary region."""
    return next(iter(doc["cases"][case_index(doc, name)]["perf"]["time"].values()))["per_rank"]


class ScreenFiles(unittest.TestCase):
    """The screen run: per-rank timings, per-iteration samples, link matrix
    and suspects must fit the case's ranks; the summary counts the suspects."""

    def test_the_screen_fixture_is_valid_and_counts_its_suspects(self):
        doc = load(SCREEN_FIXTURE)
        self.assertEqual(doc["run"]["summary"]["suspects"], 2)
        self.assertEqual(sorted(s["kind"] for c in doc["cases"] for s in c["perf"]["metrics"]["suspects"]),
                         ["sdc", "slow_link"])
        self.assertTrue(any("per_iteration" in t for c in doc["cases"] for t in c["perf"]["time"].values()))
        self.assertTrue(all("per_rank" in t for c in doc["cases"] for t in c["perf"]["time"].values()))
        ok, line = validate.check_file(SCREEN_FIXTURE, load_schema())
        self.assertTrue(ok, line)
        self.assertIn("; 2 suspects)", line)

    def test_old_files_without_the_new_fields_stay_valid(self):
        def strip(doc):
            doc["run"]["summary"].pop("suspects")
            for c in doc["cases"]:
                c["perf"]["metrics"].pop("suspects")
                for t in c["perf"]["time"].values():
                    t.pop("per_rank")
                    t.pop("per_iteration", None)
        self.assertIsNone(first_problem(derived(SCREEN_FIXTURE, strip)))

    CASES = [
        ("per_rank array of the wrong length", lambda d: per_rank_of(d, "compute")["median"].pop(),
         "$.cases[0].perf.time.gemm.per_rank.median", "has 7 entries but the case has ranks 8"),
        ("per_rank without straggler_score", lambda d: per_rank_of(d, "links").pop("straggler_score"),
         "$.cases[1].perf.time.tournament.per_rank", "'straggler_score' is a required property"),
        ("wait share above 1", lambda d: per_rank_of(d, "links")["wait_share"].__setitem__(0, 1.5),
         "$.cases[1].perf.time.tournament.per_rank.wait_share[0]", "greater than the maximum"),
        ("per_iteration with a rank missing",
         lambda d: d["cases"][2]["perf"]["time"]["all_reduce"]["per_iteration"]["by_rank"].pop(),
         "$.cases[2].perf.time.all_reduce.per_iteration.by_rank", "has 7 entries but the case has ranks 8"),
        ("per_iteration row of the wrong length",
         lambda d: d["cases"][2]["perf"]["time"]["all_reduce"]["per_iteration"]["by_rank"][3].append(1e-3),
         "$.cases[2].perf.time.all_reduce.per_iteration.by_rank[3]", "has 6 entries but per_iteration.max has 5"),
        ("wrong summary suspects", lambda d: d["run"]["summary"].update(suspects=3), "$.run.summary.suspects",
         "says 3 but the cases name 2"),
        ("negative summary suspects", lambda d: d["run"]["summary"].update(suspects=-1), "$.run.summary.suspects",
         "less than the minimum"),
        ("unknown suspect kind", lambda d: d["cases"][0]["perf"]["metrics"]["suspects"][0].update(kind="slow_disk"),
         "$.cases[0].perf.metrics.suspects[0].kind", "is not one of"),
        ("slow_link without its ranks", lambda d: d["cases"][1]["perf"]["metrics"]["suspects"][0].pop("ranks"),
         "$.cases[1].perf.metrics.suspects[0]", "'ranks' is a required property"),
        ("sdc without the element", lambda d: d["cases"][0]["perf"]["metrics"]["suspects"][0].pop("first_index"),
         "$.cases[0].perf.metrics.suspects[0]", "'first_index' is a required property"),
        ("suspect beyond the group", lambda d: d["cases"][0]["perf"]["metrics"]["suspects"][0].update(rank=8),
         "$.cases[0].perf.metrics.suspects[0]", "names rank 8 but the case has ranks 8"),
        ("tflops per rank short", lambda d: d["cases"][0]["perf"]["metrics"]["tflops_per_rank"].pop(),
         "$.cases[0].perf.metrics.tflops_per_rank", "has 7 entries"),
        ("link matrix row short", lambda d: d["cases"][1]["perf"]["metrics"]["link_matrix"]["latency_us"][2].pop(),
         "$.cases[1].perf.metrics.link_matrix.latency_us[2]", "has 7 entries"),
        ("link class unknown",
         lambda d: d["cases"][1]["perf"]["metrics"]["link_matrix"]["class"][0].__setitem__(1, "same_rack"),
         "$.cases[1].perf.metrics.link_matrix.class[0][1]", "is not one of"),
        ("node busbw in text", lambda d: d["cases"][2]["perf"]["metrics"]["node_busbw_GBps"].__setitem__(0, "fast"),
         "$.cases[2].perf.metrics.node_busbw_GBps[0]", "is not of type 'number'"),
    ]

    def test_each_broken_screen_file_is_rejected_with_its_path(self):
        schema = load_schema()
        doc = load(SCREEN_FIXTURE)
        self.assertEqual([case_index(doc, n) for n in ("compute", "links", "nodes")], [0, 1, 2])  # as CASES assume
        with tempfile.TemporaryDirectory() as tmp:
            for what, edit, where, message in self.CASES:
                with self.subTest(what):
                    ok, line = validate.check_file(write(derived(SCREEN_FIXTURE, edit), tmp, "broken.json"), schema)
                    self.assertFalse(ok, line)
                    self.assertIn(f"INVALID at {where}: ", line)
                    self.assertIn(message, line)

    def test_qualification_lists_suspects_with_their_case(self):
        def qualify(with_case):
            def edit(doc):
                named = [dict(s, case=c["id"]) if with_case else dict(s)
                         for c in doc["cases"] for s in c["perf"]["metrics"]["suspects"]]
                doc["qualification"] = {"verdict": "FAIL", "counts": {"pass": 0, "fail": 1, "not_judged": 0},
                                        "expectations": {"path": "x.toml", "name": "x", "version": "1"},
                                        "criteria": [], "suspects": named}
            return edit
        self.assertIsNone(first_problem(derived(SCREEN_FIXTURE, qualify(True))))
        self.assertEqual(first_problem(derived(SCREEN_FIXTURE, qualify(False))),
                         ("$.qualification.suspects[0]", "'case' is a required property"))


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
