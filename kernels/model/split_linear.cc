#include "kernels/model/split_linear.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/bias.h"
#include "kernels/ops/gemm.h"
#include "kernels/tensor_parallel/regions.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::model {

namespace {

// dy: [..., out] @ w^T: [out, in] -> [..., in] (in FP8 where the layer says).
Tensor times_transposed(const tp::TpGroup& g, tp::Fp8LinearState* fp8, const Tensor& dy, const Tensor& w) {
  if (fp8) return tp::fp8_matmul_wt(g, *fp8, dy, w);
  Shape shape = dy.shape();
  shape.back() = w.dim(0);
  Tensor dx = Tensor::empty(shape, dy.dtype(), dy.device());
  ops::gemm(dy, false, w, true, dx);
  return dx;
}

// dw += x^T dy over all rows, into the f32 accumulator: f32 inputs, or bf16
// ones straight into f32 (tensor cores on a GPU, no rounding of the sum).
void add_weight_grad(const tp::TpGroup& g, tp::Fp8LinearState* fp8, const Tensor& x, const Tensor& dy, Tensor& dw) {
  if (dw.dtype() != DType::f32) throw RuntimeError("add_weight_grad: accumulators are f32");
  if (fp8) return accumulate(dw, tp::fp8_weight_grad(g, *fp8, x, dy, DType::f32));  // [in, out] f32
  Tensor acc = dw.reshape({x.dim(-1), dy.dim(-1)});
  if (x.dtype() == dy.dtype() && x.dtype() != DType::f64) ops::gemm(x, true, dy, false, acc, 1.0f, 1.0f);
  else ops::gemm(x.to(DType::f32), true, dy.to(DType::f32), false, acc, 1.0f, 1.0f);
}

void add_bias_grad(const Tensor& dy, Tensor& db) {
  Tensor sums = Tensor::empty({dy.dim(-1)}, DType::f32, dy.device());
  ops::bias_backward(dy, sums);
  accumulate(db, sums);
}

}  // namespace

void accumulate(Tensor& acc, const Tensor& x) {
  if (acc.numel() != x.numel() || acc.dtype() != DType::f32)
    throw RuntimeError(
        cat("accumulate: ", shape_string(x.shape()), " into f32 accumulator ", shape_string(acc.shape())));
  const Tensor src = x.dtype() == DType::f32 ? x : x.to(DType::f32);
  Tensor view = acc.reshape(src.shape());  // shares acc's storage: the f32 sums land in place
  tp::add_into(view, src);
}

Tensor column_backward_input(const tp::TpGroup& g, const tp::ColumnParallelLinear& layer, const Tensor& dy) {
  return tp::enter_region_backward(g,
                                   times_transposed(g, layer.fp8.get(), dy, layer.w));  // [b, s, in] partial -> summed
}

void column_backward_weight(const tp::TpGroup& g, const tp::ColumnParallelLinear& layer, const tp::ColumnSaved& saved,
                            const Tensor& dy, Tensor& dw, Tensor* db) {
  const bool sharded = g.sp() && g.regather_input;
  const Tensor x_full = sharded ? tp::enter_region_forward(g, saved.input) : saved.input;  // the re-all-gather
  add_weight_grad(g, layer.fp8.get(), x_full, dy, dw);
  if (db) add_bias_grad(dy, *db);
}

Tensor row_backward_input(const tp::TpGroup& g, const tp::RowParallelLinear& layer, const Tensor& dy, Tensor& dy_full) {
  dy_full = tp::exit_region_backward(g, dy);                      // [b, s, out]
  return times_transposed(g, layer.fp8.get(), dy_full, layer.w);  // [b, s, in/tp]
}

void row_backward_weight(const tp::TpGroup& g, const tp::RowParallelLinear& layer, const tp::RowSaved& saved,
                         const Tensor& dy_full, const Tensor& dy, Tensor& dw, Tensor* db) {
  add_weight_grad(g, layer.fp8.get(), saved.input, dy_full, dw);
  // The bias is added after the reduction: its gradient comes from the tokens this rank holds there.
  if (db) add_bias_grad(dy, *db);
}

}  // namespace sextant::model
