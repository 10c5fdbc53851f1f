"""coverage.py's reasons for unreached lines, on small pieces of C++, and
its merge of a line's copies (template instances, inline functions)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import coverage  # noqa: E402

SOURCE = """\
Tensor gemm(const Tensor& a, const Tensor& b) {
  if (a.dim(1) != b.dim(0))
    throw UsageError(cat("gemm: inner dims ", a.dim(1), " and ",
                         b.dim(0), " differ"));
  if (a.device() == Device::cuda) {
    return SEXTANT_CUDA_CALL(cuda::gemm(a, b));
  }
  if (fault_ == Fault::transpose) {
    return transposed(a, b);
  }
  Tensor c = multiply(a, b);
  return c;
}
Tensor broken(const Tensor& a) {
  return a;
}
void run() {
  if (faults.swap) y = broken(x);
}
"""


class Reasons(unittest.TestCase):
    lines = SOURCE.split("\n")

    def kind(self, line, function="gemm(Tensor const&, Tensor const&)"):
        return coverage.reason_of("kernels/ops/x.cc", function, self.lines, line - 1)[0]

    def test_each_kind(self):
        self.assertEqual(self.kind(3), "error path")
        self.assertEqual(self.kind(4), "error path")  # a throw's continuation line
        self.assertEqual(self.kind(6), "device path")
        self.assertEqual(self.kind(9), "planted fault")
        self.assertEqual(self.kind(7), "scope end")
        self.assertEqual(self.kind(11), "not swept")
        # A function whose every call is under a fault.
        self.assertEqual(self.kind(15, "sextant::(anonymous namespace)::broken(Tensor const&)"), "planted fault")

    def test_short_names(self):
        self.assertEqual(coverage.short_name("sextant::tp::(anonymous namespace)::split_qkv(Tensor const&)"),
                         "split_qkv")
        self.assertEqual(coverage.short_name("void sextant::ops::run<float>(long)"), "run")


class Merge(unittest.TestCase):
    def test_a_line_is_reached_when_any_copy_ran(self):
        data = {"files": [{"file": "scripts/tests/test_coverage.py", "functions": [], "lines": [
            {"line_number": 1, "count": 0, "function_name": "f<double>"},
            {"line_number": 1, "count": 3, "function_name": "f<float>"},
            {"line_number": 2, "count": 0, "function_name": "f<double>"},
        ]}]}
        [f] = coverage.analyse(data)
        self.assertEqual((f["lines"], f["covered"]), (2, 1))
        self.assertEqual([u["line"] for u in f["unreached"]], [2])


if __name__ == "__main__":
    unittest.main()
