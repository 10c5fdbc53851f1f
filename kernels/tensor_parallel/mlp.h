// The pre-LN MLP block of a GPT layer under TP (+ SP), with its residual:
//   ln = LayerNorm(x)                 x, ln: [b, s/tp | s, h]   (outside the region)
//   a  = ln W1 + b1                   [b, s, ffn/tp]            (column-parallel)
//   z  = gelu(a)                      [b, s, ffn/tp]
//   y  = x + z W2 + b2                [b, s/tp | s, h]          (row-parallel, exit, residual)
// One enter (before W1) and one exit (after W2) per block: 2 all-reduces
// without SP (f/g), or all-gather + reduce-scatter with SP, forward and
// backward alike. Matches reference/mlp.h term for term.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/rng.h"
#include "kernels/tensor_parallel/layernorm.h"
#include "kernels/tensor_parallel/linear.h"

namespace sextant::tp {

struct MlpDims {
  int64_t hidden = 0, ffn = 0;
};

struct MlpWeights {
  Tensor ln_gamma, ln_beta;  // [h], replicated
  ColumnParallelLinear fc1;  // w [h, ffn/tp], b [ffn/tp]
  RowParallelLinear fc2;     // w [ffn/tp, h], b [h] replicated
};

struct MlpGrads {
  Tensor ln_gamma, ln_beta;
  LinearGrads fc1, fc2;
  // Gradients of the parameters replicated over TP (reduce over TP under SP).
  std::vector<Tensor*> replicated_over_tp() { return {&ln_gamma, &ln_beta, &fc2.db}; }
  std::vector<Tensor*> all() { return {&ln_gamma, &ln_beta, &fc1.dw, &fc1.db, &fc2.dw, &fc2.db}; }
};

// Held between forward and backward.
struct MlpSaved {
  LayerNormSaved ln;  // the LayerNorm region: x and its statistics
  ColumnSaved fc1;    // ln output (gathered, or its shard under SP + regather)
  Tensor a;           // [b, s, ffn/tp] pre-GELU
  RowSaved fc2;       // z = gelu(a) [b, s, ffn/tp]
  size_t bytes() const { return ln.bytes() + fc1.bytes() + a.nbytes() + fc2.bytes(); }
  size_t layernorm_bytes() const { return ln.bytes(); }
};

// x: [b, s/tp, h] (SP) or [b, s, h] -> y: like x.
Tensor mlp_forward(const TpGroup& g, const MlpWeights& w, const Tensor& x, MlpSaved& saved);
// dy: like x -> dx: like x. Writes grads of this rank's shards; the
// replicated ones are partial under SP until reduce_sequence_parallel_grads.
Tensor mlp_backward(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const Tensor& dy, MlpGrads& grads);

// Zero-bubble split of mlp_backward (see linear.h): I returns dx and keeps
// in `pending` what W needs besides MlpSaved; W writes the weight gradients.
// I then W equals mlp_backward. The LayerNorm parameter gradients fall out of
// I's LayerNorm backward (one fused op) and are handed to W through pending.
// After I, W reads only saved.fc1 and saved.fc2 (saved.ln and saved.a may go).
struct MlpPendingGrads {
  RowPendingGrad fc2;
  ColumnPendingGrad fc1;
  Tensor ln_gamma, ln_beta;  // [h], this rank's tokens' sums
};
// dy: like x -> dx: like x.
Tensor mlp_backward_input(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const Tensor& dy,
                          MlpPendingGrads& pending);
// Writes grads of this rank's shards (replicated ones partial under SP, as mlp_backward's).
void mlp_backward_weight(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const MlpPendingGrads& pending,
                         MlpGrads& grads);

// Gradient accumulation over microbatches: sum += more, tensor by tensor
// (add_into: f32 sums of f32 main grads). A tensor of sum that is still
// undefined starts as a copy of more's.
void accumulate_grads(MlpGrads& sum, MlpGrads& more);
// Zeroes every defined gradient of sum (the start of a step).
void zero_grads(MlpGrads& sum);

// Rank tp_rank's shards of the global weights, each a deterministic random
// tensor (harness/rng.h) named prefix + ".ln_gamma", ".ln_beta", ".w1", ".b1",
// ".w2", ".b2" (tensor_id of that name, uniform in [-scale, scale): gamma
// and beta 1, W 1/sqrt(in), b 0.1). tp_size 1 gives the whole tensors. On `device`.
MlpWeights init_mlp_weights(const MlpDims& dims, int tp_rank, int tp_size, DType dtype, uint64_t seed,
                            const std::string& prefix, Device device = Device::host);

// Runs fc1 and fc2 in FP8 under `recipe` from fresh state (delayed
// scaling's histories empty; fp8_linear.h).
void use_fp8_linears(MlpWeights& w, const ops::Fp8Recipe& recipe);

// Matrix-product FLOPs of forward + backward on `tokens` tokens: 3 x 2 x tokens x 2 h ffn.
inline double mlp_flops(int64_t tokens, const MlpDims& d) { return 3 * 2.0 * tokens * 2 * d.hidden * d.ffn; }

}  // namespace sextant::tp
