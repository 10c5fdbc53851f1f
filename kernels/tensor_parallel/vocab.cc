#include "kernels/tensor_parallel/vocab.h"

#include <cmath>
#include <cstring>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/tensor_parallel/regions.h"
#include "kernels/tensor_parallel/shard.h"
#include "kernels/tensor_parallel/widen.h"

namespace sextant::tp {

Tensor embedding_forward(const TpGroup& g, const VocabParallelEmbedding& emb, std::span<const int64_t> ids,
                         int64_t batch, int64_t seq, EmbeddingSaved& saved) {
  if (!emb.table.defined()) throw RuntimeError("embedding_forward: needs a table");
  if (static_cast<int64_t>(ids.size()) != batch * seq)
    throw RuntimeError(cat("embedding_forward: ", ids.size(), " ids for [", batch, ", ", seq, "]"));
  const int64_t rows = emb.table.dim(0), h = emb.table.dim(1);
  const size_t row_bytes = static_cast<size_t>(h) * dtype_size(emb.table.dtype());
  // tokens of other slices stay 0
  Tensor partial = Tensor::zeros({batch, seq, h}, emb.table.dtype(), emb.table.device());
  if (!partial.is_host()) {
    Tensor flat = partial.reshape({batch * seq, h});
    SEXTANT_CUDA_CALL(ops::cuda::gather_rows(emb.table, ids, emb.vocab_start, flat));
  } else {
    const auto* table = static_cast<const char*>(emb.table.raw());
    auto* out = static_cast<char*>(partial.raw());
    for (size_t t = 0; t < ids.size(); ++t) {
      const int64_t local = ids[t] - emb.vocab_start;
      if (local >= 0 && local < rows) std::memcpy(out + t * row_bytes, table + local * row_bytes, row_bytes);
    }
  }
  saved.ids.assign(ids.begin(), ids.end());
  return exit_region_forward(g, std::move(partial));  // summed: every token's row from its owner
}

void embedding_backward(const TpGroup& g, const VocabParallelEmbedding& emb, const EmbeddingSaved& saved,
                        const Tensor& dy, Tensor& dtable) {
  Tensor dy_full = exit_region_backward(g, dy);  // [b, s, h]: every token's gradient
  const int64_t rows = emb.table.dim(0), h = emb.table.dim(1);
  if (!dy_full.is_host()) {  // sums in the compute type by atomic adds, rounded once
    Tensor sums = Tensor::zeros({rows, h}, dy_full.dtype() == DType::f64 ? DType::f64 : DType::f32, dy_full.device());
    SEXTANT_CUDA_CALL(
        ops::cuda::scatter_add_rows(dy_full.reshape({dy_full.numel() / h, h}), saved.ids, emb.vocab_start, sums));
    const DType gd = grad_dtype(emb.table.dtype());
    dtable = sums.dtype() == gd ? sums : sums.to(gd);
    return;
  }
  with_compute_type(dy_full.dtype(), [&](auto tag) {
    using F = decltype(tag);
    const Tensor grad = widened<F>(dy_full);
    Tensor sums = Tensor::zeros({rows, h}, dtype_of<F>());  // in F, rounded once below
    const F* src = grad.data<F>();
    F* dst = sums.data<F>();
    const bool overwrite = kernel_fault_planted(KernelFault::embedding_backward_duplicates);
    for (size_t t = 0; t < saved.ids.size(); ++t) {
      const int64_t local = saved.ids[t] - emb.vocab_start;
      if (local < 0 || local >= rows) continue;
      for (int64_t j = 0; j < h; ++j) dst[local * h + j] = (overwrite ? F(0) : dst[local * h + j]) + src[t * h + j];
    }
    const DType g = grad_dtype(emb.table.dtype());
    dtable = sums.dtype() == g ? sums : sums.to(g);
  });
}

Tensor vocab_parallel_cross_entropy_forward(const TpGroup& g, const Tensor& logits, std::span<const int64_t> targets,
                                            int64_t vocab_start, CrossEntropySaved& saved) {
  ops::CrossEntropyStats& st = saved.stats;
  auto over_tp = [&](Tensor& t, ReduceOp op) {
    if (g.size() > 1) g.comm.all_reduce(t, op);
  };
  st.max = ops::cross_entropy_row_max(logits);
  // The planted bug cross_entropy_local_max: each rank keeps its own max, so
  // the slices' exp sums below are taken relative to different shifts.
  if (g.fault != Fault::cross_entropy_local_max) over_tp(st.max, ReduceOp::max);
  st.sum_exp = ops::cross_entropy_sum_exp(logits, st.max);
  over_tp(st.sum_exp, ReduceOp::sum);
  st.target_logit = ops::cross_entropy_target_logit(logits, targets, vocab_start);  // 0 off this slice
  over_tp(st.target_logit, ReduceOp::sum);
  saved.logits = logits;
  saved.targets.assign(targets.begin(), targets.end());
  saved.vocab_start = vocab_start;
  return ops::cross_entropy_row_loss(st, targets);  // 0 where a target is ops::kIgnoreTarget
}

Tensor vocab_parallel_cross_entropy_backward(const TpGroup&, const CrossEntropySaved& saved, float dloss) {
  Tensor dlogits = Tensor::empty(saved.logits.shape(), saved.logits.dtype(), saved.logits.device());
  ops::cross_entropy_backward(saved.logits, saved.targets, saved.stats, ops::LossReduction::sum, dloss, dlogits,
                              saved.vocab_start);
  return dlogits;
}

VocabWeights init_vocab_weights(int64_t vocab, int64_t hidden, int tp_rank, int tp_size, DType dtype, uint64_t seed,
                                const std::string& prefix, Device device) {
  VocabWeights w;
  w.embedding.table = random_shard({vocab, hidden}, 0, tp_size, tp_rank, dtype,
                                   RandomSpec{seed, tensor_id(prefix + ".embedding"), 1.0}, device);
  w.embedding.vocab_start = vocab / tp_size * tp_rank;
  // Logits with a standard deviation ~2 as a trained LM's have (x uniform in
  // [-1, 1), W in [-a, a): var = h a^2 / 9), not the ~0.3 of a fresh init:
  // slices' maxima then differ by whole units, as they do in practice.
  w.head.w =
      random_shard({hidden, vocab}, 1, tp_size, tp_rank, dtype,
                   RandomSpec{seed, tensor_id(prefix + ".head"), 6 / std::sqrt(static_cast<double>(hidden))}, device);
  return w;
}

}  // namespace sextant::tp
