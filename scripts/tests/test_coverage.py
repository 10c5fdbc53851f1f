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


DEVICE_SOURCE = """\
void pack(const Tensor& x, Tensor& flat) {
  if (!flat.is_host()) {
    for (const Tensor& t : blocks) {
      write_slice(flat, t);
    }
    return;
  }
  copy(x, flat);
}
Tensor permute(const Tensor& x) {
  if (x.is_host()) return permute_host(x);
  return permute_device(x);
}
void unpack(const Tensor& flat) {
  if (flat.is_host()) copy_host(flat);
  else copy_device(flat);
}
const char* name(Kind k) {
  switch (k) {
    case Kind::a: return "a";
    default: return "b";
  }
  return "?";
}
void encode(float v) {
  const bool wraps = kernel_fault_planted(KernelFault::wraps);
  if (wraps) {
    code = wrap(v);
  }
}
"""


class Guards(unittest.TestCase):
    lines = DEVICE_SOURCE.split("\n")

    def kind(self, line):
        return coverage.reason_of("kernels/ops/y.cc", "f()", self.lines, line - 1)[0]

    def test_host_tests_guard_device_paths(self):
        self.assertEqual(self.kind(4), "device path")  # inside a loop under !is_host()
        self.assertEqual(self.kind(12), "device path")  # after `if (is_host()) return`
        self.assertEqual(self.kind(16), "device path")  # the else of an is_host() test
        self.assertEqual(self.kind(8), "not swept")  # the host path itself

    def test_switches_defaults_and_fault_variables(self):
        self.assertEqual(self.kind(23), "scope end")  # after a switch that returns for every value
        self.assertEqual(self.kind(21), "not swept")  # `default:` is no fault
        self.assertEqual(self.kind(28), "planted fault")  # under a variable set from a planted fault


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
