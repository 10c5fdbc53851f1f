"""compare.py as a CI gate, on candidates derived from a real run: an
unchanged file passes; a 20% slowdown, a conformance failure, an uncaught
planted fault and a missing case fail it; directions and thresholds hold;
stragglers and suspects are listed beside the gate, never deciding it."""
import re
import tempfile
import unittest

from helpers import (REAL_FIXTURE, SCREEN_FIXTURE, SYNTHETIC_FIXTURE, derived, load, recount, run_script,
                     stored_results, write)
from sextant_results.compare import HIGHER, INFO, LOWER, Thresholds, compare_docs, direction


def slow_down(case, factor):
    """The case as if it ran factor x slower: times up, rates down."""
    for stats in case["perf"]["time"].values():
        for k in ("median", "p10", "p90", "min", "max", "mean"):
            stats[k] *= factor
    for m in case["perf"]["metrics"].values():
        if isinstance(m, dict) and str(m.get("unit", "")).endswith("/s") and m.get("value"):
            m["value"] /= factor


def timed_case(doc, ranks=4):
    """Index of a multi-rank, out-of-place case with a non-zero busbw."""
    return next(i for i, c in enumerate(doc["cases"]) if c["ranks"] == ranks and not c["params"]["in_place"])


class Gate(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def candidate(self, edit, path=REAL_FIXTURE):
        return write(derived(path, edit), self.tmp.name, "candidate.json")

    def test_unchanged_file_passes(self):
        for path in (REAL_FIXTURE, SYNTHETIC_FIXTURE, SCREEN_FIXTURE):
            with self.subTest(path):
                rc, out, err = run_script("compare.py", path, path)
                self.assertEqual(rc, 0, out + err)
                self.assertIn("0 regressed", out)
                self.assertIn("verdict: PASS", out)

    def test_20_percent_slowdown_of_every_case_fails(self):
        rc, out, _ = run_script("compare.py", REAL_FIXTURE,
                                self.candidate(lambda d: [slow_down(c, 1.2) for c in d["cases"]]))
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSED beyond threshold", out)
        self.assertIn("+20.0%", out)      # times
        self.assertIn("-16.7%", out)      # bandwidths: 1/1.2
        self.assertIn("verdict: FAIL", out)

    def test_one_slow_case_is_named(self):
        doc = load(REAL_FIXTURE)
        i = timed_case(doc)
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, self.candidate(lambda d: slow_down(d["cases"][i], 1.2)))
        self.assertEqual(rc, 1, out)
        regressed = out.split("REGRESSED beyond threshold")[1].split("\n\n")[0]
        self.assertIn(doc["cases"][i]["id"], regressed)
        self.assertIn("busbw_GBps", regressed)
        self.assertIn("time.run", regressed)
        self.assertEqual(len({l.split("  ")[1] for l in regressed.splitlines()[3:]}), 1, regressed)

    def test_threshold_overrides_and_only(self):
        cand = self.candidate(lambda d: [slow_down(c, 1.2) for c in d["cases"]])
        self.assertEqual(run_script("compare.py", REAL_FIXTURE, cand, "--threshold", "25")[0], 0)
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, cand, "--threshold", "25", "--threshold", "busbw_GBps=10")
        self.assertEqual(rc, 1, out)
        self.assertNotIn("time.run", out.split("REGRESSED")[1].split("\n\n")[0])
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, cand, "--threshold", "time.*=25", "--only", "time.*")
        self.assertEqual(rc, 0, out)

    def test_speedup_is_an_improvement_not_a_failure(self):
        rc, out, _ = run_script("compare.py", REAL_FIXTURE,
                                self.candidate(lambda d: [slow_down(c, 1 / 1.2) for c in d["cases"]]))
        self.assertEqual(rc, 0, out)
        self.assertIn("improved beyond threshold", out)

    def test_conformance_failure_fails(self):
        def fail_one(doc):
            c = doc["cases"][7]
            c["conformance"].update(status="fail", wrong=12, failures=["all_reduce: 12 wrong elements on rank 1"])
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, self.candidate(fail_one))
        self.assertEqual(rc, 1, out)
        self.assertIn("CONFORMANCE (1)", out)
        self.assertIn(load(REAL_FIXTURE)["cases"][7]["id"] + ": conformance failed: all_reduce: 12 wrong", out)

    def test_error_record_fails(self):
        def break_one(doc):
            doc["cases"][3]["error"] = "rank 0 setup: out of memory"
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, self.candidate(break_one))
        self.assertEqual(rc, 1, out)
        self.assertIn("could not run: rank 0 setup: out of memory", out)

    def test_planted_faults_must_fail(self):
        """A fault case that fails is the check working; one that passes is the gate's problem."""
        def plant(status):
            def edit(doc):
                for d in (doc,):
                    c = d["cases"][0]
                    c["fault"] = "drop_rank"
                    c["conformance"]["status"] = status
                    c["conformance"]["failures"] = ["all_reduce: 1 wrong"] if status == "fail" else []
            return edit
        base = write(derived(REAL_FIXTURE, plant("fail")), self.tmp.name, "base.json")
        self.assertEqual(run_script("compare.py", base, base)[0], 0)
        rc, out, _ = run_script("compare.py", base, self.candidate(plant("pass")))
        self.assertEqual(rc, 1, out)
        self.assertIn("planted fault 'drop_rank' was not caught", out)

    def test_cases_on_one_side_are_listed(self):
        doc = load(REAL_FIXTURE)
        gone, new = doc["cases"][0]["id"], doc["cases"][1]["id"] + " (new)"

        def edit(d):
            del d["cases"][0]
            d["cases"][0]["params"]["bytes"] += 4096  # a different instance now
            d["cases"][0]["id"] += " (new)"
        cand = self.candidate(edit)
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, cand)
        self.assertEqual(rc, 1, out)
        self.assertIn("only in the baseline (2; fails the gate", out)
        self.assertIn(gone, out)
        self.assertIn("only in the candidate (1; new, not compared)", out)
        self.assertIn(new, out)
        self.assertEqual(run_script("compare.py", REAL_FIXTURE, cand, "--allow-missing")[0], 0)

    def test_dropped_check_fails(self):
        def skip(doc):
            doc["cases"][2]["conformance"].update(status="skip", tensors=[], failures=[])
            doc["cases"][2]["conformance"].pop("wrong")
            doc["cases"][2]["conformance"].pop("checked")
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, self.candidate(skip))
        self.assertEqual(rc, 1, out)
        self.assertIn("not checked in the candidate", out)

    def test_staged_timings_are_flagged(self):
        def staged(doc):
            doc["cases"][0]["perf"]["metrics"]["comm"] = {"backend": "mpi-staged", "overlap": False,
                                                          "timings_representative": False}
        rc, out, _ = run_script("compare.py", REAL_FIXTURE, self.candidate(staged))
        self.assertEqual(rc, 0, out)
        self.assertIn("warning: the candidate's timings do not represent the hardware", out)

    def test_bad_usage(self):
        rc, _, err = run_script("compare.py", REAL_FIXTURE, REAL_FIXTURE, "--threshold", "busbw_GBps=fast")
        self.assertEqual(rc, 2)
        self.assertIn("'fast' must be a percentage", err)
        rc, _, err = run_script("compare.py", REAL_FIXTURE, "/nonexistent.json")
        self.assertEqual(rc, 2)
        self.assertIn("cannot read", err)


def section(out, title):
    """The lines of one printed section, from its title to the blank line after it."""
    return out.split("\n" + title)[1].split("\n\n")[0]


def slow_rank_down(case, rank, factor):
    """The primary region as if rank ran factor x slower: its median and straggler_score."""
    ranks = next(iter(case["perf"]["time"].values()))["per_rank"]
    ranks["median"][rank] *= factor
    ranks["straggler_score"][rank] *= factor


class Findings(unittest.TestCase):
    """Stragglers and suspects: printed for the cases that have them, not gated."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.doc = load(SCREEN_FIXTURE)
        self.ids = {c["case"]: c["id"] for c in self.doc["cases"]}

    def test_the_screen_run_lists_its_suspects_and_stragglers(self):
        rc, out, err = run_script("compare.py", SCREEN_FIXTURE, SCREEN_FIXTURE)
        self.assertEqual(rc, 0, out + err)  # planted faults caught: the gate passes
        stragglers = section(out, "stragglers (1 of 3 cases with per-rank timings exceed straggler_score 1.5")
        self.assertIn(self.ids["links"], stragglers)
        self.assertRegex(stragglers, r"tournament +1\.8\d \(rank 1\) +1\.8\d \(rank 1\)")
        self.assertNotIn(self.ids["compute"], stragglers)
        suspects = section(out, "suspects named by the candidate (2, 0 not named by the baseline; not gated)")
        self.assertRegex(suspects, re.escape(self.ids["compute"]) + r" +sdc +rank 5 \(nodeB\) +output_hash .* yes +"
                         r"output_hash differs from the majority's")
        self.assertRegex(suspects, re.escape(self.ids["links"]) + r" +slow_link +ranks 1<->6 \(nodeA<->nodeB\) +"
                         r"p2p_bandwidth_GBps +0\.9 \(class median 4\.8\d*\) +yes +p2p_bandwidth_GBps below 0\.5")
        self.assertIn("verdict: PASS", out)

    def test_a_new_straggler_and_a_new_suspect_are_listed_but_do_not_fail_the_gate(self):
        def worse(doc):
            nodes = next(c for c in doc["cases"] if c["case"] == "nodes")
            slow_rank_down(nodes, 4, 2.0)
            nodes["perf"]["metrics"]["suspects"].append(
                {"kind": "slow_node", "node": 1, "host": "nodeB", "figure": "node_busbw_GBps", "value": 1.0,
                 "class_median": 3.1, "class": "4 ranks", "rule": "node_busbw_GBps below 0.75 x the class median"})
            doc["run"]["summary"]["suspects"] += 1
        cand = write(derived(SCREEN_FIXTURE, worse), self.tmp.name, "cand.json")
        rc, out, err = run_script("compare.py", SCREEN_FIXTURE, cand, "--only", "busbw*")
        self.assertEqual(rc, 0, out + err)
        stragglers = section(out, "stragglers (2 of 3")
        self.assertRegex(stragglers, re.escape(self.ids["nodes"]) + r" +all_reduce +1\.\d+ \(rank \d\) +2\.\d+ "
                         r"\(rank 4\)")
        self.assertLess(stragglers.find(self.ids["nodes"]), stragglers.find(self.ids["links"]))  # worst first
        suspects = section(out, "suspects named by the candidate (3, 1 not named by the baseline")
        self.assertRegex(suspects, re.escape(self.ids["nodes"]) + r" +slow_node +node 1 \(nodeB\) +node_busbw_GBps "
                         r"+1 \(class median 3\.1\) +no +node_busbw_GBps below 0\.75")

    def test_all_lists_every_case_with_per_rank_timings(self):
        rc, out, _ = run_script("compare.py", SCREEN_FIXTURE, SCREEN_FIXTURE, "--all")
        self.assertEqual(rc, 0, out)
        stragglers = section(out, "stragglers (1 of 3")
        for case_id in self.ids.values():
            self.assertIn(case_id, stragglers)

    def test_no_stragglers_without_per_rank_timings_on_both_sides(self):
        def old(doc):  # as written before per-rank timings existed
            for c in doc["cases"]:
                for t in c["perf"]["time"].values():
                    t.pop("per_rank")
                    t.pop("per_iteration", None)
        base = write(derived(SCREEN_FIXTURE, old), self.tmp.name, "old.json")
        rc, out, _ = run_script("compare.py", base, SCREEN_FIXTURE)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("stragglers", out)
        self.assertIn("suspects named by the candidate (2, 0 not named", out)
        result = compare_docs(load(REAL_FIXTURE), load(REAL_FIXTURE))
        self.assertEqual((result.stragglers, result.suspects), ([], []))
        self.assertNotIn("straggler", run_script("compare.py", REAL_FIXTURE, REAL_FIXTURE)[1])


@unittest.skipUnless(stored_results(), "no stored real runs under results/ (results/<machine>/*.json)")
class StoredRunsGate(unittest.TestCase):
    """The gate on every real run stored under results/: a run against itself
    passes; a copy with one planted regression fails and names the case."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    @staticmethod
    def busbw_case(doc):
        """Index of a multi-rank collectives case with a non-zero busbw."""
        return next((i for i, c in enumerate(doc["cases"]) if c["suite"] == "collectives" and c["ranks"] > 1
                     and (c["perf"]["metrics"].get("busbw_GBps") or {}).get("value")), None)

    def test_a_run_against_itself_passes_unless_it_failed(self):
        for path in stored_results():
            # The gate fails on an error, a failed check, or a planted fault that passed;
            # a planted fault that fails its check is what the run should show.
            failed = any(c.get("error") or (c["conformance"]["status"] == "fail") != bool(c.get("fault"))
                         for c in load(path)["cases"])
            with self.subTest(path):
                rc, out, err = run_script("compare.py", path, path)
                self.assertEqual(rc, 1 if failed else 0, out + err)
                self.assertIn("verdict: FAIL" if failed else "verdict: PASS", out)

    def test_busbw_20_percent_lower_fails_naming_the_case(self):
        for path in stored_results():
            doc = load(path)
            i = self.busbw_case(doc)
            if i is None:  # no collectives, or one-rank groups only (no busbw)
                continue

            def lower(d):
                d["cases"][i]["perf"]["metrics"]["busbw_GBps"]["value"] *= 0.8
            with self.subTest(path):
                rc, out, _ = run_script("compare.py", path, write(derived(path, lower), self.tmp.name, "cand.json"))
                self.assertEqual(rc, 1, out)
                regressed = out.split("REGRESSED beyond threshold")[1].split("\n\n")[0]
                self.assertIn(doc["cases"][i]["id"], regressed)
                self.assertIn("busbw_GBps", regressed)
                self.assertIn("-20.0%", regressed)

    def test_conformance_flipped_to_fail_fails_naming_the_case(self):
        for path in stored_results():
            doc = load(path)
            if not doc["cases"] or any(c["conformance"]["status"] != "pass" for c in doc["cases"]):
                continue  # nothing to flip, or already failing the gate
            i = next(k for k, c in enumerate(doc["cases"]) if c["suite"] == "step" or k == len(doc["cases"]) - 1)

            def flip(d):
                d["cases"][i]["conformance"].update(status="fail", failures=["loss: error 3e-2 > bound 1e-5"])
                recount(d)
            with self.subTest(path):
                rc, out, _ = run_script("compare.py", path, write(derived(path, flip), self.tmp.name, "cand.json"))
                self.assertEqual(rc, 1, out)
                self.assertIn("CONFORMANCE (1)", out)
                self.assertIn(doc["cases"][i]["id"] + ": conformance failed: loss: error 3e-2", out)


class Rules(unittest.TestCase):
    def test_directions(self):
        self.assertEqual(direction("busbw_GBps", "GB/s"), HIGHER)
        self.assertEqual(direction("tflops_per_rank", "TFLOP/s"), HIGHER)
        self.assertEqual(direction("tokens_per_s", "tokens/s"), HIGHER)
        self.assertEqual(direction("mfu", "1"), HIGHER)
        self.assertEqual(direction("time.fwd_bwd", "s"), LOWER)
        self.assertEqual(direction("makespan_s", "s"), LOWER)
        self.assertEqual(direction("bubble_measured_mean", "1"), LOWER)
        self.assertEqual(direction("load_balance", "1"), LOWER)
        for fact in ("busbw_factor", "bytes_sent_per_rank", "bubble_closed_form", "bubble_simulated",
                     "imbalance_expert", "peak_tflops", "flops_per_step"):
            self.assertEqual(direction(fact, "TFLOP/s" if fact == "peak_tflops" else "1"), INFO, fact)

    def test_thresholds_exact_then_glob_then_default(self):
        t = Thresholds(5, {"time.*": 20, "time.run": 30})
        self.assertEqual((t("time.run"), t("time.fwd"), t("busbw_GBps")), (30, 20, 5))

    def test_facts_that_change_are_shown_not_gated(self):
        base = load(REAL_FIXTURE)
        cand = derived(REAL_FIXTURE, lambda d: d["cases"][0]["perf"]["metrics"]["busbw_factor"].update(value=9.0))
        result = compare_docs(base, cand)
        self.assertFalse(result.failed)
        self.assertEqual([(c.metric, c.verdict) for c in result.of("changed")], [("busbw_factor", "changed")])

    def test_min_time_turns_short_cases_into_noise(self):
        base = load(REAL_FIXTURE)
        cand = derived(REAL_FIXTURE, lambda d: [slow_down(c, 1.2) for c in d["cases"]])
        result = compare_docs(base, cand, min_time=1.0)  # every case is shorter than a second
        self.assertFalse(result.failed)
        self.assertFalse(result.of("regressed"))
        self.assertTrue(result.of("noise"))


if __name__ == "__main__":
    unittest.main()
