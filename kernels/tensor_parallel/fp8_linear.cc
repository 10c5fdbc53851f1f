#include "kernels/tensor_parallel/fp8_linear.h"

#include <algorithm>

#include "harness/error.h"
#include "kernels/ops/gemm_fp8.h"

namespace sextant::tp {

namespace {

using ops::Fp8Role;

Fp8Role role_of(Fp8Operand operand) {
  switch (operand) {
    case Fp8Operand::input: return Fp8Role::activation;
    case Fp8Operand::weight: return Fp8Role::weight;
    case Fp8Operand::output_grad: return Fp8Role::gradient;
  }
  throw RuntimeError("fp8 linear: unknown operand");
}

// t: [..., cols] as the matrix [rows, cols] the gemm reads.
Tensor as_matrix(const Tensor& t) { return t.reshape({t.numel() / t.dim(-1), t.dim(-1)}); }

// The whole tensor's amax from this rank's part: max over TP, then over DP.
float reduced_amax(const TpGroup& g, const Tensor& part) {
  float amax = ops::fp8_amax(part);
  if (g.fault != Fault::fp8_amax_not_reduced_over_tp) g.comm.all_reduce(&amax, &amax, 1, DType::f32, ReduceOp::max);
  if (g.amax_dp) g.amax_dp->all_reduce(&amax, &amax, 1, DType::f32, ReduceOp::max);
  return amax;
}

// operand (a matrix) cast for a gemm reducing along its columns or rows.
ops::Fp8Tensor quantize(const TpGroup& g, Fp8LinearState& s, Fp8Operand operand, const Tensor& matrix,
                        bool reduce_along_cols) {
  if (!matrix.is_host()) throw RuntimeError("fp8 linear: FP8 gemms run on the host only");
  const int i = static_cast<int>(operand);
  std::optional<float> amax;
  if (s.recipe.per_tensor()) amax = reduced_amax(g, matrix);
  ops::Fp8Tensor q = ops::quantize_fp8(matrix, role_of(operand), reduce_along_cols, s.recipe, &s.delayed[i], amax);
  // An operand cast several times a step (its gemms, a pipeline's microbatches): the step's amax is their max.
  if (s.recipe.per_tensor()) s.amax[i] = std::max(s.amax[i], q.amax), s.scale_inv[i] = q.scale_inv.front();
  return q;
}

Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

}  // namespace

Fp8LinearState::Fp8LinearState(const ops::Fp8Recipe& r)
    : recipe(r),
      delayed{ops::DelayedScaling(r, r.format_of(Fp8Role::activation)),
              ops::DelayedScaling(r, r.format_of(Fp8Role::weight)),
              ops::DelayedScaling(r, r.format_of(Fp8Role::gradient))} {}

Tensor fp8_matmul(const TpGroup& g, Fp8LinearState& s, const Tensor& x, const Tensor& w) {
  const ops::Fp8Tensor qx = quantize(g, s, Fp8Operand::input, as_matrix(x), true);
  const ops::Fp8Tensor qw = quantize(g, s, Fp8Operand::weight, w, false);
  Tensor y = Tensor::empty({qx.rows, w.dim(1)}, x.dtype());
  ops::gemm_fp8(qx, false, qw, false, y);  // Y = X W
  return y.reshape(with_last(x.shape(), w.dim(1)));
}

Tensor fp8_matmul_wt(const TpGroup& g, Fp8LinearState& s, const Tensor& dy, const Tensor& w) {
  const ops::Fp8Tensor qdy = quantize(g, s, Fp8Operand::output_grad, as_matrix(dy), true);
  const ops::Fp8Tensor qw = quantize(g, s, Fp8Operand::weight, w, true);
  Tensor dx = Tensor::empty({qdy.rows, w.dim(0)}, dy.dtype());
  ops::gemm_fp8(qdy, false, qw, true, dx);  // dX = dY W^T
  return dx.reshape(with_last(dy.shape(), w.dim(0)));
}

Tensor fp8_weight_grad(const TpGroup& g, Fp8LinearState& s, const Tensor& x, const Tensor& dy, DType param_dtype) {
  const ops::Fp8Tensor qx = quantize(g, s, Fp8Operand::input, as_matrix(x), false);
  const ops::Fp8Tensor qdy = quantize(g, s, Fp8Operand::output_grad, as_matrix(dy), false);
  Tensor dw = Tensor::empty({x.dim(-1), dy.dim(-1)}, grad_dtype(param_dtype));
  ops::gemm_fp8(qx, true, qdy, false, dw);  // dW = X^T dY
  return dw;
}

void fp8_end_step(Fp8LinearState& s) {
  if (s.recipe.scaling == ops::Fp8Scaling::delayed)
    for (int i = 0; i < kFp8Operands; ++i) s.delayed[i].update(s.amax[i]);
  s.amax.fill(0);
}

Fp8Casts fp8_path(std::initializer_list<Fp8Casts> gemms) {
  Fp8Casts out;
  for (const Fp8Casts& g : gemms) out.insert(out.end(), g.begin(), g.end());
  return out;
}

std::vector<double> cast_unit_roundoffs(const ops::Fp8Recipe& recipe, const Fp8Casts& casts) {
  std::vector<double> out;
  for (ops::Fp8Role role : casts) out.push_back(ops::fp8_info(recipe.format_of(role)).unit_roundoff);
  return out;
}

}  // namespace sextant::tp
