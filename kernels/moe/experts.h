// The experts: each an MLP h -> ffn -> h with GELU (no biases, as Megatron's
// grouped experts with add_bias_linear off). Under expert tensor parallelism
// (ETP, size Q) a rank holds a column slice of W1 and the matching row slice
// of W2 (Megatron's column-/row-parallel pair), so its output is a partial
// sum over the ETP group, which the dispatcher reduces; the ETP collectives
// live in the dispatcher because they move uneven token counts.
//
// Activations and the input gradient stay in the storage dtype; weight
// gradients accumulate in f32 (Megatron's main_grad) and are rounded once by
// the caller.
#pragma once

#include "harness/tensor.h"

namespace sextant::moe {

struct ExpertSaved {
  Tensor in;  // [n, h]
  Tensor a;   // [n, f] pre-activation
  Tensor g;   // [n, f] gelu(a)
};

// in: [n, h]; w1: [h, f]; w2: [f, h] (f = ffn / Q) -> out: [n, h] (partial over ETP),
// written into `out` when it is given (the dispatcher's buffer).
Tensor expert_forward(const Tensor& in, const Tensor& w1, const Tensor& w2, ExpertSaved& saved, Tensor out = {});

struct ExpertGrads {
  Tensor din;  // [n, h] storage dtype, partial over ETP
  Tensor dw1;  // [h, f] f32
  Tensor dw2;  // [f, h] f32
};
// dout: [n, h] (the full output gradient of these rows); din written into
// `din` when it is given.
ExpertGrads expert_backward(const Tensor& dout, const ExpertSaved& saved, const Tensor& w1, const Tensor& w2,
                            Tensor din = {});

// FLOPs of forward + backward for n rows: 6 gemms of 2 n h f.
inline double expert_flops(int64_t n, int64_t h, int64_t f) { return 12.0 * n * h * f; }

}  // namespace sextant::moe
