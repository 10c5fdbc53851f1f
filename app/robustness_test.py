#!/usr/bin/env python3
"""`sextant run` loses nothing finished and names stuck ranks. Each test starts
a real `mpirun`, disturbs it (kill -9 of a rank, SIGSTOP, SIGTERM/SIGINT of
mpirun), and checks what is left on disk: a schema-valid incomplete results
file holding the finished cases, that --resume completes it, and what the
watchdog says. Run by ctest:  robustness_test.py SEXTANT MPIEXEC VALIDATE_PY.

Bounds on time are generous (tens of seconds); nothing asserts on speed."""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SEXTANT = MPIEXEC = VALIDATE = None
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
# 132 small cases, each timed long enough (tens of ms on 2 cores; the whole
# run several seconds) that a signal sent after the first few lands mid-run
# even on a fast machine: with few iterations the run ends in under a second
# and a signal can arrive after the results are written.
WORKLOAD = ["collectives", "--profile", "ci", "--iters", "10000", "--warmup", "0"]


def mpirun(np, args, **kw):
    return [MPIEXEC, "-np", str(np), "--oversubscribe", SEXTANT, "run"] + args


def start(np, args):
    return subprocess.Popen(mpirun(np, args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def journal_cases(out_dir):
    """Finished cases in the run's journal (0 before it exists)."""
    paths = glob.glob(os.path.join(out_dir, "*.journal"))
    if not paths:
        return 0
    with open(paths[0]) as f:
        return max(0, sum(1 for line in f if line.endswith("\n")) - 1)


def wait_for_cases(proc, out_dir, count, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if journal_cases(out_dir) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {count} cases finished:\n{proc.stderr.read()}")
        time.sleep(0.02)
    raise AssertionError(f"{count} cases did not finish within {timeout} s")


def rank_pid(mpirun_pid, rank):
    """The pid of a rank started by this mpirun (its child carrying OMPI_COMM_WORLD_RANK)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != mpirun_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(entry)
    raise AssertionError(f"no rank {rank} under mpirun {mpirun_pid}")


def results_files(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "*.json")))


def wait_for_results(out_dir, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        files = results_files(out_dir)
        if files:
            return files
        time.sleep(0.05)
    return []


def load(path):
    with open(path) as f:
        return json.load(f)


def ids(doc):
    return [c["id"] for c in doc["cases"]]


class Interrupted(unittest.TestCase):
    def assert_valid(self, path):
        p = subprocess.run([sys.executable, VALIDATE, path], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def assert_incomplete(self, out_dir, reason_part, at_least):
        files = results_files(out_dir)
        self.assertEqual(len(files), 1, f"expected one results file in {out_dir}: {os.listdir(out_dir)}")
        self.assert_valid(files[0])
        doc = load(files[0])
        self.assertIs(doc["run"]["complete"], False)
        self.assertIn(reason_part, doc["run"]["incomplete_reason"])
        self.assertGreaterEqual(len(doc["cases"]), at_least)
        self.assertLess(len(doc["cases"]), doc["run"]["plan"]["cases"])
        return files[0], doc

    def uninterrupted_ids(self):
        with tempfile.TemporaryDirectory() as out:
            code, stdout, stderr = finish(start(2, WORKLOAD + ["-o", out, "-q"]))
            self.assertEqual(code, 0, stdout + stderr)
            return ids(load(results_files(out)[0]))

    def resume(self, path, out_dir):
        code, stdout, stderr = finish(start(2, WORKLOAD + ["-o", out_dir, "-q", "--resume", path]))
        self.assertEqual(code, 0, stdout + stderr)
        done = [f for f in results_files(out_dir) if f != path]
        self.assertEqual(len(done), 1, os.listdir(out_dir))
        self.assert_valid(done[0])
        doc = load(done[0])
        self.assertIs(doc["run"]["complete"], True)
        return doc

    def test_kill_9_of_a_rank_keeps_the_finished_cases_and_resume_completes_them(self):
        with tempfile.TemporaryDirectory() as out:
            proc = start(2, WORKLOAD + ["-o", out])
            wait_for_cases(proc, out, 3)
            os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
            self.assertTrue(wait_for_results(out, 10), "no results file within 10 s of kill -9")
            code, stdout, stderr = finish(proc)
            self.assertNotEqual(code, 0)
            path, partial = self.assert_incomplete(out, "SIGTERM", 3)
            self.assertEqual(glob.glob(os.path.join(out, "*.journal")), [], "the journal is folded into the results")
            resumed = self.resume(path, out)
            expected = self.uninterrupted_ids()
            self.assertEqual(ids(resumed), expected)
            self.assertEqual(ids(resumed)[:len(partial["cases"])], ids(partial), "the finished cases are kept")
            self.assertEqual(resumed["run"]["resumed_from"], partial["run"]["id"])

    def test_sigstop_of_a_rank_names_it_at_the_timeout(self):
        with tempfile.TemporaryDirectory() as out:
            proc = start(2, WORKLOAD + ["-o", out, "--timeout", "10"])
            wait_for_cases(proc, out, 3)
            os.kill(rank_pid(proc.pid, 1), signal.SIGSTOP)
            code, stdout, stderr = finish(proc, timeout=60)
            self.assertNotEqual(code, 0)
            self.assertIn("spent more than --timeout 10 s", stderr)
            stuck = [l for l in stderr.splitlines() if l.startswith("sextant: stuck: rank 1: ")]
            self.assertTrue(stuck, stderr)
            self.assertRegex(stuck[0], r", ((in|after) [a-z_ ]+[a-z0-9]|before any communicator call) "
                             r"\(stopped: SIGSTOP or a debugger\)$", stderr)
            path, doc = self.assert_incomplete(out, "stuck: rank 1: ", 3)
            self.assertIn("rank 0 (pid", doc["run"]["incomplete_reason"], "every rank's position is kept")

    def interrupt_mpirun(self, sig, name):
        with tempfile.TemporaryDirectory() as out:
            proc = start(2, WORKLOAD + ["-o", out])
            wait_for_cases(proc, out, 3)
            proc.send_signal(sig)
            code, stdout, stderr = finish(proc, timeout=60)
            self.assertNotEqual(code, 0)
            self.assert_incomplete(out, name, 3)

    def test_sigterm_of_mpirun_keeps_the_finished_cases(self):
        self.interrupt_mpirun(signal.SIGTERM, "terminated by SIGTERM")

    def test_sigint_of_mpirun_keeps_the_finished_cases(self):
        self.interrupt_mpirun(signal.SIGINT, "terminated by SIG")

    def test_recover_after_rank_0_itself_was_killed(self):
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as junit:
            proc = start(2, WORKLOAD + ["-o", out, "--junit", junit + "/"])
            wait_for_cases(proc, out, 3)
            os.kill(rank_pid(proc.pid, 0), signal.SIGKILL)
            finish(proc, timeout=60)
            self.assertEqual(results_files(out), [], "rank 0 was killed: nobody wrote results")
            journal = glob.glob(os.path.join(out, "*.journal"))
            self.assertEqual(len(journal), 1)
            p = subprocess.run([SEXTANT, "recover", journal[0]], capture_output=True, text=True, env=ENV, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assert_incomplete(out, "recovered from the journal", 3)
            self.assertEqual(len(glob.glob(os.path.join(junit, "*.xml"))), 1, "the run asked for JUnit")

    def test_resume_refuses_other_options(self):
        with tempfile.TemporaryDirectory() as out:
            proc = start(2, WORKLOAD + ["-o", out])
            wait_for_cases(proc, out, 2)
            proc.send_signal(signal.SIGTERM)
            finish(proc, timeout=60)
            path = results_files(out)[0]
            code, stdout, stderr = finish(start(2, WORKLOAD + ["-o", out, "--seed", "7", "--resume", path]))
            self.assertEqual(code, 2, stdout + stderr)
            lines = [l for l in stderr.splitlines() if l.startswith("sextant:")]
            self.assertEqual(len(lines), 1, stderr)
            self.assertIn(f"--resume '{path}': its run had seed 1234, this run 7", lines[0])
            self.assertEqual(results_files(out), [path], "a refused resume writes nothing")


class Outputs(unittest.TestCase):
    def test_unwritable_outputs_are_refused_before_any_case(self):
        for args, expected in [(["-o", "/proc"], "--out '/proc' is not writable: cannot create a file there"),
                               (["--junit", "/proc/x.xml"], "--junit '/proc/x.xml' cannot be written: folder '/proc'"),
                               (["--junit", "/proc/"], "--junit '/proc/' is not writable"),
                               (["--dump", "/proc"], "--dump '/proc' is not writable")]:
            with self.subTest(args=args), tempfile.TemporaryDirectory() as out:
                run_args = ["collectives/all_reduce", "--profile", "ci"] + args + ([] if "-o" in args else ["-o", out])
                code, stdout, stderr = finish(start(2, run_args))
                self.assertEqual(code, 2, stdout + stderr)
                lines = [l for l in stderr.splitlines() if l.startswith("sextant:")]
                self.assertEqual(len(lines), 1, stderr)
                self.assertIn(expected, lines[0])
                self.assertNotIn("collectives/all_reduce", stdout, "no case ran")
                self.assertEqual(os.listdir(out), [])

    def test_two_runs_with_the_same_junit_keep_both(self):
        with tempfile.TemporaryDirectory() as out:
            junit = os.path.join(out, "junit.xml")
            args = ["collectives/all_reduce", "--profile", "ci", "--iters", "1", "--no-results", "-q",
                    "--junit", junit]
            first, second = start(2, args), start(2, args)
            for proc in (first, second):
                code, stdout, stderr = finish(proc)
                self.assertEqual(code, 0, stdout + stderr)
            files = sorted(glob.glob(os.path.join(out, "junit*.xml")))
            self.assertEqual(len(files), 2, files)
            self.assertIn(junit, files)

    def test_timeout_inf_and_huge_mean_no_limit(self):
        for value in ["inf", "1e10", "1e300"]:
            with self.subTest(timeout=value), tempfile.TemporaryDirectory() as out:
                code, stdout, stderr = finish(start(2, ["collectives/all_reduce", "--profile", "ci", "--iters", "1",
                                                        "-o", out, "--timeout", value]))
                self.assertEqual(code, 0, stdout + stderr)
                self.assertIs(load(results_files(out)[0])["run"]["complete"], True)


if __name__ == "__main__":
    SEXTANT, MPIEXEC, VALIDATE = sys.argv[1], sys.argv[2], sys.argv[3]
    unittest.main(argv=sys.argv[:1] + sys.argv[4:], verbosity=2)
