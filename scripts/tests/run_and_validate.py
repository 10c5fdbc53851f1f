#!/usr/bin/env python3
"""End to end on the real binary: a tiny collectives run on 2 ranks writes a
results file that validates against results/schema.json, a JUnit file with
one test case per record, and a report; compare.py passes it against itself.

    run_and_validate.py SEXTANT MPIEXEC        (ctest passes both)
"""
import glob
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

from helpers import load, run_script

SEXTANT = MPIEXEC = None


class RealRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
        cls.junit = os.path.join(cls.tmp.name, "junit.xml")
        cmd = [MPIEXEC, "-np", "2", "--oversubscribe", SEXTANT, "run", "collectives", "--profile", "ci", "-q",
               "-o", os.path.join(cls.tmp.name, "results"), "--junit", cls.junit]
        cls.sextant = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        cls.files = glob.glob(os.path.join(cls.tmp.name, "results", "*.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def results_file(self):
        self.assertEqual(self.sextant.returncode, 0, self.sextant.stdout + self.sextant.stderr)
        self.assertEqual(len(self.files), 1, self.files)
        return self.files[0]

    def test_run_writes_one_valid_file(self):
        rc, out, err = run_script("validate.py", self.results_file())
        self.assertEqual(rc, 0, out + err)
        doc = load(self.files[0])
        self.assertEqual(sorted({c["ranks"] for c in doc["cases"]}), [1, 2])
        self.assertEqual(doc["system"]["world_size"], 2)

    def test_junit_has_one_testcase_per_record(self):
        records = load(self.results_file())["cases"]
        cases = ET.parse(self.junit).getroot().findall("./testsuite/testcase")
        self.assertEqual(len(cases), len(records))
        self.assertEqual({c.get("name") for c in cases}, {r["id"] for r in records})

    def test_report_and_compare_read_it(self):
        out = os.path.join(self.tmp.name, "report")
        rc, stdout, stderr = run_script("report.py", self.results_file(), "-o", out)
        self.assertEqual(rc, 0, stdout + stderr)
        self.assertTrue(os.path.isfile(os.path.join(out, "collectives_busbw_f32.png")))
        rc, stdout, _ = run_script("compare.py", self.files[0], self.files[0])
        self.assertEqual(rc, 0, stdout)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: run_and_validate.py SEXTANT MPIEXEC")
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:])
