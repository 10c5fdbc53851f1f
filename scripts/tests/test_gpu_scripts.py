"""The device-check scripts on inputs made here (no GPU needed): the summary's
gemm ratio, memory and attention rows, suite verdicts and goal verdicts; the
attention driver's reading of our benchmark; device_check.sh's refusals of
bad use, and its failing a suite run that ran no case (with fake binaries)."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from helpers import REAL_FIXTURE, SCRIPTS, load, write

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

    def test_a_results_file_without_cases_is_a_failure(self):
        with tempfile.TemporaryDirectory() as d:
            doc = load(REAL_FIXTURE)
            full = write(doc, d, "full.json")
            empty = write(dict(doc, cases=[]), d, "empty.json")
            rows = {r["file"]: r for r in gpu_summary.suite_rows(d)}
            self.assertEqual(rows["empty.json"]["failed"], ["(ran no case)"])
            self.assertEqual(rows["full.json"]["failed"], [])
            self.assertEqual(gpu_summary.count_cases([empty]), 0)
            self.assertEqual(gpu_summary.count_cases([full, empty, os.path.join(d, "absent.json")]),
                             len(doc["cases"]))


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


def summary_of(attention=(), memory=(), gemm=(), step=(), suites=()):
    return {"attention": list(attention), "memory": list(memory), "gemm": list(gemm), "step": list(step),
            "suites": list(suites)}


class Verdicts(unittest.TestCase):
    def by_goal(self, summary):
        return {v["goal"]: v for v in gpu_summary.verdicts(summary)}

    def test_nothing_measured_is_not_measured_not_pass(self):
        v = self.by_goal(summary_of())
        self.assertEqual({x["status"] for x in v.values()}, {"NOT MEASURED"})
        self.assertEqual(set(v), set(gpu_summary.GOALS))

    def test_attention_goal_takes_the_worst_long_sequence_row(self):
        rows = [{"seq": 4096, "causal": False, "pass": "fwd", "ours_over_torch": 0.1},  # below 8k: not a goal row
                {"seq": 8192, "causal": True, "pass": "fwd_bwd", "ours_over_torch": 0.85},
                {"seq": 16384, "causal": False, "pass": "fwd", "ours_over_torch": 0.95}]
        v = self.by_goal(summary_of(attention=rows))["attention_over_sdpa"]
        self.assertEqual((v["status"], v["measured"]), ("FAIL", 0.85))
        self.assertIn("s=8192 causal fwd_bwd", v["detail"])
        rows[1]["ours_over_torch"] = 0.92
        self.assertEqual(self.by_goal(summary_of(attention=rows))["attention_over_sdpa"]["status"], "PASS")
        rows[2]["ours_over_torch"] = None  # a row without our figure: the goal is not measured
        self.assertEqual(self.by_goal(summary_of(attention=rows))["attention_over_sdpa"]["status"], "NOT MEASURED")

    def test_layernorm_over_a_copy_of_the_same_shape(self):
        memory = [{"op": "copy_d2d", "rows": 8, "h": 4096, "GBps": 4000.0},
                  {"op": "copy_d2d", "rows": 8, "h": 8192, "GBps": 4200.0},
                  {"op": "layernorm_fwd", "rows": 8, "h": 4096, "GBps": 3000.0},
                  {"op": "layernorm_fwd", "rows": 8, "h": 8192, "GBps": 2100.0}]
        v = self.by_goal(summary_of(memory=memory))["layernorm_over_copy"]
        self.assertEqual((v["status"], v["measured"], v["detail"]), ("FAIL", 0.5, "worst 8x8192"))

    def test_gemm_against_torch_matmul_and_cublas(self):
        rows = gpu_summary.gemm_rows(BENCH, [{"size": 8192, "torch_tflops": 790.0},
                                             {"size": 4096, "torch_tflops": 700.0}])
        v = self.by_goal(summary_of(gemm=rows))
        self.assertEqual(v["gemm_over_cublas"]["status"], "PASS")  # 760 / 800
        self.assertEqual(v["gemm_over_torch_matmul"]["status"], "NOT MEASURED")  # no wrapper figure at 4096
        rows = [r for r in rows if r["size"] != 4096] + [{"size": 4096, "ratio": 0.99, "ratio_torch": 0.97}]
        v = self.by_goal(summary_of(gemm=rows))
        self.assertEqual(v["gemm_over_torch_matmul"]["status"], "PASS")  # 760 / 790 and 0.97
        self.assertAlmostEqual(v["gemm_over_torch_matmul"]["measured"], 760.0 / 790.0)
        rows[-1]["ratio_torch"] = 0.90
        self.assertEqual(self.by_goal(summary_of(gemm=rows))["gemm_over_torch_matmul"]["status"], "FAIL")

    def test_step_mfu_of_the_large_model_only(self):
        small = {"mfu": 0.02, "dtype": "bf16", "model": {"hidden": 64}, "allocation": None, "tokens_per_s": 1.0}
        v = self.by_goal(summary_of(step=[small]))["step_mfu_measured"]
        self.assertEqual(v["status"], "NOT MEASURED")
        large = dict(small, mfu=0.31, model={"hidden": 2048}, allocation="async")
        v = self.by_goal(summary_of(step=[small, large]))["step_mfu_measured"]
        self.assertEqual((v["status"], v["measured"]), ("PASS", 0.31))

    def test_one_failed_or_empty_suite_run_fails_the_goal(self):
        runs = [{"file": "a.json", "failed": []}, {"file": "b.json", "failed": ["(ran no case)"]}]
        v = self.by_goal(summary_of(suites=runs))["suites_conform"]
        self.assertEqual(v["status"], "FAIL")
        self.assertIn("b.json", v["detail"])
        self.assertEqual(self.by_goal(summary_of(suites=runs[:1]))["suites_conform"]["status"], "PASS")


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

    def test_a_suite_run_that_ran_no_case_fails(self):
        # A bundle of fake binaries: `sextant list` names two suites; `run empty` writes
        # a results file with no case, `run full` one with the real fixture's cases.
        if shutil.which("mpirun") is None:
            self.skipTest("no mpirun")
        with tempfile.TemporaryDirectory() as d:
            bundle, out = os.path.join(d, "bundle"), os.path.join(d, "out")
            os.makedirs(os.path.join(bundle, "bin"))
            write({"cases": []}, d, "empty.json")
            with open(os.path.join(bundle, "env.sh"), "w") as f:
                f.write("")
            with open(os.path.join(bundle, "MANIFEST"), "w") as f:
                f.write("fake bundle\nfor a test\n")
            fake = f"""#!/bin/bash
[ "$1" = list ] && {{ echo empty; echo full; exit 0; }}
out=""; prev=""
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
[ -n "$out" ] || exit 0
mkdir -p "$out"
case $2 in
  empty) cp {os.path.join(d, "empty.json")} "$out/sextant-empty-$$.json" ;;
  *) cp {REAL_FIXTURE} "$out/sextant-${{2//\//-}}-$$.json" ;;
esac
"""
            for name in ("sextant", "ops_cuda_test", "harness_gpu_test", "harness_mpi_test", "ops_cuda_bench"):
                path = os.path.join(bundle, "bin", name)
                with open(path, "w") as f:
                    f.write(fake)
                os.chmod(path, 0o755)
            p = subprocess.run(["bash", os.path.join(SCRIPTS, "device_check.sh"), out, "--bundle", bundle,
                                "--all-steps"], capture_output=True, text=True, timeout=300)
            if p.returncode == 2:
                self.skipTest(f"environment: {p.stdout.strip().splitlines()[-1]}")
            self.assertEqual(p.returncode, 1, p.stdout)
            lines = p.stdout.splitlines()
            status = lambda name: next(line for line in lines if line.strip().startswith(name))  # noqa: E731
            self.assertIn("fail (ran no case)", status("empty, nccl, world 1"))
            self.assertIn("fail (ran no case)", status("empty, staged, 4 ranks"))
            self.assertRegex(status("full, nccl, world 1"), r"\bpass$")
            self.assertRegex(status("step MFU, 1B dense bf16, cudaMalloc"), r"\bpass$")
            summary = load(os.path.join(out, "summary.json"))
            verdicts = {v["goal"]: v["status"] for v in summary["verdicts"]}
            self.assertEqual(verdicts["suites_conform"], "FAIL")
            self.assertEqual(verdicts["attention_over_sdpa"], "NOT MEASURED")


if __name__ == "__main__":
    unittest.main()
