#!/usr/bin/env python3
"""End to end on real tokens: README.md becomes a Megatron indexed dataset
(preprocess_data.py), and step/train trains a tiny dense model on it for 20
steps on 2 ranks (dp 2, ZeRO, gradient buckets reduced during the backward,
parameters gathered during the next forward), checked against the float64
reference at every step. The loss must fall clearly, the results must
validate and record the dataset (sha256 of both files, tokens, documents)
and the communication split with and without overlap.

    run_step_on_text.py SEXTANT MPIEXEC        (ctest passes both)
"""
import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

from helpers import REPO, load, run_script

SEXTANT = MPIEXEC = None
STEPS = 20


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class TrainsOnText(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.prefix = os.path.join(cls.tmp.name, "readme")
        cls.preprocess = run_script("preprocess_data.py", "--input", os.path.join(REPO, "README.md"),
                                    "--output-prefix", cls.prefix)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
        # lr 1e-2: Adam learns the byte statistics within 20 steps at these sizes.
        cmd = [MPIEXEC, "-np", "2", "--oversubscribe", SEXTANT, "run", "step/train", "--profile", "ci", "-q",
               "--dp", "2", "--set", f"data={cls.prefix}", "--set", "vocab=384", "--set", "moe_every=0",
               "--set", f"steps={STEPS}", "--set", "lr=0.01", "--set", "zero=true",
               "--set", "overlap_grad_reduce=true", "--set", "overlap_param_gather=true",
               "--warmup", "1", "--iters", "2", "-o", os.path.join(cls.tmp.name, "results")]
        cls.sextant = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        cls.files = glob.glob(os.path.join(cls.tmp.name, "results", "*.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def record(self):
        self.assertEqual(self.preprocess[0], 0, self.preprocess[1] + self.preprocess[2])
        self.assertEqual(self.sextant.returncode, 0, self.sextant.stdout + self.sextant.stderr)
        self.assertEqual(len(self.files), 1, self.files)
        cases = load(self.files[0])["cases"]
        self.assertEqual(len(cases), 1)
        return cases[0]

    def test_every_step_matches_the_reference(self):
        case = self.record()
        self.assertEqual(case["conformance"]["status"], "pass")
        checked = {t["name"].split(".")[0] for t in case["conformance"]["tensors"]}
        self.assertEqual(checked, {f"step{k}" for k in range(1, STEPS + 1)})

    def test_the_loss_falls(self):
        losses = self.record()["perf"]["metrics"]["losses"]
        self.assertEqual(len(losses), STEPS)
        print("losses:", " ".join(f"{x:.3f}" for x in losses))
        self.assertLess(losses[-1], 0.8 * losses[0], losses)

    def test_the_results_record_the_dataset(self):
        d = self.record()["perf"]["metrics"]["dataset"]
        self.assertEqual(d["prefix"], self.prefix)
        self.assertEqual(d["idx_sha256"], sha256(self.prefix + ".idx"))
        self.assertEqual(d["bin_sha256"], sha256(self.prefix + ".bin"))
        self.assertEqual(d["tokens"] * 2, os.path.getsize(self.prefix + ".bin"))  # uint16 tokens
        self.assertGreater(d["documents"], 10)

    def test_the_results_record_communication_with_and_without_overlap(self):
        metrics = self.record()["perf"]["metrics"]
        for name in ("comm_exposed_fraction", "dp_comm_exposed_fraction", "dp_comm_exposed_fraction_without_overlap"):
            self.assertIn(name, metrics)
        for split in ("comm_by_dim", "comm_by_dim_without_overlap"):
            self.assertEqual(set(metrics[split]), {"tp", "cp", "ep", "dp", "pp", "all"})
            self.assertGreater(metrics[split]["dp"]["comm_s"], 0)
        self.assertTrue(metrics["dp_overlap"]["overlap_grad_reduce"])
        self.assertEqual(metrics["dp_overlap"]["buckets"], 4 + 2)  # one per layer, embedding, head
        rc, out, err = run_script("validate.py", self.files[0])
        self.assertEqual(rc, 0, out + err)


if __name__ == "__main__":
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
