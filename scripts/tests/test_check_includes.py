"""check_includes.py on small trees: each rule fails where it should, and
the real tree passes."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import check_includes  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def tree(files):
    root = tempfile.mkdtemp()
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


def inc(*headers):
    return "".join(f'#include "{h}"\n' for h in headers)


class CheckIncludes(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        root = tree({
            "harness/a.h": "",
            "kernels/ops/gemm.h": inc("harness/a.h"),
            "kernels/ops/gemm.cc": inc("kernels/ops/gemm.h"),
            "kernels/moe/router.h": inc("kernels/ops/gemm.h"),
            "suites/moe/case.cc": inc("kernels/moe/router.h", "reference/moe.h"),
            "reference/moe.h": inc("harness/a.h"),
            "app/main.cc": inc("suites/moe/case.cc".replace(".cc", ".h")),
        })
        self.assertEqual(check_includes.check(root), [])

    def test_a_kernel_including_a_suite_breaks_the_layers(self):
        root = tree({"suites/x/x.h": "", "kernels/ops/y.cc": inc("suites/x/x.h")})
        problems = check_includes.check(root)
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith("layer: kernels/ops/y.cc:1 includes suites/x/x.h"), problems)

    def test_the_reference_never_reads_a_kernel_but_a_kernel_test_may_read_the_reference(self):
        root = tree({
            "kernels/ops/k.h": "",
            "reference/r.h": inc("kernels/ops/k.h"),
            "kernels/ops/k_test.cc": inc("reference/r2.h"),
            "reference/r2.h": "",
            "kernels/ops/k.cc": inc("reference/r2.h"),
        })
        problems = check_includes.check(root)
        self.assertEqual(len(problems), 2, problems)
        self.assertTrue(any("reference/r.h:1 includes kernels/ops/k.h" in p for p in problems))
        self.assertTrue(any("kernels/ops/k.cc:1 includes reference/r2.h" in p for p in problems))

    def test_an_include_back_up_inside_a_folder_is_a_module_cycle(self):
        # router.cc -> common.h -> dispatcher.h -> router.h: the cycle of old.
        root = tree({
            "kernels/moe/router.h": "",
            "kernels/moe/router.cc": inc("kernels/moe/router.h", "kernels/moe/common.h"),
            "kernels/moe/common.h": inc("kernels/moe/dispatcher.h"),
            "kernels/moe/dispatcher.h": inc("kernels/moe/router.h"),
        })
        problems = check_includes.check(root)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("module cycle: kernels/moe/common -> kernels/moe/dispatcher -> kernels/moe/router -> "
                      "kernels/moe/common", problems[0])

    def test_kernel_folders_that_need_each_other_are_a_folder_cycle(self):
        root = tree({
            "kernels/ops/a.h": inc("kernels/moe/b.h"),
            "kernels/moe/b.h": "",
            "kernels/moe/c.h": inc("kernels/ops/d.h"),
            "kernels/ops/d.h": "",
        })
        problems = check_includes.check(root)
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("folder cycle: moe -> ops -> moe"), problems)

    def test_the_repository_passes(self):
        self.assertEqual(check_includes.check(REPO), [])


if __name__ == "__main__":
    unittest.main()
