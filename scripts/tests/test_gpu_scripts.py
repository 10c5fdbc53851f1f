"""The device-check scripts on inputs made here (no GPU needed): the summary's
gemm ratio, memory and attention rows and suite verdicts; the attention
driver's reading of our benchmark; device_check.sh's refusals of bad use."""
import json
import os
import subprocess
import tempfile
import unittest

from helpers import REAL_FIXTURE, SCRIPTS, load

import bench_attention
import gpu_summary

BENCH = {"benchmarks": [
    {"name": "gemm_bf16/wrapper/8192/min_time:0.300/manual_time", "TFLOP/s": 760.0},
    {"name": "gemm_bf16/cublas_direct/8192/min_time:0.300/manual_time", "TFLOP/s": 800.0},
    {"name": "gemm_bf16/wrapper/1024/min_time:0.300/manual_time", "error_occurred": True,
     "error_message": "no CUDA device visible: GPU benchmark not run"},
    {"name": "gemm_bf16/cublas_direct/1024/min_time:0.300/manual_time", "error_occurred": True,
     "error_message": "no CUDA device visible: GPU benchmark not run"},
    {"name": "memory/copy_d2d/32768/4096/min_time:0.200/manual_time", "GB/s": 4300.0},
    {"name": "memory/layernorm_fwd/32768/4096/min_time:0.200/manual_time", "error_occurred": True,
     "error_message": "layernorm_fwd: needs host tensors"},
    {"name": "attention_bf16/fwd/causal/4096/min_time:0.200/manual_time", "TFLOP/s": 300.0},
    {"name": "attention_bf16/fwd_bwd/full/8192/min_time:0.200/manual_time", "TFLOP/s": 250.0},
    {"name": "attention_bf16/fwd/full/16384/min_time:0.200/manual_time", "error_occurred": True,
     "error_message": "attention block on CUDA: device tensor"},
]}


class Summary(unittest.TestCase):
    def test_gemm_ratio_per_size_and_errors_kept(self):
        rows = {r["size"]: r for r in gpu_summary.gemm_rows(BENCH)}
        self.assertAlmostEqual(rows[8192]["ratio"], 0.95)
        self.assertIsNone(rows[1024]["ratio"])
        self.assertIn("no CUDA device", rows[1024]["error"])

    def test_memory_rows_carry_bandwidth_or_the_reason(self):
        rows = {r["op"]: r for r in gpu_summary.memory_rows(BENCH)}
        self.assertEqual(rows["copy_d2d"]["GBps"], 4300.0)
        self.assertIsNone(rows["layernorm_fwd"]["GBps"])
        self.assertIn("host tensors", rows["layernorm_fwd"]["error"])

    def test_suite_verdicts_from_a_real_results_file(self):
        with tempfile.TemporaryDirectory() as d:
            doc = load(REAL_FIXTURE)
            doc["cases"][0]["conformance"]["status"] = "fail"
            with open(os.path.join(d, "run.json"), "w") as f:
                json.dump(doc, f)
            (row,) = gpu_summary.suite_rows(d)
            self.assertEqual(row["failed"], [doc["cases"][0]["id"]])
            self.assertEqual(row["backends"], ["mpi"])


    def test_step_rows_carry_mfu_and_model_size(self):
        with tempfile.TemporaryDirectory() as d:
            doc = load(REAL_FIXTURE)
            train = dict(doc["cases"][0], suite="step", case="train", dtype="bf16",
                         params={"layers": 16, "hidden": 2048, "seq": 2048, "vocab": 32768})
            train["perf"] = {"time": {}, "metrics": {"mfu": {"value": 0.41, "unit": "1"},
                                                     "tokens_per_s": {"value": 1.5e4, "unit": "tokens/s"}}}
            doc["cases"] = [train, dict(train, fault="no_cp_grad_reduce"), doc["cases"][1]]
            with open(os.path.join(d, "run.json"), "w") as f:
                json.dump(doc, f)
            (row,) = gpu_summary.step_rows(d)  # not the planted fault, not the collectives case
            self.assertEqual(row["mfu"], 0.41)
            self.assertEqual(row["dtype"], "bf16")
            self.assertEqual(row["model"]["hidden"], 2048)
            self.assertIsNone(row["tflops_per_rank"])


class AttentionDriver(unittest.TestCase):
    def test_reads_our_entries_and_skips_errors(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(BENCH, f)
            f.flush()
            ours, reason = bench_attention.read_ours(f.name)
        self.assertIsNone(reason)
        self.assertEqual(ours, {("fwd", True, 4096): 300.0, ("fwd_bwd", False, 8192): 250.0})

    def test_says_why_when_ours_is_missing(self):
        ours, reason = bench_attention.read_ours("")
        self.assertEqual(ours, {})
        self.assertTrue(reason)

    def test_flops_follow_design(self):
        full = bench_attention.attention_flops(1, 1024, 2, 64, False, "fwd")
        self.assertEqual(full, 4.0 * 1024 * 1024 * 2 * 64)
        self.assertEqual(bench_attention.attention_flops(1, 1024, 2, 64, True, "fwd"), full / 2)
        self.assertEqual(bench_attention.attention_flops(1, 1024, 2, 64, False, "fwd_bwd"), 3.5 * full)


class DeviceCheck(unittest.TestCase):
    def run_check(self, *args):
        return subprocess.run(["bash", os.path.join(SCRIPTS, "device_check.sh"), *args], capture_output=True,
                              text=True, timeout=60)

    def test_bad_use_exits_2(self):
        self.assertEqual(self.run_check().returncode, 2)
        with tempfile.TemporaryDirectory() as d:
            p = self.run_check(d, "--frobnicate")
            self.assertEqual(p.returncode, 2)
            self.assertIn("unknown argument '--frobnicate'", p.stderr)
            p = self.run_check(d, "--bundle", os.path.join(d, "nothing"))
            self.assertEqual(p.returncode, 2)
            self.assertIn("make the bundle with scripts/bundle_gpu.sh", p.stdout)


if __name__ == "__main__":
    unittest.main()
