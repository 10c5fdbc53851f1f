// The backward of tensor_parallel's column- and row-parallel linears, split
// the zero-bubble way (B = I + W; Qi et al. 2024): the input gradient now
// (I: what the previous stage waits for), the weight gradient later (W: what
// a schedule uses to fill its bubbles). The products are those of
// tp::column_parallel_backward / tp::row_parallel_backward; weight gradients
// are added into f32 accumulators (summed over the microbatches of a step).
// A linear with FP8 state runs its dgrad and wgrad in FP8 (fp8_linear.h)
// and leaves the end of the step to the caller: its history rolls once per
// step, not per microbatch.
#pragma once

#include "kernels/tensor_parallel/linear.h"

namespace sextant::model {

// I. dy: [b, s, out/tp] -> dx: like the forward input x, summed over TP
// (all-reduce, or reduce-scatter to the sequence shard under SP).
Tensor column_backward_input(const tp::TpGroup& g, const tp::ColumnParallelLinear& layer, const Tensor& dy);
// W. dw += x^T dy (x all-gathered again under SP + regather), db += column sums of dy.
void column_backward_weight(const tp::TpGroup& g, const tp::ColumnParallelLinear& layer, const tp::ColumnSaved& saved,
                            const Tensor& dy, Tensor& dw, Tensor* db);

// I. dy: [b, s/tp | s, out] -> dx: [b, s, in/tp]. dy_full: dy as the product
// saw it ([b, s, out], all-gathered under SP), kept for W.
Tensor row_backward_input(const tp::TpGroup& g, const tp::RowParallelLinear& layer, const Tensor& dy, Tensor& dy_full);
// W. dw += x^T dy_full; db += column sums of dy (this rank's tokens: partial over TP under SP).
void row_backward_weight(const tp::TpGroup& g, const tp::RowParallelLinear& layer, const tp::RowSaved& saved,
                         const Tensor& dy_full, const Tensor& dy, Tensor& dw, Tensor* db);

// acc += x element-wise (f32 accumulators on x's device; shapes may differ only by reshape).
void accumulate(Tensor& acc, const Tensor& x);

}  // namespace sextant::model
