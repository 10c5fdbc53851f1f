#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

std::vector<double> as_f64(const Tensor& t) {
  const Tensor d = t.dtype() == DType::f64 ? t : t.to(DType::f64);
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// Jackknife standard error of a ratio of sums, num / den, over groups whose
// partial sums are given: sqrt((G - 1) / G * sum_g (t_g - mean t)^2), with
// t_g the ratio with group g left out.
double jackknife_se(const std::vector<double>& num, const std::vector<double>& den) {
  double total_num = 0, total_den = 0;
  for (size_t g = 0; g < num.size(); ++g) total_num += num[g], total_den += den[g];
  std::vector<double> t(num.size());
  double mean = 0;
  for (size_t g = 0; g < num.size(); ++g) {
    t[g] = (total_num - num[g]) / (total_den - den[g]);
    mean += t[g] / static_cast<double>(num.size());
  }
  double ss = 0;
  for (double v : t) ss += (v - mean) * (v - mean);
  const double n = static_cast<double>(num.size());
  return std::sqrt((n - 1) / n * ss);
}

}  // namespace

Systematic systematic_difference(const Tensor& x, const Tensor& y, const Tensor& ref, int groups,
                                 int64_t min_elements) {
  if (!x.is_host() || !y.is_host() || !ref.is_host() || x.shape() != ref.shape() || y.shape() != ref.shape())
    throw RuntimeError("systematic_difference needs host tensors of one shape");
  Systematic s;
  const int64_t n = ref.numel();
  if (groups < 2 || n < std::max<int64_t>(min_elements, 2 * groups)) return s;
  const std::vector<double> a = as_f64(x), b = as_f64(y), r = as_f64(ref);
  // Per group: sum d r, sum r r, sum d, count.
  std::vector<double> dr(groups, 0), rr(groups, 0), d1(groups, 0), cnt(groups, 0);
  double r2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return s;
    const size_t g = static_cast<size_t>(i * groups / n);
    const double d = a[i] - b[i];
    dr[g] += d * r[i], rr[g] += r[i] * r[i], d1[g] += d, cnt[g] += 1;
    r2 += r[i] * r[i];
  }
  if (!(r2 > 0)) return s;
  for (int g = 0; g < groups; ++g)
    if (!(rr[g] < r2)) return s;  // one group holds the whole reference: no jackknife
  double sdr = 0, sd = 0;
  for (int g = 0; g < groups; ++g) sdr += dr[g], sd += d1[g];
  const double rms = std::sqrt(r2 / static_cast<double>(n));
  s.estimated = true;
  s.scale = sdr / r2;
  s.scale_se = jackknife_se(dr, rr);
  s.offset = sd / static_cast<double>(n) / rms;
  s.offset_se = jackknife_se(d1, cnt) / rms;
  return s;
}

double scale_against(const Tensor& x, const Tensor& ref) {
  const std::vector<double> a = as_f64(x), r = as_f64(ref);
  double dr = 0, rr = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::quiet_NaN();
    dr += (a[i] - r[i]) * r[i], rr += r[i] * r[i];
  }
  return rr > 0 ? dr / rr : 0.0;
}

}  // namespace sextant
