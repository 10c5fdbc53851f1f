#!/usr/bin/env python3
"""Every planted shared-kernel fault fails the suites that run its kernel.

A kernel fault (harness/kernel_fault.h) is live in every run of a case, the
one-device baseline included, so only the absolute gate on the baseline can
catch it: each row below runs a suite with the fault at the ci sizes and
requires exit 1 and a failed tensor whose failing side is the baseline (or,
for a fault only a distributed run executes, the distributed side). Run by
ctest:  kernel_faults_test.py SEXTANT MPIEXEC."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

SEXTANT = MPIEXEC = None

# (fault, selection, ranks, side): side "baseline" also accepts "both".
ROWS = [
    ("attention_forward_scale", "attention", 1, "baseline"),
    ("attention_forward_scale", "step/train", 1, "baseline"),
    ("attention_backward_softmax_grad", "attention", 1, "baseline"),
    ("attention_backward_softmax_grad", "step/train", 1, "baseline"),
    ("attention_merge_lse", "attention/p2p", 2, "distributed"),  # one device merges nothing
    ("attention_merge_lse", "ops", 1, "baseline"),
    ("causal_mask_diagonal", "attention", 1, "baseline"),
    ("causal_mask_diagonal", "step/train", 1, "baseline"),
    ("causal_mask_diagonal", "ops", 1, "baseline"),
    ("attention_gqa_head_map", "attention", 1, "baseline"),
    ("attention_window_off_by_one", "attention", 1, "baseline"),
    ("attention_window_off_by_one", "ops", 1, "baseline"),
    ("attention_window_off_by_one", "step/train", 2, "baseline"),  # the 2-rank recipe with packed rows and a window
    ("attention_scale_from_v_dim", "attention", 1, "baseline"),  # the sweep's MLA rows (q/k head dim 3/2 of v's)
    ("attention_scale_from_v_dim", "ops", 1, "baseline"),
    ("attention_gqa_head_map", "step/train", 2, "baseline"),  # the 2-rank recipes group the KV heads
    ("layernorm_forward_variance", "tp_sp", 1, "baseline"),
    ("layernorm_forward_variance", "step/train", 1, "baseline"),
    ("layernorm_backward_mean_term", "tp_sp", 1, "baseline"),
    ("layernorm_backward_mean_term", "pipeline/1f1b", 1, "baseline"),
    ("layernorm_backward_mean_term", "ops", 1, "baseline"),
    ("gelu_backward_coefficient", "tp_sp/mlp", 1, "baseline"),
    ("gelu_backward_coefficient", "moe", 1, "baseline"),
    ("gelu_backward_coefficient", "pipeline/1f1b", 1, "baseline"),
    ("softmax_backward", "ops", 1, "baseline"),
    ("cross_entropy_gradient", "tp_sp/vocab", 1, "baseline"),
    ("cross_entropy_gradient", "step/train", 1, "baseline"),
    # ops/cross_entropy's rows with padding targets; the step reduces by sum and counts its own rows.
    ("cross_entropy_counts_ignored", "ops", 1, "baseline"),
    ("embedding_backward_duplicates", "tp_sp/vocab", 1, "baseline"),
    ("embedding_backward_duplicates", "step/train", 1, "baseline"),
    ("adam_bias_correction", "step/train", 1, "baseline"),
    ("adam_bias_correction", "step/fp8", 1, "baseline"),
    ("layernorm_backward_mean_term", "step/fp8", 1, "baseline"),
    ("cross_entropy_gradient", "step/fp8", 1, "baseline"),
    ("adam_bias_correction", "ops", 1, "baseline"),
    ("router_topk_repeats", "moe", 1, "baseline"),
    ("router_topk_repeats", "step/train", 1, "baseline"),
    # Flips only tokens whose top-k gap is under 1% (none of the moe suite's 32 tokens at ci sizes): the
    # step's reference, which follows a run's routing at near ties, must not absorb them.
    ("router_choice_bias", "step/train", 1, "baseline"),
    ("moe_permute_order", "moe", 1, "baseline"),
    ("moe_unpermute_order", "moe", 1, "baseline"),
    ("moe_combine_twice", "moe", 1, "baseline"),
    ("moe_combine_twice", "step/train", 1, "baseline"),
    ("pipeline_skip_weight_grad", "pipeline/1f1b", 1, "distributed"),  # its baseline runs no executor
    ("pipeline_skip_weight_grad", "step/train", 1, "baseline"),
    ("gemm_ignores_beta", "moe", 1, "baseline"),
    ("gemm_ignores_beta", "step/train", 1, "baseline"),
    ("gemm_ignores_beta", "ops", 1, "baseline"),
    # The piece driver runs beside the whole block: the pieces' tensors fail against it.
    ("attention_pieces_drop_last", "ops/attention", 1, "distributed"),
    ("fp8_scale_inverse_twice", "ops/gemm_fp8", 1, "baseline"),
    ("fp8_scale_inverse_twice", "tp_sp", 1, "baseline"),  # the FP8 linears of mlp and attn_proj
    ("fp8_scale_inverse_twice", "step/fp8", 1, "baseline"),  # the step's FP8 linears
    ("fp8_forward_weight_e5m2", "ops/gemm_fp8", 1, "baseline"),
    ("fp8_block_scale_neighbour", "ops/gemm_fp8", 1, "baseline"),  # block and mxfp8 rows
    ("fp8_saturation_wraps", "ops/gemm_fp8", 1, "baseline"),  # delayed rows: the second step outgrows the first
    ("fp8_history_not_rolled", "ops/gemm_fp8", 1, "baseline"),  # delayed rows: the fourth step's window
]


def run(ranks, args, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", SEXTANT, "run", "-q", "-o", out, "--iters", "0",
           "--profile", "ci", "--ranks", str(ranks)] + args
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


class KernelFaults(unittest.TestCase):
    def test_every_listed_kernel_fault_has_a_row(self):
        listed = subprocess.run([SEXTANT, "list"], capture_output=True, text=True, timeout=60).stdout
        faults = set()
        for line in listed.splitlines():
            if line.strip().startswith("kernel faults:"):
                faults.update(f.strip() for f in line.split(":", 1)[1].split(","))
        self.assertTrue(faults)
        self.assertEqual(faults - {row[0] for row in ROWS}, set(), "kernel faults without a test row")

    def test_each_fault_fails_its_suite(self):
        for fault, selection, ranks, side in ROWS:
            with self.subTest(fault=fault, selection=selection), tempfile.TemporaryDirectory() as out:
                p = run(ranks, [selection, "--fault", fault], out)
                self.assertEqual(p.returncode, 1, f"{fault} in {selection}: exit {p.returncode}\n{p.stderr}")
                with open(glob.glob(os.path.join(out, "sextant-*.json"))[0], encoding="utf-8") as f:
                    doc = json.load(f)
                sides = {t.get("failed_side") for c in doc["cases"] for t in c["conformance"]["tensors"]}
                wanted = {"baseline", "both"} if side == "baseline" else {"distributed", "both"}
                self.assertTrue(sides & wanted, f"{fault} in {selection}: failed sides {sides}, want {wanted}")


if __name__ == "__main__":
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
