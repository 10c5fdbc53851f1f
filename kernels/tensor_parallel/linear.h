// Column- and row-parallel linear layers (Megatron's ColumnParallelLinear and
// RowParallelLinear), y = x W + b with W stored [in, out].
//
//   column-parallel: W [in, out] split along out; rank r holds columns
//     [r out/tp, (r+1) out/tp) as W_r [in, out/tp] and the same slice of b.
//     Input enters the TP region (identity / all-gather), output stays split:
//     y_r = x W_r + b_r.
//   row-parallel: W split along in; rank r holds rows [r in/tp, (r+1) in/tp)
//     as W_r [in/tp, out]; b [out] is replicated and added after the
//     reduction. Input is split (a column-parallel output), partial outputs
//     x_r W_r are summed as the output leaves the region (all-reduce /
//     reduce-scatter).
//
// Gradients are written (overwritten) into LinearGrads, shaped like the
// rank's shards, in grad_dtype (f32 main grads for 16-bit weights). The
// row-parallel bias gradient is a partial sum under SP (each rank sees its
// tokens); see regions.h.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/tensor_parallel/fp8_linear.h"
#include "kernels/tensor_parallel/tp_group.h"

namespace sextant::tp {

// fp8: set, the three gemms run in FP8 with this state, which each step's
// backward updates (fp8_linear.h); unset, in the weights' dtype.
struct ColumnParallelLinear {
  Tensor w;  // [in, out/tp]
  Tensor b;  // [out/tp], or undefined for no bias
  std::shared_ptr<Fp8LinearState> fp8;
};
struct RowParallelLinear {
  Tensor w;  // [in/tp, out]
  Tensor b;  // [out] replicated over TP, or undefined for no bias
  std::shared_ptr<Fp8LinearState> fp8;
};
struct LinearGrads {
  Tensor dw;  // shaped like w, grad_dtype(w)
  Tensor db;  // shaped like b, grad_dtype(b) (undefined without bias)
};

// dw = x^T dy over all rows of x: [..., in] and dy: [..., out], into a
// grad_dtype(w) tensor [in, out] (16-bit inputs widened, f32 accumulation).
Tensor weight_grad(const Tensor& x, const Tensor& dy, DType param_dtype);

// Column-parallel: what backward needs. Under SP with regather_input the
// input's sequence shard [b, s/tp, in]; otherwise the gathered input [b, s, in].
struct ColumnSaved {
  Tensor input;
  size_t bytes() const { return input.nbytes(); }
};
// x: [b, s/tp, in] (SP) or [b, s, in] -> y: [b, s, out/tp].
Tensor column_parallel_forward(const TpGroup& g, const ColumnParallelLinear& layer, const Tensor& x,
                               ColumnSaved& saved);
// dy: [b, s, out/tp] -> dx: like x, summed over TP. Writes grads (dw = x^T dy, db = column sums of dy).
Tensor column_parallel_backward(const TpGroup& g, const ColumnParallelLinear& layer, const ColumnSaved& saved,
                                const Tensor& dy, LinearGrads& grads);

struct RowSaved {
  Tensor input;  // [b, s, in/tp]
  size_t bytes() const { return input.nbytes(); }
};
// x: [b, s, in/tp] -> y: [b, s/tp, out] (SP) or [b, s, out], summed over TP, plus b.
Tensor row_parallel_forward(const TpGroup& g, const RowParallelLinear& layer, const Tensor& x, RowSaved& saved);
// dy: like y -> dx: [b, s, in/tp]. Writes grads; db is partial over TP under SP.
Tensor row_parallel_backward(const TpGroup& g, const RowParallelLinear& layer, const RowSaved& saved, const Tensor& dy,
                             LinearGrads& grads);

// Zero-bubble split of the backward (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism"): I computes the input gradient (what the previous pipeline
// stage waits for) and keeps the output gradient; W computes the weight and
// bias gradients later from it. I then W gives exactly what
// *_parallel_backward gives, with the same collectives in the same order per
// kind (I: the region edge; W: under SP + regather, the re-all-gather).
// An FP8 layer's step ends with W, its last cast.
struct ColumnPendingGrad {
  Tensor dy;  // [b, s, out/tp]
};
// dy: [b, s, out/tp] -> dx: like the forward's x, summed over TP.
Tensor column_parallel_backward_input(const TpGroup& g, const ColumnParallelLinear& layer, const Tensor& dy,
                                      ColumnPendingGrad& pending);
// Writes grads (dw = x^T dy, db = column sums of dy) from the forward's saved input.
void column_parallel_backward_weight(const TpGroup& g, const ColumnParallelLinear& layer, const ColumnSaved& saved,
                                     const ColumnPendingGrad& pending, LinearGrads& grads);

struct RowPendingGrad {
  Tensor dy_full;  // [b, s, out]: dy after the exit region's backward (all-gathered under SP)
  Tensor dy;       // like the forward's y: the bias gradient's tokens (a shard under SP)
};
// dy: like y -> dx: [b, s, in/tp].
Tensor row_parallel_backward_input(const TpGroup& g, const RowParallelLinear& layer, const Tensor& dy,
                                   RowPendingGrad& pending);
// Writes grads; db is partial over TP under SP (as row_parallel_backward's).
void row_parallel_backward_weight(const TpGroup& g, const RowParallelLinear& layer, const RowSaved& saved,
                                  const RowPendingGrad& pending, LinearGrads& grads);

// FLOPs of the matrix products of one layer's forward on `rows` tokens
// (backward: twice that). in, out: the global sizes.
inline double linear_forward_flops(int64_t rows, int64_t in, int64_t out) { return 2.0 * rows * in * out; }

}  // namespace sextant::tp
