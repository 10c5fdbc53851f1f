#!/usr/bin/env python3
"""End to end on the real binary: sextant --dump on 1 and 2 ranks, then
recheck_dump.py recomputes every covered case in numpy float64 and must agree
with sextant's reference and with the errors its results file records; under
a planted softmax-gradient fault the errors it reports for dq and dk are
large, because it measures against its own math.

    run_and_recheck.py SEXTANT MPIEXEC        (ctest passes both)
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from helpers import run_script

SEXTANT = MPIEXEC = None
COVERED = ["ops/attention", "ops/layernorm", "ops/gelu", "ops/cross_entropy", "attention/p2p", "attention/dynamic_cp",
           "moe/layer"]


def sextant_run(folder, *args):
    """Runs sextant on 2 ranks with --dump folder/d and -o folder/o; (process, results file or None)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
    cmd = [MPIEXEC, "-np", "2", "--oversubscribe", SEXTANT, "run", *args, "--profile", "ci", "--ranks", "1,2",
           "--dtype", "f32", "--iters", "0", "--warmup", "0", "-q",
           "--dump", os.path.join(folder, "d"), "-o", os.path.join(folder, "o")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    files = glob.glob(os.path.join(folder, "o", "*.json"))
    return p, files[0] if len(files) == 1 else None


def recheck(folder, results):
    """(exit status, stdout + stderr, its --json report) of recheck_dump.py on folder/d."""
    report = os.path.join(folder, "recheck.json")
    rc, out, err = run_script("recheck_dump.py", os.path.join(folder, "d"), "--results", results, "--json", report)
    doc = {"cases": []}
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
    return rc, out + err, doc


class Recheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.clean = os.path.join(cls.tmp.name, "clean")
        # ops/softmax is not re-implemented: it must be listed as skipped, not failed.
        cls.run_clean, cls.results_clean = sextant_run(cls.clean, *COVERED, "ops/softmax")
        cls.spot = os.path.join(cls.tmp.name, "spot")
        cls.run_spot, cls.results_spot = sextant_run(cls.spot, "attention/p2p", "--set", "reference=spot")
        cls.faulty = os.path.join(cls.tmp.name, "fault")
        cls.run_faulty, cls.results_faulty = sextant_run(cls.faulty, "ops/attention", "attention/p2p",
                                                         "--fault", "attention_backward_softmax_grad")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_recheck_agrees_with_sextant(self):
        self.assertEqual(self.run_clean.returncode, 0, self.run_clean.stdout + self.run_clean.stderr)
        rc, out, doc = recheck(self.clean, self.results_clean)
        self.assertEqual(rc, 0, out)
        rechecked = {c["id"].split()[0] for c in doc["cases"] if c["status"] == "rechecked"}
        self.assertEqual(rechecked, set(COVERED))
        self.assertEqual({c["id"].split()[0] for c in doc["cases"] if c["status"] == "skipped"}, {"ops/softmax"})
        self.assertEqual({c["id"].split()[1] for c in doc["cases"]}, {"ranks=1", "ranks=2"})
        tensors = [t for c in doc["cases"] for t in c["tensors"]]
        self.assertGreater(len(tensors), 100)
        for t in tensors:
            self.assertLess(t["own_vs_ref"], 1e-12, t)
            if t.get("exact"):  # the routing table: the same experts and drops everywhere
                self.assertEqual((t["own_vs_ref"], t["dist"], t["base"]), (0, 0, 0), t)
                continue
            self.assertIsNotNone(t["recorded_dist"], t)
        names = {t["name"] for c in doc["cases"] for t in c["tensors"]}
        self.assertTrue({"routing", "static.dq", "dynamic.dv"} <= names, names)
        windowed = [c for c in doc["cases"] if " window=" in c["id"] and c["status"] == "rechecked"]
        self.assertTrue(windowed, "the sweep's sliding-window cases are rechecked")
        mla = {c["id"].split()[0] for c in doc["cases"] if " v_head_dim=" in c["id"] and c["status"] == "rechecked"}
        self.assertEqual(mla, {"ops/attention", "attention/p2p", "attention/dynamic_cp"}, "MLA's head dims are rechecked")
        padded = [c for c in doc["cases"] if " tail_padding=" in c["id"] and c["status"] == "rechecked"]
        self.assertTrue(padded, "the sweep's padded packed streams are rechecked")
        windowed_packed = {c["id"].split()[0] for c in doc["cases"] if " window=" in c["id"] and " seq_lens" in c["id"]
                           and c["status"] == "rechecked"}
        self.assertEqual(windowed_packed, {"attention/p2p", "attention/dynamic_cp"}, "windows over packed sequences")
        two_sided = {c["id"].split()[0] for c in doc["cases"] if " window_right=" in c["id"] and " causal=false" in c["id"]
                     and c["status"] == "rechecked"}
        self.assertEqual(two_sided, {"ops/attention", "attention/p2p"}, "two-sided windows without a causal mask")

    def test_spot_rows_are_rechecked(self):
        self.assertEqual(self.run_spot.returncode, 0, self.run_spot.stdout + self.run_spot.stderr)
        rc, out, doc = recheck(self.spot, self.results_spot)
        self.assertEqual(rc, 0, out)
        self.assertTrue(doc["cases"])
        for case in doc["cases"]:
            self.assertEqual(case["status"], "rechecked", case)
            self.assertEqual({t["name"] for t in case["tensors"]}, {"out", "lse", "dq"}, case["id"])
            for t in case["tensors"]:
                self.assertLess(t["own_vs_ref"], 1e-12, (case["id"], t))

    def test_planted_fault_shows_against_its_own_math(self):
        self.assertEqual(self.run_faulty.returncode, 1, self.run_faulty.stdout + self.run_faulty.stderr)
        rc, out, doc = recheck(self.faulty, self.results_faulty)
        self.assertEqual(rc, 0, out)  # sextant's reference is still right, and its errors are the ones recorded
        for case in doc["cases"]:
            t = {x["name"]: x for x in case["tensors"]}
            if "sk=1 " in case["id"]:
                continue  # one key: the softmax gradient is zero, right or wrong
            for name in ("dq", "dk") if "dk" in t else ("dq",):
                self.assertGreater(min(t[name]["dist"], t[name]["base"]), 1e-2, (case["id"], name))
            self.assertLess(t["out"]["dist"], 1e-5, case["id"])  # the forward is untouched

    def test_a_wrong_reference_fails_the_recheck(self):
        self.assertIsNotNone(self.results_clean)
        copy = os.path.join(self.tmp.name, "corrupted")
        shutil.copytree(self.clean, copy)
        folder = sorted(glob.glob(os.path.join(copy, "d", "attention_p2p_ranks_2_*")))[0]
        ref = np.load(os.path.join(folder, "dk.ref.npy"))
        ref.flat[0] += 1e-6 * np.linalg.norm(ref)
        np.save(os.path.join(folder, "dk.ref.npy"), ref)
        rc, out, _ = recheck(copy, self.results_clean)
        self.assertEqual(rc, 1, out)
        self.assertIn("dk: sextant's reference differs", out)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: run_and_recheck.py SEXTANT MPIEXEC")
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:])
