"""recheck_dump.py and its float64 math (scripts/recheck/), without the binary:
every backward against central finite differences of its forward, the masks
against their definitions, and the command line on small dump folders written
here (exit codes, skips, a wrong reference, a disagreeing results file)."""
import json
import os
import tempfile
import unittest

import numpy as np

from helpers import run_script
from recheck import attention, cases, moe, ops


def numeric_grad(f, x, h=1e-6):
    """Central differences of the scalar f() with respect to every entry of x (changed in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


class GradientTest(unittest.TestCase):
    def assert_close(self, got, want, rtol=1e-6):
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)
        self.assertLess(err, rtol, f"relative error {err:.3g}")


class AttentionMath(GradientTest):
    def check(self, b, sq, sk, hq, hk, d, visible):
        rng = np.random.default_rng(sq * 100 + sk + hq)
        q, dout = rng.standard_normal((2, b, sq, hq, d))
        k, v = rng.standard_normal((2, b, sk, hk, d))
        r = attention.attention(q, k, v, dout, visible)

        def loss():
            return float((attention.attention(q, k, v, dout, visible)["out"] * dout).sum())

        for name, x in (("dq", q), ("dk", k), ("dv", v)):
            self.assert_close(r[name], numeric_grad(loss, x))
        return r

    def test_full_gqa(self):
        self.check(2, 5, 5, 4, 2, 3, None)

    def test_causal_mha(self):
        self.check(1, 6, 6, 2, 2, 4, attention.causal_visible(np.arange(6), 6))

    def test_causal_offset_block(self):
        self.check(1, 3, 7, 3, 1, 2, attention.causal_visible(np.arange(4, 7), 7))

    def test_packed(self):
        self.check(1, 7, 7, 2, 1, 3, attention.packed_visible([4, 1, 2]))

    def test_gqa_query_head_h_reads_kv_head_h_over_group(self):
        rng = np.random.default_rng(6)
        q, dout = rng.standard_normal((2, 1, 3, 4, 2))
        k, v = rng.standard_normal((2, 1, 3, 2, 2))
        gqa = attention.attention(q, k, v, dout)
        heads = [0, 0, 1, 1]  # hq 4, hk 2: query heads 0 and 1 read kv head 0, 2 and 3 kv head 1
        mha = attention.attention(q, k[:, :, heads], v[:, :, heads], dout)
        np.testing.assert_allclose(gqa["out"], mha["out"], rtol=1e-13)
        np.testing.assert_allclose(gqa["dk"][:, :, 1], mha["dk"][:, :, 2] + mha["dk"][:, :, 3], rtol=1e-13)

    def test_lse_and_masks_are_their_definitions(self):
        rng = np.random.default_rng(1)
        q, k, v, dout = rng.standard_normal((4, 1, 4, 1, 2))
        r = attention.attention(q, k, v, dout, attention.causal_visible(np.arange(4), 4))
        s = q[0, :, 0] @ k[0, :, 0].T / np.sqrt(2)
        for i in range(4):  # row i sees keys 0..i
            self.assertAlmostEqual(r["lse"][0, 0, i], np.log(np.exp(s[i, :i + 1]).sum()), places=12)
        self.assertEqual(attention.packed_visible([2, 1]).tolist(),
                         [[True, False, False], [True, True, False], [False, False, True]])

    def test_packed_equals_each_sequence_alone(self):
        rng = np.random.default_rng(2)
        q, k, v, dout = rng.standard_normal((4, 1, 5, 2, 3))
        whole = attention.attention(q, k, v, dout, attention.packed_visible([3, 2]))
        for lo, hi in ((0, 3), (3, 5)):
            part = attention.attention(*(t[:, lo:hi] for t in (q, k, v, dout)),
                                       attention.causal_visible(np.arange(hi - lo), hi - lo))
            for name in ("out", "dq", "dk", "dv"):
                np.testing.assert_allclose(whole[name][:, lo:hi], part[name], rtol=1e-13, atol=1e-15)


class OpsMath(GradientTest):
    def test_layernorm(self):
        rng = np.random.default_rng(3)
        x, dy = rng.standard_normal((2, 3, 5))
        gamma, beta = rng.standard_normal((2, 5))
        r = ops.layernorm(x, gamma, beta, dy)

        def loss():
            return float((ops.layernorm(x, gamma, beta, dy)["y"] * dy).sum())

        for name, t in (("dx", x), ("dgamma", gamma), ("dbeta", beta)):
            self.assert_close(r[name], numeric_grad(loss, t))
        np.testing.assert_allclose(r["rstd"], 1 / np.sqrt(x.var(axis=1) + 1e-5), rtol=1e-14)

    def test_gelu(self):
        x = np.linspace(-6, 6, 41)
        self.assert_close(ops.gelu_grad(x), (ops.gelu(x + 1e-6) - ops.gelu(x - 1e-6)) / 2e-6)
        self.assertAlmostEqual(ops.gelu(1.0), 0.8411919906082768, places=14)  # the tanh form at 1

    def test_cross_entropy(self):
        rng = np.random.default_rng(4)
        logits = rng.standard_normal((3, 6))
        targets = np.array([0, 5, 2])
        r = ops.cross_entropy(logits, targets)
        self.assert_close(r["dlogits"], numeric_grad(lambda: float(ops.cross_entropy(logits, targets)["loss"][0]),
                                                     logits))
        p = np.exp(logits[1]) / np.exp(logits[1]).sum()
        self.assertAlmostEqual(r["row_loss"][1], -np.log(p[5]), places=13)


class MoeMath(GradientTest):
    def layer(self, **options):
        rng = np.random.default_rng(5)
        tokens, h, f, e = 8, 4, 6, 4
        x, dy = rng.standard_normal((2, tokens, h))
        router = rng.standard_normal((h, e))
        w1, w2 = rng.standard_normal((e, h, f)) * 0.5, rng.standard_normal((e, f, h)) * 0.5
        options = dict(topk=2, aux_coeff=0.3, z_coeff=0.2) | options

        def loss():
            r = moe.moe_layer(x, dy, router, w1, w2, **options)
            return float((r["y"] * dy).sum() + r["aux_loss"][0] + r["z_loss"][0])

        r = moe.moe_layer(x, dy, router, w1, w2, **options)
        for name, t in (("dx", x), ("d_router", router), ("d_w1", w1), ("d_w2", w2)):
            self.assert_close(r[name], numeric_grad(loss, t))
        return r

    def test_dropless(self):
        self.assertTrue(self.layer()["routing"]["kept"].all())

    def test_pre_softmax(self):
        self.layer(pre_softmax=True)

    def test_capacity_drops(self):
        for drop in ("probability", "position"):
            r = self.layer(drop=drop, capacity_factor=0.5, group=4)
            self.assertFalse(r["routing"]["kept"].all(), drop)

    def test_routing_rules(self):
        logits = np.array([[1.0, 3.0, 3.0, 0.0]])
        experts, probs, _ = moe.route(logits, 2, False)
        self.assertEqual(experts.tolist(), [[1, 2]])  # a tie goes to the lower expert
        np.testing.assert_allclose(probs, [[0.5, 0.5]])
        # Capacity 1 per expert in a group of two tokens (ceil(2 * 1 / 2 * 0.5)): by probability the
        # later token wins, by position the first.
        experts = np.array([[0], [0], [1], [1]])
        probs = np.array([[0.2], [0.9], [0.5], [0.5]])
        self.assertEqual(moe.keep_mask(experts, probs, 2, "probability", 0.5, 2).ravel().tolist(),
                         [False, True, True, False])  # equal probabilities: the lower token
        self.assertEqual(moe.keep_mask(experts, probs, 2, "position", 0.5, 2).ravel().tolist(),
                         [True, False, True, False])

    def test_routing_tables_compare_as_sets(self):
        # Each token's (expert, kept) pairs in ascending order, as sextant dumps them.
        table = cases.routing_table({"experts": np.array([[2, 0], [1, 3]]),
                                     "kept": np.array([[True, False], [False, True]])})
        self.assertEqual(table.tolist(), [[0, 0, 2, 1], [1, 0, 3, 1]])


def write_case(root, folder, meta, arrays):
    path = os.path.join(root, folder)
    os.makedirs(path)
    with open(os.path.join(path, "params.json"), "w") as f:
        json.dump(meta, f)
    for name, a in arrays.items():
        np.save(os.path.join(path, name + ".npy"), a)
    return path


def gelu_case(root, folder="gelu", ref_error=0.0, case_id="ops/gelu n=5"):
    """A gelu dump whose dist is off by about 1e-3 and whose ref by ref_error (relative)."""
    x = np.linspace(-2, 2, 5).astype(np.float32)
    dy = np.ones(5, np.float32)
    y = ops.gelu(x.astype(np.float64))
    dx = ops.gelu_grad(x.astype(np.float64))
    meta = {"suite": "ops", "case": "gelu", "id": case_id, "params": {"n": 5}, "ranks": 1}
    arrays = {"x": x, "dy": dy}
    for name, t in (("y", y), ("dx", dx)):
        arrays.update({name + ".ref": t * (1 + ref_error), name + ".dist": (t * (1 + 1e-3)).astype(np.float32),
                       name + ".base": t.astype(np.float32)})
    return write_case(root, folder, meta, arrays)


def results_file(root, errors):
    """A results document holding one ops/gelu record with the given {name: (error, base_error)}."""
    doc = {"schema": "sextant.result/1",
           "cases": [{"id": "ops/gelu n=5", "conformance": {"tensors": [
               {"name": n, "error": e, "base_error": b} for n, (e, b) in errors.items()]}}]}
    path = os.path.join(root, "results.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def recheck(self, *args):
        return run_script("recheck_dump.py", *args)

    def test_agreeing_dump_passes_and_reports_errors(self):
        gelu_case(os.path.join(self.root, "d"))
        report = os.path.join(self.root, "r.json")
        rc, out, err = self.recheck(os.path.join(self.root, "d"), "--json", report)
        self.assertEqual(rc, 0, out + err)
        with open(report) as f:
            tensors = {t["name"]: t for t in json.load(f)["cases"][0]["tensors"]}
        self.assertLess(tensors["y"]["own_vs_ref"], 1e-15)
        self.assertAlmostEqual(tensors["y"]["dist"], 1e-3, delta=1e-6)  # measured against its own math

    def test_a_reference_off_by_1e_8_fails(self):
        gelu_case(os.path.join(self.root, "d"), ref_error=1e-8)
        rc, out, _ = self.recheck(os.path.join(self.root, "d"))
        self.assertEqual(rc, 1, out)
        self.assertIn("sextant's reference differs", out)

    def test_recorded_errors_must_agree(self):
        dump, report = os.path.join(self.root, "d"), os.path.join(self.root, "r.json")
        gelu_case(dump)
        self.recheck(dump, "--json", report)
        with open(report) as f:
            mine = {t["name"]: (t["dist"], t["base"]) for t in json.load(f)["cases"][0]["tensors"]}
        rc, out, err = self.recheck(dump, "--results", results_file(self.root, mine))
        self.assertEqual(rc, 0, out + err)
        rc, out, _ = self.recheck(dump, "--results",
                                  results_file(self.root, mine | {"dx": (mine["dx"][0] * 1.0001, mine["dx"][1])}))
        self.assertEqual(rc, 1, out)
        self.assertIn("dx: dist error", out)

    def test_case_missing_from_results_fails(self):
        gelu_case(os.path.join(self.root, "d"), case_id="ops/gelu n=6")
        rc, out, _ = self.recheck(os.path.join(self.root, "d"), "--results", results_file(self.root, {}))
        self.assertEqual(rc, 1, out)
        self.assertIn("no record with this id", out)

    def test_uncovered_cases_are_skipped(self):
        write_case(os.path.join(self.root, "d"), "gemm",
                   {"suite": "ops", "case": "gemm", "id": "ops/gemm m=1", "params": {}, "ranks": 1}, {})
        rc, out, _ = self.recheck(os.path.join(self.root, "d"))
        self.assertEqual(rc, 0, out)
        self.assertIn("skip  ops/gemm m=1: not re-implemented", out)
        self.assertIn("1 skipped (not re-implemented)", out)

    def test_unreadable_input_exits_2_with_one_line(self):
        folder = gelu_case(os.path.join(self.root, "d"))
        os.remove(os.path.join(folder, "dy.npy"))
        bad_results = os.path.join(self.root, "bad.json")
        with open(bad_results, "w") as f:
            f.write("{")
        os.mkdir(os.path.join(self.root, "empty"))
        for args in ([os.path.join(self.root, "nowhere")], [os.path.join(self.root, "empty")],
                     [self.root + "/d", "--results", bad_results], [os.path.join(self.root, "d")]):
            rc, out, err = self.recheck(*args)
            self.assertEqual(rc, 2, (args, out, err))
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertNotIn("Traceback", err)


if __name__ == "__main__":
    unittest.main()
