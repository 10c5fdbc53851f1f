#include "reference/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"
#include "reference/f64_tensor.h"

namespace sextant::ref {

namespace {

void check_targets(const Tensor& logits, std::span<const int64_t> targets) {
  const int64_t rows = rows_of(logits), vocab = logits.dim(-1);
  if (static_cast<int64_t>(targets.size()) != rows)
    throw RuntimeError(cat("ref::cross_entropy: ", targets.size(), " targets for ", rows, " rows"));
  for (int64_t t : targets)
    if ((t < 0 && t != kIgnoreTarget) || t >= vocab)
      throw RuntimeError(cat("ref::cross_entropy: target ", t, " outside vocab ", vocab));
}

int64_t counted_rows(std::span<const int64_t> targets) {
  return static_cast<int64_t>(std::count_if(targets.begin(), targets.end(), [](int64_t t) { return t >= 0; }));
}

// log sum_j exp(x_j), shifted by the max so that exp cannot overflow.
double log_sum_exp(const double* x, int64_t n) {
  const double max = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - max);
  return max + std::log(sum);
}

double row_weight(Reduction reduction, int64_t counted) {
  return reduction == Reduction::mean && counted > 0 ? 1.0 / counted : 1.0;
}

}  // namespace

Tensor cross_entropy_row_loss(const Tensor& logits_in, std::span<const int64_t> targets) {
  const Tensor logits = as_f64(logits_in);
  check_targets(logits, targets);
  const int64_t rows = rows_of(logits), vocab = logits.dim(-1);
  Tensor loss = Tensor::empty({rows}, DType::f64);
  const double* L = logits.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    loss.set(r, targets[r] == kIgnoreTarget ? 0.0 : log_sum_exp(L + r * vocab, vocab) - L[r * vocab + targets[r]]);
  return loss;
}

double cross_entropy_forward(const Tensor& logits, std::span<const int64_t> targets, Reduction reduction) {
  const Tensor loss = cross_entropy_row_loss(logits, targets);
  double total = 0;
  for (int64_t r = 0; r < loss.numel(); ++r) total += loss.at(r);
  return total * row_weight(reduction, counted_rows(targets));
}

Tensor cross_entropy_backward(const Tensor& logits_in, std::span<const int64_t> targets, Reduction reduction,
                              double dloss) {
  const Tensor logits = as_f64(logits_in);
  check_targets(logits, targets);
  const int64_t rows = rows_of(logits), vocab = logits.dim(-1);
  const double w = dloss * row_weight(reduction, counted_rows(targets));
  Tensor d = Tensor::empty(logits.shape(), DType::f64);
  const double* L = logits.data<double>();
  double* D = d.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kIgnoreTarget) {
      std::fill(D + r * vocab, D + (r + 1) * vocab, 0.0);
      continue;
    }
    const double lse = log_sum_exp(L + r * vocab, vocab);
    for (int64_t j = 0; j < vocab; ++j) {
      const double softmax = std::exp(L[r * vocab + j] - lse);
      const double onehot = j == targets[r] ? 1.0 : 0.0;
      D[r * vocab + j] = w * (softmax - onehot);
    }
  }
  return d;
}

}  // namespace sextant::ref
