"""link_screen_scale.py: the circle method is the one screen/links runs (every
pair once, disjoint rounds, n - 1 or n of them); the hierarchical and sampled
schedules are the pairs simulate() counts; the time model adds up."""
import contextlib
import io
import itertools
import math
import unittest

import helpers  # noqa: F401  (puts scripts/ on sys.path)
import link_screen_scale as lss


def check_rounds(test, rounds, label):
    """Each round's pairs are (lower, higher) and no rank is in two of them;
    returns every pair met, with how often."""
    met = {}
    for r, pairs in enumerate(rounds):
        busy = set()
        for a, b in pairs:
            test.assertLess(a, b, f"{label}: round {r}")
            test.assertNotIn(a, busy, f"{label}: rank {a} twice in round {r}")
            test.assertNotIn(b, busy, f"{label}: rank {b} twice in round {r}")
            busy.update((a, b))
            met[(a, b)] = met.get((a, b), 0) + 1
    return met


class RoundRobin(unittest.TestCase):
    def test_every_pair_meets_once_in_disjoint_rounds(self):
        for n in range(1, 34):
            with self.subTest(n=n):
                rounds = lss.round_robin(n)
                self.assertEqual(len(rounds), n - 1 if n % 2 == 0 else n)
                met = check_rounds(self, rounds, f"n {n}")
                self.assertEqual(set(met), set(itertools.combinations(range(n), 2)))
                self.assertTrue(all(c == 1 for c in met.values()))
                for pairs in rounds:
                    self.assertEqual(len(pairs), n // 2)  # odd n: one rank sits out
                    self.assertEqual(pairs, sorted(pairs))

    def test_same_rounds_as_the_case(self):
        # suites/screen/suspects.cc round_robin, by hand: seat 0 fixed, the others rotate right.
        self.assertEqual(lss.round_robin(4), [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]])
        self.assertEqual(lss.round_robin(3), [[(1, 2)], [(0, 2)], [(0, 1)]])
        self.assertEqual(lss.round_robin(2), [[(0, 1)]])
        with self.assertRaises(ValueError):
            lss.round_robin(0)

    def test_closed_form_pair_matches_the_rounds(self):
        for n in (2, 5, 8, 13, 16):
            m = n + n % 2
            for r, pairs in enumerate(lss.round_robin(n)):
                closed = sorted(p for p in (lss.circle_pair(n, r, i) for i in range(m // 2)) if p)
                self.assertEqual(closed, pairs, f"n {n} round {r}")


class Schedules(unittest.TestCase):
    SIZES = [(1, 8), (2, 8), (3, 4), (4, 2), (5, 3), (6, 8), (7, 1)]

    def test_full_counts_and_intra_only_rounds(self):
        for nodes, g in self.SIZES:
            with self.subTest(nodes=nodes, g=g):
                n = nodes * g
                got = lss.simulate(nodes, g, "full")
                self.assertEqual(got["rounds"], 0 if n == 1 else (n - 1 if n % 2 == 0 else n))
                self.assertEqual(got["pair_measurements"], n * (n - 1) // 2)
                rounds = lss.round_robin(n) if n > 1 else []
                inter = sum(any(a // g != b // g for a, b in r) for r in rounds)
                self.assertEqual(got["inter_rounds"], inter)
                self.assertEqual(got["intra_rounds"], len(rounds) - inter)

    def test_hierarchical_is_every_same_node_pair_and_every_rail_pair_once(self):
        for nodes, g in self.SIZES:
            with self.subTest(nodes=nodes, g=g):
                rounds = lss.hierarchical_rounds(nodes, g)
                met = check_rounds(self, rounds, f"{nodes}x{g}")
                want = {(v * g + a, v * g + b) for v in range(nodes) for a, b in itertools.combinations(range(g), 2)}
                want |= {(u * g + i, v * g + i) for u, v in itertools.combinations(range(nodes), 2) for i in range(g)}
                self.assertEqual(set(met), want)
                self.assertTrue(all(c == 1 for c in met.values()))
                got = lss.simulate(nodes, g, "hierarchical")
                self.assertEqual(got["rounds"], len(rounds))
                self.assertEqual(got["pair_measurements"], len(want))
                self.assertEqual(got["intra_rounds"], 0 if g < 2 else (g - 1 if g % 2 == 0 else g))
                self.assertEqual(got["inter_rounds"], 0 if nodes < 2 else (nodes - 1 if nodes % 2 == 0 else nodes))
                intra = rounds[: got["intra_rounds"]]
                self.assertTrue(all(a // g == b // g for r in intra for a, b in r), "intra phase leaves the node")
                for r in rounds[got["intra_rounds"] :]:
                    self.assertTrue(all(a // g != b // g and a % g == b % g for a, b in r), "node phase off its rail")

    def test_sampled_gives_each_node_k_distinct_partners(self):
        nodes, g, k = 12, 4, 3
        a, b = lss.sampled_rounds(nodes, g, k, seed=1), lss.sampled_rounds(nodes, g, k, seed=2)
        self.assertNotEqual(a, b, "the sample does not change with the seed")
        for rounds in (a, b):
            met = check_rounds(self, rounds, "sampled")
            self.assertTrue(all(c == 1 for c in met.values()))
            partners = {v: set() for v in range(nodes)}
            for x, y in met:
                if x // g != y // g:
                    self.assertEqual(x % g, y % g)
                    partners[x // g].add(y // g)
                    partners[y // g].add(x // g)
            self.assertTrue(all(len(p) == k for p in partners.values()), partners)
            got = lss.simulate(nodes, g, "sampled", {"sample_rounds": k})
            self.assertEqual(got["rounds"], len(rounds))
            self.assertEqual(got["pair_measurements"], len(met))
            self.assertAlmostEqual(got["node_pair_coverage"], k / (nodes - 1))

    def test_sampled_is_capped_at_the_whole_node_tournament(self):
        full = lss.simulate(5, 8, "hierarchical")
        many = lss.simulate(5, 8, "sampled", {"sample_rounds": 50})
        self.assertEqual(many["rounds"], full["rounds"])
        self.assertEqual(many["pair_measurements"], full["pair_measurements"])
        self.assertEqual(many["node_pair_coverage"], 1.0)


class TimeModel(unittest.TestCase):
    def test_pair_time_by_hand(self):
        # 10 ping-pongs at 5 us, then 3 x 64 MiB each way at 45 GB/s, each with message + ack latency.
        t = lss.pair_seconds(64 << 20, 45.0, 5.0, 10, 3)
        self.assertAlmostEqual(t, 2 * 10 * 5e-6 + 6 * ((64 << 20) / 45e9 + 10e-6), places=12)

    def test_hierarchical_seconds_by_hand(self):
        p = lss.Params()
        got = lss.simulate(64, 8, "hierarchical", p)
        barrier = p.barrier_us * 1e-6 * math.ceil(math.log2(512))
        t_intra = lss.pair_seconds(p.bytes, p.intra_GBps, p.latency_us, p.latency_reps, p.bandwidth_reps)
        t_inter = lss.pair_seconds(p.bytes, p.inter_GBps, p.latency_us, p.latency_reps, p.bandwidth_reps)
        self.assertAlmostEqual(got["seconds"], 7 * (t_intra + barrier) + 63 * (t_inter + barrier))
        self.assertAlmostEqual(got["case_seconds"], got["seconds"] * p.passes)

    def test_one_node_waits_only_for_nvlink(self):
        got = lss.simulate(1, 8, "full")
        self.assertEqual(got["inter_rounds"], 0)
        self.assertLess(got["seconds"], 7 * 2 * got["pair_seconds"]["same_node"])

    def test_order_of_the_strategies_at_scale(self):
        for nodes in (64, 1024):
            full, hier, samp = (lss.simulate(nodes, 8, s) for s in lss.STRATEGIES)
            self.assertLess(hier["seconds"], full["seconds"] / 5)
            self.assertLess(samp["seconds"], hier["seconds"])
            self.assertEqual(full["rounds"], nodes * 8 - 1)
            self.assertEqual(hier["rounds"], 7 + nodes - 1)
            self.assertEqual(samp["rounds"], 7 + 8)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            lss.simulate(8, 8, "everything")
        with self.assertRaises(ValueError):
            lss.simulate(0, 8, "full")

    def test_command_line_prints_the_table(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = lss.main(["--nodes", "2,16", "--gpus-per-node", "4", "--bytes", "1M"])
        self.assertEqual(rc, 0)
        text = out.getvalue()
        self.assertIn("pair meas.", text)
        for s in lss.STRATEGIES:
            self.assertEqual(sum(line.startswith(s + " ") for line in text.splitlines()), 2, s)
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            lss.main(["--bytes", "lots"])
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
