"""check_format.sh: lists the changed C++ files that .clang-format would
change (exit 1), passes formatted ones (exit 0), refuses a bad base (exit 2).
Runs in a scratch git repository holding a copy of the project's style."""
import os
import shutil
import subprocess
import tempfile
import unittest

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)


def git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@unittest.skipUnless(shutil.which("clang-format") and shutil.which("git"), "clang-format or git not installed")
class CheckFormat(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = self.tmp.name
        os.makedirs(os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(SCRIPTS, "check_format.sh"), os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(ROOT, ".clang-format"), self.repo)
        git(self.repo, "init", "-q", "-b", "main")
        self.write("a.cc", "int f() { return 1; }\n")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "base")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.repo, name), "w", encoding="utf-8") as f:
            f.write(text)

    def check(self, *args):
        r = subprocess.run(["bash", "scripts/check_format.sh", *args], cwd=self.repo, capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def test_an_unformatted_change_is_named_and_fails(self):
        self.write("b.cc", "int   g( ){return 2;}\n")
        self.write("a.cc", "int f() { return 1; }\nint h() { return 3; }\n")
        rc, out = self.check("HEAD")
        self.assertEqual(rc, 1, out)
        self.assertIn("b.cc", out)
        self.assertNotIn("a.cc", out)

    def test_formatted_changes_pass(self):
        self.write("b.cc", "int g() { return 2; }\n")
        rc, out = self.check("HEAD")
        self.assertEqual(rc, 0, out)
        self.assertIn("all formatted", out)

    def test_on_main_the_last_commit_is_checked(self):
        self.write("b.cc", "int   g( ){return 2;}\n")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "unformatted")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("b.cc", out)

    def test_a_bad_base_exits_2(self):
        rc, out = self.check("no-such-ref")
        self.assertEqual(rc, 2, out)
        self.assertIn("is not a commit", out)


if __name__ == "__main__":
    unittest.main()
