#include "kernels/tensor_parallel/linear.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/bias.h"
#include "kernels/ops/gemm.h"
#include "kernels/tensor_parallel/regions.h"

namespace sextant::tp {

namespace {

// x: [..., in] @ w: [in, out] -> [..., out] (in FP8 where the layer says).
Tensor matmul(const TpGroup& g, Fp8LinearState* fp8, const Tensor& x, const Tensor& w) {
  if (fp8) return fp8_matmul(g, *fp8, x, w);
  Shape shape = x.shape();
  shape.back() = w.dim(1);
  Tensor y = Tensor::empty(shape, x.dtype(), x.device());
  ops::gemm(x, false, w, false, y);
  return y;
}

// dy: [..., out] @ w^T -> [..., in].
Tensor matmul_wt(const TpGroup& g, Fp8LinearState* fp8, const Tensor& dy, const Tensor& w) {
  if (fp8) return fp8_matmul_wt(g, *fp8, dy, w);
  Shape shape = dy.shape();
  shape.back() = w.dim(0);
  Tensor dx = Tensor::empty(shape, dy.dtype(), dy.device());
  ops::gemm(dy, false, w, true, dx);
  return dx;
}

// grads.dw = x^T dy, grads.db = column sums of dy (when there is a bias).
// The last use of the step's operands: an FP8 layer's step ends here.
void weight_and_bias_grads(const TpGroup& g, Fp8LinearState* fp8, const Tensor& x, const Tensor& dy,
                           const Tensor& dy_for_bias, const Tensor& w, const Tensor& b, LinearGrads& grads) {
  if (fp8) {
    grads.dw = fp8_weight_grad(g, *fp8, x, dy, w.dtype());
    fp8_end_step(*fp8);
  } else {
    grads.dw = weight_grad(x, dy, w.dtype());
  }
  grads.db = Tensor();
  if (b.defined()) {
    grads.db = Tensor::empty(b.shape(), grad_dtype(b.dtype()), b.device());
    ops::bias_backward(dy_for_bias, grads.db);
  }
}

void require_width(const char* op, const char* what, const Tensor& t, int64_t width) {
  if (!t.defined() || t.ndim() < 2 || t.dim(-1) != width)
    throw RuntimeError(
        cat(op, ": ", what, " ", t.defined() ? shape_string(t.shape()) : "undefined", " must end in ", width));
}

}  // namespace

Tensor weight_grad(const Tensor& x, const Tensor& dy, DType param_dtype) {
  const DType g = grad_dtype(param_dtype);
  Tensor dw = Tensor::empty({x.dim(-1), dy.dim(-1)}, g, x.device());
  if (x.dtype() == g && dy.dtype() == g) ops::gemm(x, true, dy, false, dw);
  else ops::gemm(x.to(g), true, dy.to(g), false, dw);  // 16-bit activations: the f32 product, not rounded
  return dw;
}

Tensor column_parallel_forward(const TpGroup& g, const ColumnParallelLinear& layer, const Tensor& x,
                               ColumnSaved& saved) {
  require_width("column_parallel_forward", "x", x, layer.w.dim(0));
  Tensor x_full = enter_region_forward(g, x);  // [b, s, in]
  saved.input = g.sp() && g.regather_input ? x : x_full;
  Tensor y = matmul(g, layer.fp8.get(), x_full, layer.w);  // [b, s, out/tp]
  if (layer.b.defined()) ops::bias_add(y, layer.b, y);
  return y;
}

Tensor column_parallel_backward(const TpGroup& g, const ColumnParallelLinear& layer, const ColumnSaved& saved,
                                const Tensor& dy, LinearGrads& grads) {
  require_width("column_parallel_backward", "dy", dy, layer.w.dim(1));
  Tensor dx = matmul_wt(g, layer.fp8.get(), dy, layer.w);  // [b, s, in], this rank's share of the sum over out
  const bool sharded = g.sp() && g.regather_input;
  Tensor x_full = sharded ? enter_region_forward(g, saved.input) : saved.input;  // the re-all-gather
  weight_and_bias_grads(g, layer.fp8.get(), x_full, dy, dy, layer.w, layer.b, grads);
  return enter_region_backward(g, std::move(dx));
}

Tensor row_parallel_forward(const TpGroup& g, const RowParallelLinear& layer, const Tensor& x, RowSaved& saved) {
  require_width("row_parallel_forward", "x", x, layer.w.dim(0));
  saved.input = x;
  Tensor y = exit_region_forward(g, matmul(g, layer.fp8.get(), x, layer.w));  // [b, s/tp | s, out], summed over TP
  if (layer.b.defined()) ops::bias_add(y, layer.b, y);
  return y;
}

Tensor row_parallel_backward(const TpGroup& g, const RowParallelLinear& layer, const RowSaved& saved, const Tensor& dy,
                             LinearGrads& grads) {
  require_width("row_parallel_backward", "dy", dy, layer.w.dim(1));
  Tensor dy_full = exit_region_backward(g, dy);  // [b, s, out]
  // The bias is added after the reduction: its gradient comes from the tokens
  // this rank holds there (a partial sum under SP).
  Tensor dx = matmul_wt(g, layer.fp8.get(), dy_full, layer.w);  // [b, s, in/tp]
  weight_and_bias_grads(g, layer.fp8.get(), saved.input, dy_full, dy, layer.w, layer.b, grads);
  return dx;
}

Tensor column_parallel_backward_input(const TpGroup& g, const ColumnParallelLinear& layer, const Tensor& dy,
                                      ColumnPendingGrad& pending) {
  require_width("column_parallel_backward_input", "dy", dy, layer.w.dim(1));
  pending.dy = dy;
  return enter_region_backward(g, matmul_wt(g, layer.fp8.get(), dy, layer.w));  // [b, s/tp | s, in]
}

void column_parallel_backward_weight(const TpGroup& g, const ColumnParallelLinear& layer, const ColumnSaved& saved,
                                     const ColumnPendingGrad& pending, LinearGrads& grads) {
  const bool sharded = g.sp() && g.regather_input;
  Tensor x_full = sharded ? enter_region_forward(g, saved.input) : saved.input;  // the re-all-gather
  weight_and_bias_grads(g, layer.fp8.get(), x_full, pending.dy, pending.dy, layer.w, layer.b, grads);
}

Tensor row_parallel_backward_input(const TpGroup& g, const RowParallelLinear& layer, const Tensor& dy,
                                   RowPendingGrad& pending) {
  require_width("row_parallel_backward_input", "dy", dy, layer.w.dim(1));
  pending.dy = dy;
  pending.dy_full = exit_region_backward(g, dy);                   // [b, s, out]
  return matmul_wt(g, layer.fp8.get(), pending.dy_full, layer.w);  // [b, s, in/tp]
}

void row_parallel_backward_weight(const TpGroup& g, const RowParallelLinear& layer, const RowSaved& saved,
                                  const RowPendingGrad& pending, LinearGrads& grads) {
  weight_and_bias_grads(g, layer.fp8.get(), saved.input, pending.dy_full, pending.dy, layer.w, layer.b, grads);
}

}  // namespace sextant::tp
