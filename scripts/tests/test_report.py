"""report.py: every figure from the fixtures (a real collectives run, the
synthetic suites and a synthetic two-node screen run), a self-contained
non-empty index.html and summary.md; missing suites are skipped with a
reason, never an exception."""
import base64
import os
import re
import tempfile
import unittest

import helpers
from helpers import REAL_FIXTURE, SCREEN_FIXTURE, SYNTHETIC_FIXTURE, derived, load, run_script, write
from sextant_results.load import load_runs
from sextant_results.report import SECTIONS, build_report, common, conformance, pipeline, screen, step

EVERY_FIGURE = ["conformance_0.png", "conformance_1.png", "collectives_busbw_f32.png", "collectives_busbw_bf16.png",
                "collectives_peak_busbw.png", "tp_sp.png", "attention_cp.png", "attention_dynamic_cp.png", "moe_bandwidth.png",
                "moe_imbalance.png", "pipeline_bubble.png", "pipeline_agreement.png", "pipeline_gantt.png",
                "step_mfu.png", "scaling.png",
                "screen_links.png", "screen_compute.png", "screen_rank_times.png"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class FullReport(unittest.TestCase):
    """One report over all fixtures (and stored real runs), built once."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = cls.tmp.name
        cls.inputs = [REAL_FIXTURE, SYNTHETIC_FIXTURE, SCREEN_FIXTURE]  # every suite; stored runs: StoredRuns below
        cls.rc, cls.stdout, cls.stderr = run_script("report.py", *cls.inputs, "-o", cls.out)
        with open(os.path.join(cls.out, "index.html"), encoding="utf-8") as f:
            cls.html = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_status_and_no_section_failed(self):
        self.assertEqual(self.rc, 0, self.stdout + self.stderr)
        self.assertNotIn("skipped", self.stdout)
        self.assertNotIn("ERROR", self.stderr)

    def test_every_figure_is_a_png(self):
        for name in EVERY_FIGURE:
            with self.subTest(name):
                path = os.path.join(self.out, name)
                self.assertTrue(os.path.isfile(path), f"{name} missing; have {sorted(os.listdir(self.out))}")
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), PNG_MAGIC)
                self.assertGreater(os.path.getsize(path), 10_000)

    def test_html_embeds_every_figure_with_a_caption(self):
        images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", self.html)
        self.assertEqual(len(images), len(os.listdir(self.out)) - 2)  # all PNGs; not index.html, summary.md
        self.assertGreaterEqual(len(images), len(EVERY_FIGURE))
        self.assertTrue(all(base64.b64decode(i)[:8] == PNG_MAGIC for i in images))
        self.assertEqual(self.html.count("<figcaption>"), len(images))
        self.assertNotIn("src='http", self.html)  # nothing to fetch: the page can be mailed
        for caption in re.findall(r"<figcaption>(.*?)</figcaption>", self.html, re.S):
            self.assertRegex(caption, r"System(s)?: ")
            self.assertIn("backend mpi", caption)

    def test_html_has_tables_and_flags_the_failure(self):
        self.assertGreaterEqual(self.html.count("<table>"), 8)
        self.assertIn("skip_ring_step", self.html)           # the planted fault in the problem table
        self.assertIn("near", self.html)                     # the near-bound instance
        self.assertIn("Margins [", self.html)                # the matrix as a table of margins ...
        self.assertRegex(self.html, r'<td class=cell style="background:#[0-9a-f]{6}" title="[^"]+: one-device error')
        self.assertIn("SYNTHETIC fixture", self.html)        # synthetic runs are labelled as such

    def test_summary_markdown_links_figures_and_has_tables(self):
        with open(os.path.join(self.out, "summary.md"), encoding="utf-8") as f:
            md = f.read()
        for name in EVERY_FIGURE:
            self.assertIn(f"]({name})", md)
        self.assertIn("| run | system |", md)
        self.assertIn("### Peak busbw", md)
        self.assertIn("### Suspects", md)
        self.assertRegex(md, r"\| sdc \| rank 5 \(nodeB\) \| output_hash \|")
        self.assertRegex(md, r"\| slow_link \| ranks 1<->6 \(nodeA<->nodeB\) \| p2p_bandwidth_GBps \| 0\.9 \|")

    def test_html_has_the_suspects_and_stragglers_tables(self):
        suspects = self.html.split("<h3>Suspects</h3>")[1].split("</table>")[0]
        self.assertEqual(suspects.count("<tr>"), 3)  # the header and two suspects
        self.assertIn("<td>slow_link</td><td>ranks 1&lt;-&gt;6 (nodeA&lt;-&gt;nodeB)</td>", suspects)
        stragglers = self.html.split("<h3>Stragglers (straggler_score &gt; 1.5)</h3>")[1].split("</table>")[0]
        self.assertIn("tournament", stragglers)
        self.assertNotIn("gemm", stragglers)


def expected_figures(runs):
    """The figures a report on these runs must draw, from the suites they hold."""
    cases = [c for r in runs for c in r.cases if not c.get("fault")]
    suites = {c["suite"] for c in cases}
    # One matrix per system (a run with no cases has none).
    names = [f"conformance_{i}.png" for i in range(len(conformance.system_groups([r for r in runs if r.cases])))]
    per_suite = {"tp_sp": ["tp_sp.png"], "attention": ["attention_cp.png"],
                 "moe": ["moe_bandwidth.png", "moe_imbalance.png"],
                 "pipeline": ["pipeline_bubble.png", "pipeline_agreement.png", "pipeline_gantt.png"],
                 "step": ["step_mfu.png"]}
    for suite, files in per_suite.items():
        names += files if suite in suites else []
    if "collectives" in suites:
        names += ["collectives_peak_busbw.png"] + [f"collectives_busbw_{d}.png" for d in
                                                   {c["dtype"] for c in cases if c["suite"] == "collectives"}]
    if any(c["suite"] == "attention" and c["case"] == "dynamic_cp" for c in cases):
        names.append("attention_dynamic_cp.png")
    if any(c["suite"] == "step" and c["case"] == "sweep" and c["ranks"] > 1 for c in cases):
        names.append("step_sweep.png")
    if any(c["suite"] == "step" and "comm_by_dim" in c["perf"].get("metrics", {}) for c in cases):
        names.append("step_overlap.png")
    if len({c["ranks"] for c in cases if c["suite"] in ("tp_sp", "attention", "moe", "step")}) > 1:
        names.append("scaling.png")
    names += ["screen_links.png"] if screen.link_pairs(runs) else []
    names += ["screen_compute.png"] if screen.compute_pairs(runs) else []
    names += ["screen_rank_times.png"] if screen.timed_pairs(runs) else []
    return names


def has_screen_data(runs):
    """The screen section draws for screen cases, suspects or per-rank timings."""
    return bool(screen.link_pairs(runs) or screen.compute_pairs(runs) or screen.timed_pairs(runs)
                or screen.named_suspects(runs))


@unittest.skipUnless(helpers.stored_results(), "no stored real runs under results/ (results/<machine>/*.json)")
class StoredRuns(unittest.TestCase):
    """report.py on every real run stored under results/: the sample report a
    cluster owner would send, so every section draws, nothing warns, and the
    figures are the ones its suites call for."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = cls.tmp.name
        cls.paths = helpers.stored_results()
        cls.runs = load_runs(cls.paths)
        cls.rc, cls.stdout, cls.stderr = run_script("report.py", *cls.paths, "-o", cls.out)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_section_draws_without_warnings(self):
        self.assertEqual(self.rc, 0, self.stdout + self.stderr)
        self.assertEqual(self.stderr.strip(), "", "report.py warned or failed")  # e.g. a collapsed layout
        # Runs stored before per-rank timings and the screen suite existed have nothing for its section.
        absent = [] if has_screen_data(self.runs) else [screen]
        self.assertEqual(self.stdout.count("skipped"), len(absent), self.stdout)
        for module in SECTIONS:
            drawn = r"skipped: no screen cases" if module in absent else r"[1-9]\d* figure"
            self.assertRegex(self.stdout, rf"report: {re.escape(module.TITLE)}: {drawn}")

    def test_every_expected_figure_is_drawn_and_embedded(self):
        with open(os.path.join(self.out, "index.html"), encoding="utf-8") as f:
            html = f.read()
        for name in expected_figures(self.runs):
            with self.subTest(name):
                with open(os.path.join(self.out, name), "rb") as f:
                    self.assertEqual(f.read(8), PNG_MAGIC)
        self.assertEqual(html.count("<figcaption>"), len(os.listdir(self.out)) - 2)
        for run in self.runs:
            self.assertIn(run.run.get("id"), html)

    def test_training_step_configs_have_distinct_labels(self):
        pairs = [(r, c) for r in self.runs for c in r.cases if c["suite"] == "step" and c["case"] == "train"
                 and not c.get("fault")]
        if not pairs:
            self.skipTest("no step/train records in the stored runs")
        kinds = {step.model_kind(c) for _, c in pairs}
        for run in self.runs:  # a run is one row of the figure: its bars need distinct labels
            labels = [step.config_label(c, kinds) for r, c in pairs if r is run]
            self.assertEqual(len(labels), len(set(labels)), labels)


class PeakMemory(unittest.TestCase):
    """The step's measured peak memory stands beside the planner's estimate,
    by kind, in MiB; records without one add no row."""

    def test_measured_and_estimate_side_by_side(self):
        kinds = dict.fromkeys(step.MEMORY_KINDS, 1 << 20)
        memory = {"rank": 1, "error_pct": -12.5,
                  "measured": dict(kinds, total=8 << 20), "estimate": dict(kinds, activations=0, total=7 << 20)}
        case = {"ranks": 2, "dtype": "f32", "parallel": {"pp": 2}, "params": {"microbatches": 2},
                "perf": {"metrics": {"memory": memory}}}
        bare = {"ranks": 1, "dtype": "f32", "parallel": {}, "params": {}, "perf": {"metrics": {}}}

        class Run:
            label = "vm x2"

        table = step.memory_table([(Run, case), (Run, bare)])
        self.assertEqual(len(table.rows), 1)
        row = dict(zip(table.columns, table.rows[0]))
        self.assertEqual(row["peak"], "8 / 7")
        self.assertEqual(row["estimate error %"], "-12.5")
        self.assertEqual(row["activations"], "1 / 0")
        self.assertEqual(row["rank"], "1")
        self.assertIsNone(step.memory_table([(Run, bare)]))


class SweepPhases(unittest.TestCase):
    """Each phase of the sweep's steps, measured beside the calibrated
    planner's split: medians over the configs and the median signed error;
    rows stored before the measured split add nothing."""

    def test_measured_and_predicted_phases_side_by_side(self):
        def row(pipeline, reduce, predicted_dp):
            return {"config": "dp2", "tokens_per_s": 1.0, "step_s": pipeline + reduce + 1e-3,
                    "predicted_step_s": 0.010 + predicted_dp + 1e-3,
                    "predicted": {"dp_s": predicted_dp, "optimizer_s": 1e-3},
                    "measured": {"pipeline_s": pipeline, "reduce_s": reduce, "optimizer_s": 2e-3}}

        case = {"ranks": 2, "perf": {"metrics": {"ranking": [row(0.020, 0.002, 0.001), row(0.020, 0.002, 0.001)]}}}
        old = {"ranks": 4, "perf": {"metrics": {"ranking": [{"config": "dp4", "tokens_per_s": 1.0, "step_s": 0.1,
                                                             "predicted_step_s": 0.1, "predicted": {}}]}}}

        class Run:
            label = "vm x2"

        table = step.sweep_phase_table([(Run, case), (Run, old)])
        self.assertEqual(len(table.rows), 1)
        cells = dict(zip(table.columns, table.rows[0]))
        self.assertEqual(cells["configs"], "2")
        self.assertEqual(cells["forward + backward"], "20 / 10 (-50%)")
        self.assertEqual(cells["gradient reduction"], "2 / 1 (-50%)")
        self.assertEqual(cells["optimizer"], "2 / 1 (-50%)")
        self.assertIsNone(step.sweep_phase_table([(Run, old)]))


class MissingData(unittest.TestCase):
    def test_missing_suites_are_skipped_with_a_line(self):
        with tempfile.TemporaryDirectory() as out:
            rc, stdout, stderr = run_script("report.py", REAL_FIXTURE, "-o", out)
            self.assertEqual(rc, 0, stdout + stderr)
            for suite in ("attention", "moe", "pipeline", "step", "tp_sp"):
                self.assertRegex(stdout, rf"skipped: no {suite} cases in the results")
            with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
                self.assertIn("Skipped: no attention cases", f.read())
            self.assertTrue(os.path.isfile(os.path.join(out, "collectives_busbw_f32.png")))

    def test_every_section_survives_empty_and_untimed_runs(self):
        def untimed(doc):  # as `sextant run --iters 0`: checks only
            for c in doc["cases"]:
                c["perf"] = {"time": {}, "metrics": {}}

        def empty(doc):
            doc["cases"] = []
            helpers.recount(doc)
        with tempfile.TemporaryDirectory() as tmp:
            for name, edit in (("untimed", untimed), ("empty", empty)):
                with self.subTest(name):
                    path = write(derived(SYNTHETIC_FIXTURE, edit), tmp, f"{name}.json")
                    result = build_report(load_runs([path]), os.path.join(tmp, name))
                    self.assertEqual(result.errors, [])
                    self.assertEqual(len(result.sections), len(SECTIONS))
                    drawn = [s.title for s in result.sections if not s.skipped]
                    self.assertEqual(drawn, ["Conformance"] if name == "untimed" else [])
                    self.assertGreater(os.path.getsize(result.html), 500)

    def test_a_broken_section_is_reported_and_the_rest_written(self):
        def corrupt_timeline(doc):  # a suite writing a timeline in a shape nobody agreed on
            doc["cases"] = [c for c in doc["cases"] if c["suite"] in ("pipeline", "step")]
            for c in doc["cases"]:
                if c["suite"] == "pipeline":
                    c["perf"]["metrics"]["timeline"] = [[["nonsense"]]]
        with tempfile.TemporaryDirectory() as tmp:
            path = write(derived(SYNTHETIC_FIXTURE, corrupt_timeline), tmp, "odd.json")
            rc, stdout, stderr = run_script("report.py", path, "-o", os.path.join(tmp, "out"))
            self.assertEqual(rc, 1)
            self.assertIn("ERROR in Pipeline schedules", stderr)
            self.assertIn("report: Training step (MFU and throughput): 2 figure(s)", stdout)
            self.assertTrue(os.path.isfile(os.path.join(tmp, "out", "index.html")))

    def test_bad_input_exits_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, _, stderr = run_script("report.py", os.path.join(tmp, "absent.json"), "-o", tmp)
            self.assertEqual(rc, 2)
            self.assertIn("cannot read", stderr)


class ConformanceCells(unittest.TestCase):
    """The colour of a cell: error/bound, exact counts, errors, planted faults."""

    @staticmethod
    def case(status="pass", tensors=(), wrong=None, fault=None, error=None):
        checks = [{"name": n, "error": e, "bound": b, "nonfinite": 0} for n, e, b in tensors]
        conf = {"status": status, "tensors": checks, "failures": [] if status != "fail" else ["x"]}
        if wrong is not None:
            conf.update(wrong=wrong, checked=100)
        c = {"suite": "s", "case": "c", "dtype": "f32", "ranks": 2, "fault": fault, "conformance": conf}
        if error:
            c["error"] = error
        return c

    def test_categories(self):
        C = self.case
        self.assertEqual(conformance.category(C(tensors=[("a", 1e-3, 1e-2)])), "pass")
        self.assertEqual(conformance.category(C(tensors=[("a", 1e-3, 1e-2), ("b", 6e-3, 1e-2)])), "near")
        self.assertEqual(conformance.category(C("fail", tensors=[("a", 2e-2, 1e-2)])), "fail")
        self.assertEqual(conformance.category(C("fail", wrong=3)), "fail")
        self.assertEqual(conformance.category(C("pass", wrong=0)), "pass")
        self.assertEqual(conformance.category(C("fail", error="boom")), "error")
        self.assertEqual(conformance.category(C("skip")), "skip")
        self.assertEqual(conformance.category(C("fail", wrong=3, fault="drop_rank")), "caught")
        self.assertEqual(conformance.category(C("pass", wrong=0, fault="drop_rank")), "fail")
        self.assertEqual(conformance.cell_text(C("pass", wrong=0, fault="drop_rank")), "not caught")

    def test_margin_is_the_worst_tensor_and_nonfinite_is_zero(self):
        c = self.case(tensors=[("a", 1e-3, 1e-2), ("b", 4e-3, 1e-2)])
        self.assertAlmostEqual(conformance.margin(c), 2.5)
        self.assertEqual(conformance.cell_text(c), "2.5")
        c["conformance"]["tensors"].append({"name": "n", "error": None, "bound": 1e-2, "nonfinite": 2})
        self.assertEqual(conformance.cell_text(c), "NaN/Inf")

    def test_the_worse_of_the_one_device_and_the_distributed_margin_sets_the_cell(self):
        # As good as one rank (error / bound 0.5, the old matrix's 0.5) but the
        # one-device error at 0.6 of its float64 gate: near, and the title says why.
        t = {"name": "dk", "error": 2e-3, "bound": 4e-3, "nonfinite": 0, "base_error": 2e-3, "base_bound": 3.3e-3}
        c = self.case()
        c["conformance"]["tensors"] = [t]
        self.assertAlmostEqual(conformance.margin(c), 1.65)
        self.assertEqual(conformance.category(c), "near")
        title = conformance.cell_title(c)
        self.assertIn("dk: one-device error 0.002 (gate 0.0033, margin 1.6)", title)
        self.assertIn("distributed error 0.002 (bound 0.004)", title)
        t["base_bound"] = 2e-2
        self.assertEqual(conformance.category(c), "pass")
        # The systematic check's limits count on the distributed side.
        t["systematic"] = {"scale": 9e-4, "scale_limit": 1e-3, "offset": 0.0, "offset_limit": 1e-3, "pass": True}
        self.assertAlmostEqual(conformance.margin(c), 1e-3 / 9e-4)
        self.assertIn("systematic scale 9.00e-04 (limit 0.001)", conformance.cell_title(c))


class ScreenSection(unittest.TestCase):
    """The screen section: its figures from what the results hold, and the
    per-rank bars for a case of any suite that has per-rank timings."""

    def test_screen_figures_are_drawn_and_marked(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = build_report(load_runs([SCREEN_FIXTURE]), tmp)
            self.assertEqual(result.errors, [])
            section = next(s for s in result.sections if s.title == screen.TITLE)
            self.assertEqual([f.file for f in section.figures],
                             ["screen_links.png", "screen_compute.png", "screen_rank_times.png"])
            for f in section.figures:
                with open(os.path.join(tmp, f.file), "rb") as png:
                    self.assertEqual(png.read(8), PNG_MAGIC)
            self.assertIn("Red boxes: links the screen names slow", section.figures[0].caption)
            self.assertRegex(section.notes[0], r"^2 suspects: sdc rank 5 \(nodeB\) in screen/compute")
            self.assertEqual([t.title for t in section.tables], ["Suspects", "Stragglers (straggler_score > 1.5)"])
            self.assertEqual([row[3] for row in section.tables[1].rows], ["1"])  # the slow link's first end

    def test_ranks_are_labelled_with_their_hosts(self):
        run = load_runs([SCREEN_FIXTURE])[0]
        compute, links, _ = run.cases
        hosts = ["nodeA"] * 4 + ["nodeB"] * 4
        self.assertEqual(screen.rank_hosts(run, links), hosts)    # the link matrix says
        self.assertEqual(screen.rank_hosts(run, compute), hosts)  # system.topology says

    def test_per_rank_timings_of_another_suite_draw_the_rank_times_only(self):
        doc = load(REAL_FIXTURE)
        multi = [i for i, c in enumerate(doc["cases"]) if c["ranks"] == 4][:3]

        def add_per_rank(d):
            for k, i in enumerate(multi):
                stats = d["cases"][i]["perf"]["time"]["run"]
                medians = [stats["median"] * (2.0 if (k, r) == (1, 2) else 1.0) for r in range(4)]
                typical = sorted(medians)[1] / 2 + sorted(medians)[2] / 2
                stats["per_rank"] = {"median": medians, "p10": medians, "p90": medians, "p99": medians,
                                     "cv_pct": [1.0] * 4, "straggler_score": [m / typical for m in medians],
                                     "wait_share": [1.0 if m > typical else 0.0 for m in medians]}
            d["cases"] = [d["cases"][i] for i in multi]
            helpers.recount(d)
        with tempfile.TemporaryDirectory() as tmp:
            runs = load_runs([write(derived(REAL_FIXTURE, add_per_rank), tmp, "per_rank.json")])
            self.assertEqual(screen.rank_time_choice(screen.timed_pairs(runs)), [(runs[0], runs[0].cases[1])])
            section = screen.build(runs, common.FigureWriter(tmp))
            self.assertEqual([f.file for f in section.figures], ["screen_rank_times.png"])
            self.assertIn("2 more instances with per-rank timings", section.figures[0].caption)
            self.assertEqual([t.title for t in section.tables], ["Stragglers (straggler_score > 1.5)"])
            self.assertEqual(section.tables[0].rows[0][1:4], [runs[0].cases[1]["id"], "run", "2"])
            self.assertTrue(os.path.isfile(os.path.join(tmp, "screen_rank_times.png")))

    def test_no_screen_and_no_per_rank_timings_skips(self):
        section = screen.build(load_runs([REAL_FIXTURE]), None)
        self.assertEqual(section.skipped, "no screen cases and no per-rank timings in the results")


class Captions(unittest.TestCase):
    def test_staged_runs_say_their_timings_are_not_representative(self):
        def staged(doc):
            doc["system"]["backend"] = "mpi-staged"
            doc["cases"][0]["perf"]["metrics"]["comm"] = {"backend": "mpi-staged", "overlap": False,
                                                          "timings_representative": False}
        with tempfile.TemporaryDirectory() as tmp:
            run = load_runs([write(derived(REAL_FIXTURE, staged), tmp, "staged.json")])[0]
            self.assertIn("backend mpi-staged (timings not representative of the hardware)", run.describe())
        self.assertNotIn("not representative", load_runs([REAL_FIXTURE])[0].describe())


class Failures(unittest.TestCase):
    def test_failed_and_errored_instances_are_reported(self):
        def break_two(doc):
            doc["cases"] = doc["cases"][:24]  # the ranks-1 cases: a quicker report
            doc["cases"][0]["conformance"].update(status="fail", wrong=5, failures=["all_reduce: 5 wrong elements"])
            doc["cases"][1].update(error="rank 0 setup: out of memory")
            doc["cases"][1]["conformance"]["status"] = "fail"
            helpers.recount(doc)
        with tempfile.TemporaryDirectory() as tmp:
            runs = load_runs([write(derived(REAL_FIXTURE, break_two), tmp, "broken.json")])
            result = build_report(runs, os.path.join(tmp, "out"))
            self.assertEqual(result.errors, [])
            table = next(t for s in result.sections for t in s.tables if t.title.startswith("Failures"))
            self.assertEqual([row[2:] for row in table.rows],
                             [["fail", "all_reduce: 5 wrong elements"], ["error", "rank 0 setup: out of memory"]])
            with open(result.html, encoding="utf-8") as f:
                self.assertIn("<p class=fail>Conformance: 22 instances pass, 1 fail, 1 could not run", f.read())


class Timelines(unittest.TestCase):
    def test_the_three_json_forms_read_alike(self):
        row0, row1 = [[0, "F", 0, 0.0, 1.0]], [[1, "F", 0, 1.0, 2.0], [1, "B", 0, 2.0, 4.0]]
        expected = [[(0, "F", 0, 0.0, 1.0)], [(1, "F", 0, 1.0, 2.0), (1, "B", 0, 2.0, 4.0)]]
        as_dicts = [{"stage": a[0], "type": a[1], "microbatch": a[2], "start_s": a[3], "end_s": a[4]} for a in row1]
        for form in ([row0, row1], {"1": row1, "0": row0}, [{"rank": 1, "actions": as_dicts},
                                                            {"rank": 0, "actions": row0}]):
            self.assertEqual(pipeline.timeline_actions(form), expected)


class TraceLinks(unittest.TestCase):
    """The pipeline table links each case's Chrome trace, found where the run
    wrote it or in traces/ beside a copied results file; "-" otherwise."""

    def test_links_point_at_the_trace_from_the_report_folder(self):
        from types import SimpleNamespace
        from sextant_results.report.common import Link
        from sextant_results.report.page import html_table, md_table
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "copied", "run.json")
            trace = os.path.join(tmp, "copied", "traces", "trace-1-pipeline_1f1b.json")
            os.makedirs(os.path.dirname(trace))
            with open(trace, "w", encoding="utf-8") as f:
                f.write("[]")
            run = SimpleNamespace(path=results)
            case = {"perf": {"metrics": {"trace_file": {"value": "/elsewhere/trace-1-pipeline_1f1b.json"}}}}
            link = pipeline.trace_link(run, case, os.path.join(tmp, "report"))
            self.assertEqual(link, Link("trace", "../copied/traces/trace-1-pipeline_1f1b.json"))
            self.assertIn('<a href="../copied/traces/trace-1-pipeline_1f1b.json">trace</a>',
                          html_table(["trace"], [[link]]))
            self.assertIn("[trace](<../copied/traces/trace-1-pipeline_1f1b.json>)", md_table(["trace"], [[link]]))
            os.remove(trace)
            self.assertEqual(pipeline.trace_link(run, case, tmp), "-")
            self.assertEqual(pipeline.trace_link(run, {"perf": {"metrics": {}}}, tmp), "-")


class OneSlice(unittest.TestCase):
    """A figure draws one point per (run, line, x): the other params are fixed
    to the value that keeps every line, and the caption says which."""

    def test_fixes_the_params_that_would_stack_points(self):
        from types import SimpleNamespace
        from sextant_results.report.common import fixed_text, one_slice
        run = SimpleNamespace(index=0)

        def case(variant, cp, dtype, kv_heads, seq):
            return (run, {"dtype": dtype, "params": {"variant": variant, "kv_heads": kv_heads, "seq": seq * cp},
                          "parallel": {"cp": cp}})
        pairs = [case(v, cp, d, kv, 64) for v in ("p2p", "a2a") for cp in (1, 2, 4) for d in ("bf16", "f32")
                 for kv in (4, 16)]
        pairs.append(case("ring_only", 2, "bf16", 4, 64))  # a line only at bf16: bf16 keeps every line
        kept, fixed = one_slice(pairs, lambda c: c["params"]["variant"], lambda c: c["parallel"]["cp"],
                                exclude=("variant",))
        self.assertEqual(fixed, {"dtype": "bf16", "kv_heads": 4})
        points = [(c["params"]["variant"], c["parallel"]["cp"]) for _, c in kept]
        self.assertEqual(len(points), len(set(points)))                    # one point each
        self.assertEqual({p[0] for p in points}, {"p2p", "a2a", "ring_only"})  # no line lost
        self.assertNotIn("seq", fixed)                                     # seq moves with x only
        self.assertEqual(fixed_text(fixed), "Drawn at bf16, kv_heads=4; the table lists every instance. ")


class SeveralRuns(unittest.TestCase):
    def test_two_runs_of_one_machine_get_distinct_labels(self):
        def later(doc):
            doc["run"].update(id="later", start="2026-12-01T00:00:00Z")
        with tempfile.TemporaryDirectory() as tmp:
            second = write(derived(REAL_FIXTURE, later), tmp, "later.json")
            runs = load_runs([REAL_FIXTURE, second])
            self.assertNotEqual(runs[0].label, runs[1].label)
            self.assertIn("2026-12-01T00:00:00Z", runs[1].label)
            result = build_report(runs, os.path.join(tmp, "out"))
            self.assertEqual(result.errors, [])
            busbw = next(f for f in result.figures if f.file == "collectives_busbw_f32.png")
            self.assertIn("Systems: ", busbw.caption)
            self.assertIn(runs[1].label, busbw.caption)
            matrices = [f for f in result.figures if f.file.startswith("conformance_")]
            self.assertEqual(len(matrices), 1, "one machine, one matrix")
            self.assertIn("2 runs", matrices[0].title)

    def test_two_backends_of_one_system_get_their_own_columns(self):
        def staged(doc):
            doc["run"].update(id="staged", start="2026-12-01T00:00:00Z")
            doc["system"]["backend"] = "mpi-staged"
            for c in doc["cases"]:
                c["backend"] = "mpi-staged"
        with tempfile.TemporaryDirectory() as tmp:
            second = write(derived(REAL_FIXTURE, staged), tmp, "staged.json")
            runs = load_runs([REAL_FIXTURE, second])
            groups = conformance.system_groups(runs)
            self.assertEqual(len(groups), 1)
            _, columns, _, _ = conformance.matrix(groups[0][1])
            ranks = {c["ranks"] for c in runs[0].cases}
            self.assertEqual(set(columns), {(n, b) for n in ranks for b in ("mpi", "mpi-staged")})
            self.assertIn("backends mpi, mpi-staged", conformance.describe_group(groups[0][1]))


if __name__ == "__main__":
    unittest.main()


QUALIFICATION = {
    "verdict": "FAIL",
    "expectations": {"path": "results/expectations/host.toml", "name": "CPU hosts", "version": "2026-12-01"},
    "counts": {"pass": 1, "fail": 1, "not_judged": 1},
    "criteria": [
        {"criterion": "conformance", "what": "cases that failed", "unit": "cases", "bound": "at most",
         "status": "PASS", "measured": 0, "threshold": 0, "margin_pct": None, "from": "10 cases run",
         "threshold_source": "every case must pass", "note": ""},
        {"criterion": "gemm_tflops", "what": "ops/gemm", "unit": "TFLOP/s", "bound": "at least", "status": "FAIL",
         "measured": 0.001, "threshold": 0.002, "margin_pct": -50.0, "from": "ops/gemm m=256",
         "threshold_source": "absolute", "note": ""},
        {"criterion": "all_reduce_busbw_inter_GBps", "what": "all_reduce busbw", "unit": "GB/s", "bound": "at least",
         "status": "NOT MEASURED", "measured": None, "threshold": 0.01, "margin_pct": None, "from": "",
         "threshold_source": "absolute", "note": "one node: run on several to measure it"},
    ],
}


class Qualification(unittest.TestCase):
    """sextant qualify's verdict heads the report: PASS or FAIL per criterion."""

    def test_the_verdict_heads_the_page_and_the_summary(self):
        doc = derived(REAL_FIXTURE, lambda d: d.update(qualification=QUALIFICATION), keep=3)
        with tempfile.TemporaryDirectory() as tmp:
            path = write(doc, tmp, "qualified.json")
            rc, out, err = run_script("report.py", path, "-o", os.path.join(tmp, "report"))
            self.assertEqual(rc, 0, out + err)
            with open(os.path.join(tmp, "report", "index.html"), encoding="utf-8") as f:
                page = f.read()
            with open(os.path.join(tmp, "report", "summary.md"), encoding="utf-8") as f:
                summary = f.read()
        verdict = page.find("Cluster qualification: FAIL")
        self.assertGreater(verdict, 0)
        self.assertLess(verdict, page.find("<h2>Runs</h2>"))
        for text in ("gemm_tflops", "NOT MEASURED", "-50%", "one node: run on several", "class=fail>FAIL"):
            self.assertIn(text, page)
        self.assertLess(summary.find("Cluster qualification: FAIL"), summary.find("## Runs"))
        self.assertIn("| gemm_tflops | FAIL | 0.001 | >= 0.002 | -50% |", summary)

    def test_the_schema_holds_the_verdict(self):
        doc = derived(REAL_FIXTURE, lambda d: d.update(qualification=QUALIFICATION), keep=3)
        bad = derived(REAL_FIXTURE, lambda d: d.update(qualification=dict(QUALIFICATION, verdict="MAYBE")), keep=3)
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = run_script("validate.py", write(doc, tmp, "good.json"))
            self.assertEqual(rc, 0, out + err)
            rc, out, err = run_script("validate.py", write(bad, tmp, "bad.json"))
            self.assertNotEqual(rc, 0, out + err)
