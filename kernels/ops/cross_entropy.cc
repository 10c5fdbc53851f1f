#include "kernels/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"
#include "kernels/ops/vector_math.h"

namespace sextant::ops {

namespace {

void check_logits(const char* op, const Tensor& logits) {
  require_one_device(op, {{"logits", &logits}});
  require_rows(op, "logits", logits);
}

void check_targets(const char* op, const Tensor& logits, std::span<const int64_t> targets) {
  if (static_cast<int64_t>(targets.size()) != rows_of(logits))
    throw RuntimeError(cat(op, ": ", targets.size(), " targets for logits ", shape_string(logits.shape()),
                           " (one per row: ", rows_of(logits), ")"));
  for (size_t r = 0; r < targets.size(); ++r)
    if (targets[r] < 0 && targets[r] != kIgnoreTarget)
      throw RuntimeError(cat(op, ": target ", targets[r], " of row ", r, " is negative (and not the ignore index ",
                             kIgnoreTarget, ")"));
}

// The rows a mean divides by: those whose target is not ignored.
int64_t counted_rows(std::span<const int64_t> targets, int64_t rows) {
  if (targets.empty() || kernel_fault_planted(KernelFault::cross_entropy_counts_ignored)) return rows;
  return static_cast<int64_t>(std::count_if(targets.begin(), targets.end(), [](int64_t t) { return t >= 0; }));
}

void check_stats(const char* op, const CrossEntropyStats& s, int64_t rows) {
  require_one_device(op, {{"max", &s.max}, {"sum_exp", &s.sum_exp}});
  require_shape(op, "max", s.max, {rows});
  require_shape(op, "sum_exp", s.sum_exp, {rows});
}

// Row kernels over logits [rows, n]; F = float runs on lane vectors (simd.h).
template <class F>
void row_max_rows(int64_t rows, int64_t n, const F* x, F* max) {
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) max[r] = lane_max(x + r * n, n);
  });
}
template <class F>
void sum_exp_rows(int64_t rows, int64_t n, const F* x, const F* max, F* sum_exp) {
  run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) {
      const F m = max[r];
      sum_exp[r] = sum_map_lanes<decltype(lanes)::value, F>(
          n, [m](auto v) SEXTANT_INLINE_LAMBDA { return vexp(v - m); }, x + r * n);
    }
  });
}
// dx[r, j] = scale[r] * exp(x[r, j] - max[r]) (the softmax part of the gradient).
template <class F>
void scaled_softmax_rows(int64_t rows, int64_t n, const F* x, const F* max, const F* scale, F* dx) {
  run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) {
      const F m = max[r], s = scale[r];
      map_lanes<decltype(lanes)::value, F>(
          n, dx + r * n, [m, s](auto v) SEXTANT_INLINE_LAMBDA { return s * vexp(v - m); }, x + r * n);
    }
  });
}

// Calls fn(F{}, rows, n) with the compute type of the logits.
template <class Fn>
void per_logits(const Tensor& logits, Fn&& fn) {
  with_compute_type(logits.dtype(), [&](auto tag) { fn(tag, rows_of(logits), logits.dim(-1)); });
}

}  // namespace

Tensor cross_entropy_row_max(const Tensor& logits) {
  OpTimer timer(timed::kCrossEntropy, logits.device());
  check_logits("cross_entropy_row_max", logits);
  if (logits.dim(-1) == 0) throw RuntimeError("cross_entropy_row_max: logits have an empty vocabulary");
  Tensor out = Tensor::empty({rows_of(logits)}, compute_dtype(logits.dtype()), logits.device());
  if (!logits.is_host()) {
    SEXTANT_CUDA_CALL(cuda::cross_entropy_row_max(logits, out));
    return out;
  }
  per_logits(logits, [&](auto tag, int64_t rows, int64_t n) {
    using F = decltype(tag);
    HostIn<F> x(logits);
    row_max_rows<F>(rows, n, x.get(), out.data<F>());
  });
  return out;
}

Tensor cross_entropy_sum_exp(const Tensor& logits, const Tensor& row_max) {
  OpTimer timer(timed::kCrossEntropy, logits.device());
  const char* op = "cross_entropy_sum_exp";
  check_logits(op, logits);
  require_one_device(op, {{"logits", &logits}, {"row_max", &row_max}});
  require_shape(op, "row_max", row_max, {rows_of(logits)});
  Tensor out = Tensor::empty({rows_of(logits)}, compute_dtype(logits.dtype()), logits.device());
  if (!logits.is_host()) {
    SEXTANT_CUDA_CALL(cuda::cross_entropy_sum_exp(logits, row_max, out));
    return out;
  }
  per_logits(logits, [&](auto tag, int64_t rows, int64_t n) {
    using F = decltype(tag);
    HostIn<F> x(logits), m(row_max);
    sum_exp_rows<F>(rows, n, x.get(), m.get(), out.data<F>());
  });
  return out;
}

Tensor cross_entropy_target_logit(const Tensor& logits, std::span<const int64_t> targets, int64_t vocab_start) {
  OpTimer timer(timed::kCrossEntropy, logits.device());
  const char* op = "cross_entropy_target_logit";
  check_logits(op, logits);
  check_targets(op, logits, targets);
  Tensor out = Tensor::empty({rows_of(logits)}, compute_dtype(logits.dtype()), logits.device());
  if (!logits.is_host()) {
    SEXTANT_CUDA_CALL(cuda::cross_entropy_target_logit(logits, targets, vocab_start, out));
    return out;
  }
  per_logits(logits, [&](auto tag, int64_t rows, int64_t n) {
    using F = decltype(tag);
    F* t = out.data<F>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t local = targets[r] - vocab_start;
      t[r] = (local >= 0 && local < n) ? F(logits.at(r * n + local)) : F(0);
    }
  });
  return out;
}

Tensor cross_entropy_row_loss(const CrossEntropyStats& stats, std::span<const int64_t> targets) {
  OpTimer timer(timed::kCrossEntropy, stats.max.device());
  const char* op = "cross_entropy_row_loss";
  require_one_device(op, {{"target_logit", &stats.target_logit}, {"max", &stats.max}});
  const int64_t rows = stats.target_logit.numel();
  check_stats(op, stats, rows);
  if (!targets.empty() && static_cast<int64_t>(targets.size()) != rows)
    throw RuntimeError(cat(op, ": ", targets.size(), " targets for ", rows, " rows"));
  Tensor out = Tensor::empty({rows}, compute_dtype(stats.max.dtype()), stats.max.device());
  if (!out.is_host()) {
    SEXTANT_CUDA_CALL(cuda::cross_entropy_row_loss(stats.max, stats.sum_exp, stats.target_logit, targets, out));
    return out;
  }
  with_compute_type(stats.max.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> m(stats.max), s(stats.sum_exp), t(stats.target_logit);
    F* loss = out.data<F>();
    for (int64_t r = 0; r < rows; ++r)
      loss[r] = !targets.empty() && targets[r] == kIgnoreTarget ? F(0) : std::log(s.get()[r]) + m.get()[r] - t.get()[r];
  });
  return out;
}

double cross_entropy_loss(const CrossEntropyStats& stats, LossReduction reduction, std::span<const int64_t> targets) {
  const Tensor row_loss = cross_entropy_row_loss(stats, targets);
  const Tensor rows = row_loss.is_host() ? row_loss : row_loss.to(Device::host);  // a few values; summed in f64
  double total = 0;
  for (int64_t r = 0; r < rows.numel(); ++r) total += rows.at(r);
  const int64_t counted = counted_rows(targets, rows.numel());
  return reduction == LossReduction::mean && counted > 0 ? total / static_cast<double>(counted) : total;
}

CrossEntropyForward cross_entropy_forward(const Tensor& logits, std::span<const int64_t> targets,
                                          LossReduction reduction) {
  OpTimer timer(timed::kCrossEntropy, logits.device());
  check_logits("cross_entropy_forward", logits);
  check_targets("cross_entropy_forward", logits, targets);
  for (size_t r = 0; r < targets.size(); ++r)
    if (targets[r] >= logits.dim(-1))
      throw RuntimeError(
          cat("cross_entropy_forward: target ", targets[r], " of row ", r, " is outside the vocab ", logits.dim(-1)));
  CrossEntropyForward out;
  out.stats.max = cross_entropy_row_max(logits);
  out.stats.sum_exp = cross_entropy_sum_exp(logits, out.stats.max);
  out.stats.target_logit = cross_entropy_target_logit(logits, targets, 0);
  out.loss = cross_entropy_loss(out.stats, reduction, targets);
  return out;
}

void cross_entropy_backward(const Tensor& logits, std::span<const int64_t> targets, const CrossEntropyStats& stats,
                            LossReduction reduction, float dloss, Tensor& dlogits, int64_t vocab_start) {
  OpTimer timer(timed::kCrossEntropy, logits.device());
  const char* op = "cross_entropy_backward";
  check_logits(op, logits);
  check_targets(op, logits, targets);
  check_stats(op, stats, rows_of(logits));
  require_one_device(op, {{"logits", &logits}, {"max", &stats.max}, {"dlogits", &dlogits}});
  require_shape(op, "dlogits", dlogits, logits.shape());
  const int64_t counted = counted_rows(targets, rows_of(logits));
  if (!logits.is_host()) {
    // w in the compute type, as the host loop below forms it.
    const double w = with_compute_type(logits.dtype(), [&](auto tag) {
      using F = decltype(tag);
      return static_cast<double>(reduction == LossReduction::mean && counted > 0 ? F(dloss) / F(counted) : F(dloss));
    });
    return SEXTANT_CUDA_CALL(
        cuda::cross_entropy_backward(logits, targets, stats.max, stats.sum_exp, w, dlogits, vocab_start));
  }
  per_logits(logits, [&](auto tag, int64_t rows, int64_t n) {
    using F = decltype(tag);
    HostIn<F> x(logits), m(stats.max), s(stats.sum_exp);
    HostOut<F> dx(dlogits);
    const F w = reduction == LossReduction::mean && counted > 0 ? F(dloss) / F(counted) : F(dloss);
    std::vector<F> scale(rows);
    for (int64_t r = 0; r < rows; ++r) scale[r] = targets[r] == kIgnoreTarget ? F(0) : w / s.get()[r];
    scaled_softmax_rows<F>(rows, n, x.get(), m.get(), static_cast<const F*>(scale.data()), dx.get());
    const bool no_target = kernel_fault_planted(KernelFault::cross_entropy_gradient);
    for (int64_t r = 0; r < rows && !no_target; ++r) {  // minus the one-hot target, where it lies in this slice
      const int64_t local = targets[r] - vocab_start;
      if (targets[r] != kIgnoreTarget && local >= 0 && local < n) dx.get()[r * n + local] -= w;
    }
    dx.store();
  });
}

}  // namespace sextant::ops
