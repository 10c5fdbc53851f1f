// Vocabulary-parallel embedding, LM head and cross-entropy (Megatron's
// VocabParallelEmbedding and _VocabParallelCrossEntropy). Rank r of TP owns
// the vocabulary slice [r V/tp, (r+1) V/tp):
//
//   embedding   table [V, h] split by rows: E_r [V/tp, h]. Each rank looks up
//               the tokens of its slice (zeros elsewhere), and the partial
//               rows leave the TP region: all-reduce, or reduce-scatter to
//               the sequence shard under SP.
//   LM head     a column-parallel linear W [h, V] without bias, output kept
//               split: logits_r [b, s, V/tp] = x W_r (linear.h).
//   cross-      per token: max, sum of exp(l - max) and the target logit,
//   entropy     each computed on the slice and all-reduced over TP (max, sum,
//               sum); loss = log(sum_exp) + max - target. No rank ever holds
//               the whole [b, s, V].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/ops/cross_entropy.h"
#include "kernels/tensor_parallel/linear.h"

namespace sextant::tp {

struct VocabParallelEmbedding {
  Tensor table;  // [V/tp, h]: rows [vocab_start, vocab_start + V/tp)
  int64_t vocab_start = 0;
};

struct EmbeddingSaved {
  std::vector<int64_t> ids;  // [b s] token ids (all tokens: they are needed to route gradients)
  size_t bytes() const { return ids.size() * sizeof(int64_t); }
};

// ids: [b, s] row-major, in [0, V) -> [b, s/tp, h] (SP) or [b, s, h].
Tensor embedding_forward(const TpGroup& g, const VocabParallelEmbedding& emb, std::span<const int64_t> ids,
                         int64_t batch, int64_t seq, EmbeddingSaved& saved);
// dy: like the output -> dtable [V/tp, h] in grad_dtype (written): the rows
// of this slice, summed over the tokens that looked them up (f32 accumulation).
void embedding_backward(const TpGroup& g, const VocabParallelEmbedding& emb, const EmbeddingSaved& saved,
                        const Tensor& dy, Tensor& dtable);

struct CrossEntropySaved {
  Tensor logits;                 // [b, s, V/tp] this rank's slice
  ops::CrossEntropyStats stats;  // [b s] each, over the whole vocabulary
  std::vector<int64_t> targets;  // [b s]
  int64_t vocab_start = 0;
  size_t bytes() const {
    return logits.nbytes() + stats.max.nbytes() + stats.sum_exp.nbytes() + stats.target_logit.nbytes() +
           targets.size() * sizeof(int64_t);
  }
};

// logits: [b, s, V/tp] (slice at vocab_start), targets: [b s] in [0, V)
// -> per-token losses [b s] (compute dtype), equal on every TP rank.
Tensor vocab_parallel_cross_entropy_forward(const TpGroup& g, const Tensor& logits, std::span<const int64_t> targets,
                                            int64_t vocab_start, CrossEntropySaved& saved);
// -> dlogits [b, s, V/tp] of dloss * (sum of the per-token losses): pass
// dloss = 1 / tokens for a mean over `tokens` (e.g. over all data-parallel ranks).
Tensor vocab_parallel_cross_entropy_backward(const TpGroup& g, const CrossEntropySaved& saved, float dloss);

// Shards of deterministic random weights named prefix + ".embedding" [V, h]
// (uniform, scale 1) and prefix + ".head" [h, V] (scale 6/sqrt(h): logits of
// standard deviation ~2, like a trained LM's).
struct VocabWeights {
  VocabParallelEmbedding embedding;
  ColumnParallelLinear head;  // w [h, V/tp], no bias
};
VocabWeights init_vocab_weights(int64_t vocab, int64_t hidden, int tp_rank, int tp_size, DType dtype, uint64_t seed,
                                const std::string& prefix, Device device = Device::host);

}  // namespace sextant::tp
