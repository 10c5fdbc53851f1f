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

}  // namespace sextant
