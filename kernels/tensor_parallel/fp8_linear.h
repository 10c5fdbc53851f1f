// FP8 linears under TP: the three gemms of y = x W + b in FP8
// (kernels/ops/gemm_fp8.h) with scales every rank agrees on.
//
// A per-tensor recipe scales a tensor by its amax. Under TP a rank holds
// part of some tensors (a column- or row-parallel weight, the row-parallel
// input [b, s, in/tp], the column-parallel output gradient [b, s, out/tp]),
// and under DP part of every activation's tokens. So each amax is reduced
// (max) over TP and then over DP before the cast: every rank quantizes with
// the scale of the whole tensor, the one the one-rank run takes (Megatron's
// amax reduction group spans TP x DP x CP: parallel_state's
// get_amax_reduction_group). Reducing a replicated tensor's amax changes
// nothing, so every operand is reduced. Block recipes scale each block by
// its own amax: nothing is reduced.
#pragma once

#include <array>
#include <initializer_list>
#include <vector>

#include "kernels/ops/fp8_recipe.h"
#include "kernels/tensor_parallel/tp_group.h"

namespace sextant::tp {

// The operands of one FP8 linear, each with its own scale.
enum class Fp8Operand { input, weight, output_grad };
inline constexpr int kFp8Operands = 3;
// By Fp8Operand, as checks and results name each operand's scale.
inline constexpr const char* kFp8OperandNames[kFp8Operands] = {"input", "weight", "output_grad"};

// One linear's FP8 state (TransformerEngine's fp8_meta): the recipe,
// delayed scaling's amax history per operand, and what the last step's
// casts used.
struct Fp8LinearState {
  explicit Fp8LinearState(const ops::Fp8Recipe& recipe);
  ops::Fp8Recipe recipe;
  std::array<ops::DelayedScaling, kFp8Operands> delayed;  // by Fp8Operand (delayed scaling only)
  // Per-tensor recipes: the largest amax of this step's casts (each reduced
  // over TP and DP), back to 0 at the step's end; and the last cast's decode scale.
  std::array<float, kFp8Operands> amax{};
  std::array<float, kFp8Operands> scale_inv{};
};

// x: [..., in] @ w: [in, out] -> [..., out] in x's dtype (the forward).
Tensor fp8_matmul(const TpGroup& g, Fp8LinearState& s, const Tensor& x, const Tensor& w);
// dy: [..., out] @ w^T -> [..., in] in dy's dtype (dgrad).
Tensor fp8_matmul_wt(const TpGroup& g, Fp8LinearState& s, const Tensor& dy, const Tensor& w);
// x^T dy over all rows: x [..., in], dy [..., out] -> [in, out] in
// grad_dtype(param_dtype) (wgrad).
Tensor fp8_weight_grad(const TpGroup& g, Fp8LinearState& s, const Tensor& x, const Tensor& dy, DType param_dtype);
// The end of a step (after the backward): delayed scaling rolls each
// operand's history with the step's amax and sets the next step's scales.
// A linear in a pipeline runs several microbatches a step: its caller ends
// the step once, after the last one.
void fp8_end_step(Fp8LinearState& s);

// The FP8 casts on a checked tensor's path, for its bound (harness/
// tolerance.h fp8_bound): the role of each quantized operand of each gemm it
// depends on (a product of two outputs of one gemm depends on it twice).
// fp8_path joins the gemms'.
using Fp8Casts = std::vector<ops::Fp8Role>;
inline const Fp8Casts kFp8Forward = {ops::Fp8Role::activation, ops::Fp8Role::weight};  // y = x W
inline const Fp8Casts kFp8Dgrad = {ops::Fp8Role::gradient, ops::Fp8Role::weight};      // dx = dy W^T
inline const Fp8Casts kFp8Wgrad = {ops::Fp8Role::activation, ops::Fp8Role::gradient};  // dW = x^T dy
Fp8Casts fp8_path(std::initializer_list<Fp8Casts> gemms);
// The unit roundoff of each cast's format under the recipe.
std::vector<double> cast_unit_roundoffs(const ops::Fp8Recipe& recipe, const Fp8Casts& casts);

}  // namespace sextant::tp
