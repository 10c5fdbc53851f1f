// Cross-entropy of logits [rows, vocab] (rows = tokens; leading dims are
// flattened) against integer targets, and the pieces vocab-parallel
// cross-entropy is built from (Megatron's _VocabParallelCrossEntropy): each
// TP rank holds the vocab slice [vocab_start, vocab_start + n) and
//   max     = all_reduce_max(cross_entropy_row_max(slice))
//   sum_exp = all_reduce_sum(cross_entropy_sum_exp(slice, max))
//   target  = all_reduce_sum(cross_entropy_target_logit(slice, targets, vocab_start))
//   loss    = cross_entropy_loss({max, sum_exp, target}, reduction)
//   dslice  = cross_entropy_backward(slice, targets, stats, ..., vocab_start)
// Row loss: log(sum_exp) + max - target_logit. Host: f32 compute (f64 for f64
// logits); logits and dlogits in f32 / bf16 / f16 storage; stats [rows] in
// the compute dtype.
//
// A row whose target is kIgnoreTarget (torch's ignore_index: a padding
// position of packed sequences) adds 0 to the loss, does not count in a
// mean, and gets a zero gradient.
#pragma once

#include <cstdint>
#include <span>

#include "harness/tensor.h"

namespace sextant::ops {

// How row losses become the loss: mean divides by the rows of this call. (A
// caller whose rows are a shard of the batch uses sum and scales dloss.)
enum class LossReduction { mean, sum };

inline constexpr int64_t kIgnoreTarget = -1;

struct CrossEntropyStats {
  Tensor max;           // [rows] max_j logits[r, j] over the whole vocabulary
  Tensor sum_exp;       // [rows] sum_j exp(logits[r, j] - max[r])
  Tensor target_logit;  // [rows] logits[r, targets[r]]
};

// logits: [..., n] -> [rows] max over the row.
Tensor cross_entropy_row_max(const Tensor& logits);
// logits: [..., n], row_max: [rows] -> [rows] sum_j exp(logits[r, j] - row_max[r]).
Tensor cross_entropy_sum_exp(const Tensor& logits, const Tensor& row_max);
// logits: [..., n], targets: rows values >= 0 or kIgnoreTarget -> [rows]
// logits[r, targets[r] - vocab_start] when the target falls in this slice,
// else 0 (so a sum over slices gives the target logit).
Tensor cross_entropy_target_logit(const Tensor& logits, std::span<const int64_t> targets, int64_t vocab_start = 0);
// [rows] log(sum_exp) + max - target_logit, and 0 where targets (when
// given) holds kIgnoreTarget.
Tensor cross_entropy_row_loss(const CrossEntropyStats& stats, std::span<const int64_t> targets = {});
// The row losses reduced (summed in f64); a mean divides by the rows not ignored.
double cross_entropy_loss(const CrossEntropyStats& stats, LossReduction reduction,
                          std::span<const int64_t> targets = {});

struct CrossEntropyForward {
  double loss = 0;
  CrossEntropyStats stats;  // what the backward needs
};
// Whole vocabulary on one device: logits [..., vocab], targets in [0, vocab) or kIgnoreTarget.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, std::span<const int64_t> targets,
                                          LossReduction reduction);

// dlogits[r, j] = dloss * w * (exp(logits[r, j] - max[r]) / sum_exp[r] - [vocab_start + j == targets[r]]),
// w = 1 (sum) or 1 / rows not ignored (mean), and 0 on an ignored row.
// logits, dlogits: [..., n] (the slice), stats over the whole vocabulary.
// dlogits may be logits itself.
void cross_entropy_backward(const Tensor& logits, std::span<const int64_t> targets, const CrossEntropyStats& stats,
                            LossReduction reduction, float dloss, Tensor& dlogits, int64_t vocab_start = 0);

}  // namespace sextant::ops
