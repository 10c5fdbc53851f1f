#include "harness/compare.h"

#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

ErrorStats compare(const Tensor& x, const Tensor& ref) {
  if (!x.is_host() || !ref.is_host()) throw RuntimeError("compare needs host tensors");
  if (x.shape() != ref.shape())
    throw RuntimeError(cat("compare: shape ", shape_string(x.shape()), " vs reference ", shape_string(ref.shape())));
  ErrorStats s;
  s.count = x.numel();
  const Tensor xd = x.dtype() == DType::f64 ? x : x.to(DType::f64);
  const Tensor rd = ref.dtype() == DType::f64 ? ref : ref.to(DType::f64);
  const double* a = xd.data<double>();
  const double* r = rd.data<double>();
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < s.count; ++i) {
    ref2 += r[i] * r[i];
    if (!std::isfinite(a[i])) {
      ++s.nonfinite;
      continue;
    }
    double d = a[i] - r[i];
    diff2 += d * d;
    s.max_abs = std::max(s.max_abs, std::abs(d));
  }
  s.ref_norm = std::sqrt(ref2);
  s.rel_l2 = s.ref_norm > 0 ? std::sqrt(diff2) / s.ref_norm : std::sqrt(diff2);
  if (s.nonfinite > 0) s.rel_l2 = std::numeric_limits<double>::infinity();
  return s;
}

namespace {
// Floors: published practice (TE's CP tests use 2.5e-2 for bf16 and 5e-3 for
// fp16; flash-attn uses the 2x-baseline rule) and the unit roundoff u of each
// format: a correct kernel lands within a few hundred u on our sizes.
const ToleranceRow kTable[] = {
    {DType::f64, 1e-10, "f64 kernels: u = 1.1e-16, a few million u covers reductions of any order"},
    {DType::f32, 1e-5, "f32 storage and accumulation: u = 6e-8, ~150u covers K <= 4096 dot products and layers"},
    {DType::bf16, 2.5e-2, "bf16 storage, f32 accumulation: u = 3.9e-3; TE's CP tests use 2.5e-2"},
    {DType::f16, 5e-3, "f16 storage, f32 accumulation: u = 4.9e-4; TE's CP tests use 5e-3"},
};
}  // namespace

const ToleranceRow& tolerance(DType dtype) {
  for (const ToleranceRow& row : kTable)
    if (row.dtype == dtype) return row;
  throw RuntimeError("no tolerance row for dtype " + dtype_name(dtype));
}

double conformance_bound(DType dtype, double base_error) {
  return std::max(2.0 * base_error, tolerance(dtype).floor);
}

}  // namespace sextant
