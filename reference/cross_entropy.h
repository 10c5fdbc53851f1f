// Cross-entropy of logits against integer targets, float64:
//   loss_r = log sum_j exp(logits[r, j]) - logits[r, target_r],
//   loss = sum_r loss_r (Reduction::sum) or its mean over rows (Reduction::mean).
// A row whose target is kIgnoreTarget (-1, torch's ignore_index) has loss 0,
// does not count in the mean, and has a zero gradient.
#pragma once

#include <cstdint>
#include <span>

#include "harness/tensor.h"

namespace sextant::ref {

enum class Reduction { mean, sum };

inline constexpr int64_t kIgnoreTarget = -1;

// logits: [..., vocab]; targets: one per row, in [0, vocab) or kIgnoreTarget.
double cross_entropy_forward(const Tensor& logits, std::span<const int64_t> targets, Reduction reduction);
// Per-row losses [rows].
Tensor cross_entropy_row_loss(const Tensor& logits, std::span<const int64_t> targets);
// d(dloss * loss)/d logits = dloss * w * (softmax(logits) - onehot(target)),
// w = 1 (sum) or 1/(rows not ignored) (mean). -> [..., vocab].
Tensor cross_entropy_backward(const Tensor& logits, std::span<const int64_t> targets, Reduction reduction,
                              double dloss = 1.0);

}  // namespace sextant::ref
