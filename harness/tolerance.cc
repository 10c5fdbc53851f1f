#include "harness/tolerance.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"

namespace sextant {

namespace {

// a = storage roundings x conditioning, b = accumulation growth (see the
// header). Measured baseline errors per row and profile are in
// docs/CONFORMANCE.md; the gate keeps at least 3x headroom over every one.
const std::vector<ToleranceRow> kTable = {
    {OpClass::data_movement, "data_movement", 0.5, 1,
     "values are copied, not computed: at most one rounding to a narrower storage dtype"},
    {OpClass::elementwise, "elementwise", 1, 4, "one rounding of the output; f32 exp/tanh are within a few ulp"},
    {OpClass::softmax, "softmax", 1, 4,
     "one rounding of the output; the max-shifted exp and the row sum add a few f32 ulp (sum of positive terms)"},
    {OpClass::row_stat, "row_stat", 0, 4,
     "kept in f32 from rounded inputs, never stored in 16 bits: only f32 dot products and a log-sum-exp"},
    {OpClass::loss, "loss", 0.5, 4,
     "a mean of per-row log-softmax terms: the rounding of the logits averages out over the rows"},
    {OpClass::linear, "linear", 1, 8,
     "one rounding of the output; f32 dot products of K <= 16384 terms grow like sqrt(K) u but blocked BLAS sums "
     "keep them within a few u"},
    {OpClass::norm, "norm", 2, 16,
     "the backward subtracts two row means from g (conditioning about 2) over h-term f32 sums; its inputs come "
     "rounded from the layer above"},
    {OpClass::attention, "attention", 1, 8,
     "outputs rounded once; P and dS are formed in f32 from scores that are dot products of d <= 256 terms, then "
     "summed over up to s keys in f32"},
    {OpClass::optimizer, "optimizer", 0, 16,
     "the Adam op alone: f32 master weights and moments whatever the gradients' dtype, a few f32 roundings per "
     "step"},
    {OpClass::model, "model", 3, 32,
     "a whole model over training steps (gradients, and parameters Adam updated from them) or a block's "
     "gradients through several layers: each layer adds a rounding of its stored activations and the backward "
     "through LayerNorm and softmax amplifies it; Adam turns a gradient's relative error into up to 2 lr for "
     "entries whose gradient is rounding noise"},
};
// q per op class (see the header); measured margins are in docs/CONFORMANCE.md.
const std::vector<QuantizedRow> kFp8Table = {
    {OpClass::linear, "fp8_linear", 1,
     "each output is a sum of products of cast values, each cast off by at most u relative with mean 0 and "
     "independent of the others: the products' relative errors have variance at most the sum of u^2 over the "
     "casts on the path, so over random-sign sums the output's relative L2 error stays under sqrt(sum u^2)"},
    {OpClass::norm, "fp8_norm", 1,
     "a LayerNorm's gradient behind FP8 linears: the casts on its path set its relative error as for fp8_linear; "
     "the LayerNorm backward scales the signal and that error alike (a projection and 1/sigma), then rounds once "
     "more at the norm row"},
    {OpClass::model, "fp8_model", 0.577,
     "a training step's loss, gradients and parameters behind FP8 linears, over the casts of one layer's forward "
     "and backward (QKV, output, fc1, fc2 forward, their dgrads, one wgrad: 18 casts): q = 1/sqrt(3), since a "
     "cast's rounding, uniform over its rounding interval, has relative variance at most u^2/3, and the largest "
     "gradient error measured 0.77 of that (LayerNorm gains, hybrid formats); the FP8 term does not grow with "
     "depth or steps, so neither does the gate: each layer's gradients carry the casts of their own layer, and "
     "those of the layers above reach them damped by the residual stream (measured flat over depths 1-4 and steps "
     "1-3); the distributed run's floor, the unquantized model row's, grows as the training growth rule says; "
     "Adam moves a parameter by about lr whatever its gradient's error, so parameters stay far inside"},
};
}  // namespace

const std::vector<ToleranceRow>& tolerance_table() { return kTable; }

const std::vector<QuantizedRow>& fp8_tolerance_table() { return kFp8Table; }

Bound tolerance_bound(DType dtype, OpClass op, double growth) {
  return {op, op_class_name(op), growth * baseline_gate(dtype, op), growth * expected_error(dtype, op), growth};
}

Bound fp8_bound(OpClass op, const std::vector<double>& operand_unit_roundoffs, DType out, double floor_growth) {
  for (const QuantizedRow& row : kFp8Table)
    if (row.op == op) {
      double variance = 0;  // each cast's relative rounding: mean 0, at most u: variance at most u^2
      for (double u : operand_unit_roundoffs) variance += u * u;
      const double expected = row.quantization_growth * std::sqrt(variance) + expected_error(out, op);
      return {op, row.name, kGateHeadroom * expected, floor_growth * expected_error(out, op), floor_growth};
    }
  throw RuntimeError("no FP8 tolerance row for op class " + op_class_name(op));
}

const TensorCoreRow& fp8_tensor_core_row() {
  static const TensorCoreRow row{
      "fp8_tensor_core", 14,
      "Hopper's FP8 tensor cores keep about 14 bits of their running sums (DeepSeek-V3 Technical Report, "
      "arXiv 2412.19437, section 3.3.2), and cuBLASLt with FAST_ACCUM off promotes partial sums to f32, which "
      "bounds how far that rounding grows along K; an H200's products measured 2.6e-5 (K 16) to 1.1e-4 (K 304) "
      "against the f32 linear gate of 2.1e-6, so the f32 row cannot hold them"};
  return row;
}

Bound fp8_tensor_core_bound(DType out) {
  const TensorCoreRow& row = fp8_tensor_core_row();
  const ToleranceRow& linear = tolerance_row(OpClass::linear);
  const double expected = linear.storage_roundings * unit_roundoff(out) +
                          linear.accumulation_growth * std::ldexp(1.0, -row.accumulator_bits);
  return {OpClass::linear, row.name, kGateHeadroom * expected, expected, 1};
}

Bound exact_bound(const std::string& row) { return {OpClass::data_movement, row, 0, 0, 1}; }

const SystematicRule& systematic_rule() {
  static const SystematicRule rule{
      6.0,
      0.125,
      64,
      1024,
      {OpClass::model},
      "k = 6: the jackknife over 64 groups has 63 degrees of freedom and |t_63| > 6 has probability 1e-7, so the "
      "two statistics of the ~10^4 tensors the main job checks at every profile fail a correct kernel about once "
      "in 500 runs; a difference under an eighth of the row's floor fails nothing: another summation order of a "
      "correct kernel leaves real offsets of a fraction of u(f32) (measured up to 0.5 u in the ring's f32 dV and "
      "1.2 u in step gradients), which the statistic resolves but which are no bug, while a bf16 or f16 kernel's "
      "floor of a few u keeps its limit far under the 1e-3 scale errors the check is for; tensors under 1024 "
      "elements give too few per group (16) for a stable standard error",
      "a model's gradients and parameters after training steps differ from the one-device run's by one coherent "
      "perturbation, not by independent roundings: the loss, the normalisation statistics and Adam's updates couple "
      "every element, so the difference's projection on the reference is of the order of the norm error itself "
      "(a correct bf16 step measured 6.7 jackknife standard errors in one tensor); the kernels the model is made of "
      "meet the check in their own suites"};
  return rule;
}

const TrainingGrowthRule& training_growth_rule() {
  static const TrainingGrowthRule rule{
      1.25, 3e-3,
      "the backward through a pre-LN residual layer is g_l = (I + J_l^T) g_(l+1): the error g_(l+1) carries passes "
      "the identity unchanged, the branch J_l adds its share of it again and the layer's own roundings (which the "
      "row covers at every depth) join it, so each layer multiplies the relative error by at most 1 + rho; the "
      "largest gradient error of a layer grew by a median 1.0 and at most 1.23 per layer over 2-4 layers (1.5 for "
      "one pair of adjacent layers) in the ci and default step runs, f32 and bf16, after 1, 3 and 10 steps, and "
      "C = 1.25 covers that compound growth; the head and the final LayerNorm (d = 0) and the last layer (d = 1) "
      "keep the row's numbers",
      "each step's roundings move the run's parameters off the reference's by a perturbation of their own, "
      "independent of the earlier steps', so after k steps the drift adds up like a random walk and the gradients "
      "computed from the drifted parameters differ by about sqrt(k) times one step's (measured in bf16: the largest "
      "gradient error grew from 0.015 to 0.035 over 4 steps of the qualify model and from 0.012 to 0.026 over 10 "
      "of the default one; f32 errors stay flat, their own roundings dominate); and Adam divides each gradient by "
      "its own magnitude, so rounding noise in a gradient that is zero in exact arithmetic (the attention key "
      "bias: softmax is shift-invariant) becomes an update of up to lr a step that the reference does not take, a "
      "drift in proportion to k lr once k lr passes 3e-3 (3 steps at lr 1e-3)"};
  return rule;
}

double TrainingGrowthRule::growth(double lr, int step, int depth) const {
  return std::max(std::sqrt(static_cast<double>(step)), step * lr / lr_steps) *
         std::pow(per_layer, std::max(0, depth - 1));
}

bool SystematicRule::applies_to(OpClass op) const {
  return std::find(norm_bound_only.begin(), norm_bound_only.end(), op) == norm_bound_only.end();
}

double systematic_min_effect(DType dtype, OpClass op) {
  return systematic_rule().min_effect_fraction * expected_error(dtype, op);
}

const ToleranceRow& tolerance_row(OpClass op) {
  for (const ToleranceRow& row : kTable)
    if (row.op == op) return row;
  throw RuntimeError("no tolerance row for op class " + std::to_string(static_cast<int>(op)));
}

std::string op_class_name(OpClass op) { return tolerance_row(op).name; }

OpClass parse_op_class(const std::string& name) {
  for (const ToleranceRow& row : kTable)
    if (name == row.name) return row.op;
  throw RuntimeError("unknown op class '" + name + "'");
}

DType accumulate_dtype(DType storage) { return storage == DType::f64 ? DType::f64 : DType::f32; }

double expected_error(DType dtype, OpClass op) {
  const ToleranceRow& row = tolerance_row(op);
  return row.storage_roundings * unit_roundoff(dtype) +
         row.accumulation_growth * unit_roundoff(accumulate_dtype(dtype));
}

double baseline_gate(DType dtype, OpClass op) { return kGateHeadroom * expected_error(dtype, op); }

double distributed_bound(DType dtype, OpClass op, double base_error) {
  return std::max(2.0 * base_error, expected_error(dtype, op));
}

}  // namespace sextant
