#!/usr/bin/env python3
"""The screen names exactly the planted rank, link or node, and nobody in a
clean run.

Each planted screen fault (suites/screen/screen.h) runs at 4 and at 8 ranks
with the planted rank chosen anew each run; the run must exit 1 and its
results must name exactly one suspect: the planted rank (slow_rank), the
planted pair (slow_link), or the planted rank with its tensor and first
differing element (bitflip). Clean runs at 8 ranks must exit 0 and name
nobody; a link slow only in its tournament round (slow_round) names nobody,
since measured again alone it is healthy; two ranks whose bits differ name
nobody (no majority) but fail. A rank the group does not have is refused
with exit 2.

    screen_test.py SEXTANT MPIEXEC [RUNS]    (RUNS per fault and rank count, default 3)
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

SEXTANT = MPIEXEC = None
RUNS = 3


def run_screen(ranks, *args):
    """(exit status, results document or None, stdout) of one screen run."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [MPIEXEC, "--oversubscribe", "-np", str(ranks), SEXTANT, "run", "screen", "--profile", "ci",
               "--ranks", str(ranks), "--iters", "5", "--warmup", "1", "-q", "-o", out, *args]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OPENBLAS_NUM_THREADS="1")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        files = glob.glob(os.path.join(out, "*.json"))
        doc = None
        if files:
            with open(files[0]) as f:
                doc = json.load(f)
        return p.returncode, doc, p.stdout + p.stderr


def digest(doc):
    """The figures the suspects were judged on, for a failure message."""
    keys = ("tflops_per_rank", "tflops_attention_per_rank", "node_busbw_GBps")
    out = []
    for case in doc["cases"]:
        m = case.get("perf", {}).get("metrics", {})
        out += [f"{case['case']} {k} {m[k]}" for k in keys if k in m]
        if "link_matrix" in m:
            out.append(f"{case['case']} bandwidth {m['link_matrix']['bandwidth_GBps']}")
    return "\n".join(out)


def suspects(doc):
    found = []
    for case in doc["cases"]:
        found += case.get("perf", {}).get("metrics", {}).get("suspects", [])
    return found


class PlantedFaults(unittest.TestCase):
    def planted(self, fault, ranks, run):
        # A different rank (and peer) each run, so a fixed answer cannot pass.
        rank = (run * 3 + 1) % ranks
        peer = (rank + 1 + run) % ranks
        if peer == rank:
            peer = (rank + 1) % ranks
        args = ["--fault", fault, "--set", f"fault_rank={rank}"]
        if fault == "slow_link":
            args += ["--set", f"fault_peer={peer}"]
        status, doc, output = run_screen(ranks, *args)
        self.assertEqual(status, 1, output)
        named = suspects(doc)
        self.assertEqual(len(named), 1, f"{fault} at {ranks} ranks, run {run}: {named}\n{digest(doc)}\n{output}")
        s = named[0]
        self.assertIn(f"# suspect: {s['kind']}", output)
        self.assertEqual(doc["run"]["summary"]["suspects"], 1)
        if fault == "slow_link":
            self.assertEqual(s["kind"], "slow_link")
            self.assertEqual(sorted(s["ranks"]), sorted([rank, peer]))
        elif fault == "slow_rank":
            self.assertEqual((s["kind"], s["rank"]), ("slow_rank", rank))
            self.assertLess(s["value"], s["class_median"])
        else:
            self.assertEqual((s["kind"], s["rank"], s["tensor"]), ("sdc", rank, "gemm.c"))
            n = next(c for c in doc["cases"] if c["case"] == "compute")["params"]["n"]
            self.assertEqual((s["differing_elements"], s["first_index"]), (1, n * n // 3))
            self.assertEqual(s["repeats_bad"], s["repeats"])
        self.assertTrue(s["host"] and s["rule"], s)

    def test_each_fault_names_exactly_the_planted_part(self):
        for fault in ("slow_rank", "slow_link", "bitflip"):
            for ranks in (4, 8):
                for run in range(RUNS):
                    with self.subTest(fault=fault, ranks=ranks, run=run):
                        self.planted(fault, ranks, run)

    def test_clean_runs_name_nobody(self):
        for run in range(RUNS):
            status, doc, output = run_screen(8)
            self.assertEqual(suspects(doc), [], f"{digest(doc)}\n{output}")
            self.assertEqual(status, 0, output)
            for case in doc["cases"]:
                per_rank = case["perf"]["time"][next(iter(case["perf"]["time"]))]["per_rank"]
                self.assertEqual(len(per_rank["straggler_score"]), 8)

    def test_a_link_slow_only_in_its_round_names_nobody(self):
        # slow_round delays the pair in the tournament only: the tournament
        # must see the link slow enough to name, and the re-test alone clear it.
        for ranks, (rank, peer) in ((4, (2, 0)), (8, (3, 6))):
            with self.subTest(ranks=ranks):
                status, doc, output = run_screen(ranks, "--fault", "slow_round", "--set", f"fault_rank={rank}",
                                                 "--set", f"fault_peer={peer}")
                self.assertEqual(suspects(doc), [], f"{digest(doc)}\n{output}")
                self.assertEqual(status, 0, output)
                matrix = next(c for c in doc["cases"] if c["case"] == "links")["perf"]["metrics"]["link_matrix"]
                others = sorted(v for a, row in enumerate(matrix["bandwidth_GBps"]) for b, v in enumerate(row)
                                if a != b and {a, b} != {rank, peer})
                median = others[len(others) // 2]
                self.assertIn(sorted([rank, peer]), matrix["retested"], matrix)
                for a, b in ((rank, peer), (peer, rank)):
                    self.assertLess(matrix["bandwidth_GBps"][a][b], 0.2 * median, matrix)
                    self.assertGreater(matrix["retest_bandwidth_GBps"][a][b], 0.2 * median, matrix)

    def test_two_ranks_that_disagree_name_nobody(self):
        # One of two ranks flips a bit: there is no majority to say which.
        status, doc, output = run_screen(2, "--fault", "bitflip", "--set", "fault_rank=0")
        self.assertEqual(status, 1, output)
        self.assertEqual(suspects(doc), [], output)
        failures = next(c for c in doc["cases"] if c["case"] == "compute")["conformance"]["failures"]
        self.assertTrue(any("no strict majority" in f for f in failures), failures)

    def test_a_rank_outside_the_group_is_refused(self):
        status, doc, output = run_screen(4, "--fault", "slow_rank", "--set", "fault_rank=4")
        self.assertEqual(status, 2, output)
        self.assertIsNone(doc)
        self.assertIn("fault_rank 4 must name a rank of the group", output)


if __name__ == "__main__":
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        RUNS = int(sys.argv[3])
    unittest.main(argv=sys.argv[:1], verbosity=2)
