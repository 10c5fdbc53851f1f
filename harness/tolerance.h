// The conformance tolerance table: how far from the float64 reference a
// correct kernel may land, per storage dtype and per kind of computation.
//
// A checked tensor comes from one kind of computation (its OpClass row). A
// correct kernel's relative L2 error against the float64 reference, computed
// from the same rounded inputs, is modelled as
//
//   expected(dtype, op) = a(op) * u(dtype) + b(op) * u(accumulate(dtype))
//
// with u the unit roundoff (2^-24 f32, 2^-8 bf16, 2^-11 f16, 2^-53 f64) and
// accumulate(dtype) = f32 for every 16-bit or f32 storage (f64 for f64):
//   a  storage roundings: how many times a value on the path is rounded to the
//      storage dtype (inputs are already rounded and the reference consumes
//      them), times how much the computation amplifies a relative
//      perturbation (its condition number);
//   b  accumulation growth: rounding in the f32 sums and transcendental
//      functions, which grows with the reduction length K (about sqrt(K) u
//      for random-sign terms: Higham and Mary, "A New Approach to
//      Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 2019)
//      and with conditioning.
// Both factors are stated for the largest shapes of the ci, default and
// qualify profiles; the reason on each row says why.
//
// The conformance rule (docs/CONFORMANCE.md, "The rule"):
//   1. the one-device baseline must satisfy  error(base) <= gate,
//      gate = kGateHeadroom x expected: the kernel itself is right. Without
//      this gate a kernel that the one-rank run shares could be wrong and
//      still pass, because rule 2 grows with it;
//   2. the distributed run must satisfy  error(dist) <= max(2 x error(base), floor),
//      floor = expected: it is as accurate as the same kernel on one device
//      (flash-attn's criterion), and never needs to beat a correct kernel's
//      expected error.
#pragma once

#include <string>
#include <vector>

#include "harness/dtype.h"

namespace sextant {

// What computed a checked tensor: selects its row of the table.
enum class OpClass {
  data_movement,  // copies, permutes, gathers: values pass through unchanged
  elementwise,    // per-element functions (GELU, bias, scaling) and their gradients
  softmax,        // row softmax and its gradient
  row_stat,       // per-row f32 statistics of rounded inputs (attention LSE)
  loss,           // losses: cross-entropy per row or averaged, auxiliary losses
  linear,         // matmuls: linear layers, experts, and their input and weight gradients
  norm,           // LayerNorm outputs and gradients (gamma, beta, input)
  attention,      // attention output and dq, dk, dv
  optimizer,      // the Adam op: parameters and moments after its steps
  model,          // a model's gradients and parameters over training steps; gradients through several layers
};

struct ToleranceRow {
  OpClass op;
  const char* name;            // as the results record it ("linear", ...)
  double storage_roundings;    // a
  double accumulation_growth;  // b
  const char* reason;
};

// Headroom of the baseline gate over the expected error: the spread of a
// correct kernel's error across shapes, seeds and profiles.
inline constexpr double kGateHeadroom = 4.0;

// The systematic check beside the norm bound (docs/CONFORMANCE.md,
// "Systematic errors"): the distributed run's scale coefficient and mean
// signed error against the reference must equal the one-device run's
// within k standard errors of their difference (Systematic, compare.h),
// unless the difference is below min_effect_fraction of the row's floor
// (the expected error of a correct kernel). Op classes whose rounding is
// not independent from element to element are left to the norm bound.
struct SystematicRule {
  double k;                              // standard errors a difference must exceed to fail
  double min_effect_fraction;            // ... and this fraction of the floor
  int groups;                            // jackknife groups of contiguous elements
  int64_t min_elements;                  // smaller tensors are left to the norm bound
  std::vector<OpClass> norm_bound_only;  // op classes the check does not apply to
  const char* reason;
  const char* norm_bound_only_reason;

  bool applies_to(OpClass op) const;
};
const SystematicRule& systematic_rule();
// min_effect_fraction x expected_error(dtype, op): the smallest systematic difference that fails.
double systematic_min_effect(DType dtype, OpClass op);

// How the model row's budget grows in a trained model (the step suite): a
// tensor d layers from the loss after k steps at learning rate lr gets
//   max(sqrt(k), k lr / lr_steps) x per_layer^max(0, d - 1)
// times the row's gate and floor; d is 0 for the head and the final
// LayerNorm, L - l for layer l of L and L + 1 for the embedding. The shape is
// that of Megatron's optimizer-gradient check, k C^(L+1-l) eps (arXiv
// 2506.09280, Thm 5.3).
struct TrainingGrowthRule {
  double per_layer;  // C
  double lr_steps;   // k lr past which the drift grows in proportion to k lr
  const char* depth_reason;
  const char* steps_reason;

  double growth(double lr, int step, int depth) const;
};
const TrainingGrowthRule& training_growth_rule();

const std::vector<ToleranceRow>& tolerance_table();

// What one checked tensor is held to: the gate on the one-device baseline
// and the floor of the distributed bound (harness/check.h).
struct Bound {
  OpClass op = OpClass::data_movement;  // the computation (the systematic rule reads it)
  std::string row;                      // as the results record it ("linear", "fp8_linear", ...)
  double gate = 0, floor = 0;
  double growth = 1;  // how many times the row's budget applies (already in gate and floor)
};
// The row of `op` for storage `dtype`, growth times.
Bound tolerance_bound(DType dtype, OpClass op, double growth = 1);

// FP8 end to end (docs/CONFORMANCE.md, "FP8"): against float64 of the
// unquantized operands, a correct FP8 op lands within
//   expected = q(op) x sqrt(sum of u(format)^2 over the casts on its path)
//              + expected_error(out dtype, op)
// with u(E4M3) = 2^-4 and u(E5M2) = 2^-3: each cast rounds every value once
// by at most u relative, independently of the other casts, so the errors'
// variances add; q the amplification of those roundings into the op's
// result; the second term is the kernel's own rounding at the
// output dtype (the row of the same op). The baseline's gate is
// kGateHeadroom x expected. The distributed run's floor is the unquantized
// op's: it casts with the one-rank run's scales (its amaxes reduced over the
// ranks), so it must be as close as bf16 runs are, within 2 x the
// baseline's error. The kernel's arithmetic alone is held to the second
// term against float64 of the dequantized operands.
struct QuantizedRow {
  OpClass op;
  const char* name;            // as the results record it ("fp8_linear")
  double quantization_growth;  // q
  const char* reason;
};
const std::vector<QuantizedRow>& fp8_tolerance_table();
// floor_growth scales the distributed run's floor alone (the training
// growth rule, for the unquantized floor of a step's tensors): the gate
// does not grow.
Bound fp8_bound(OpClass op, const std::vector<double>& operand_unit_roundoffs, DType out, double floor_growth = 1);
// An FP8 product on FP8 tensor cores (cuBLASLt on CUDA), against float64
// of its dequantized operands: the linear row with the tensor cores'
// accumulator in place of f32's,
//   expected = a(linear) u(out) + b(linear) 2^-accumulator_bits,
// gate kGateHeadroom x expected (the row's reason says why).
struct TensorCoreRow {
  const char* name;  // as the results record it ("fp8_tensor_core")
  int accumulator_bits;
  const char* reason;
};
const TensorCoreRow& fp8_tensor_core_row();
Bound fp8_tensor_core_bound(DType out);
// Bit-exact agreement (gate and floor 0), e.g. quantized codes and scales
// against the recipe's own definition.
Bound exact_bound(const std::string& row);
const ToleranceRow& tolerance_row(OpClass op);
std::string op_class_name(OpClass op);
OpClass parse_op_class(const std::string& name);  // throws RuntimeError

// The dtype sums are kept in: f64 for f64 storage, f32 otherwise.
DType accumulate_dtype(DType storage);
// a * u(dtype) + b * u(accumulate(dtype)): the floor of the distributed bound.
double expected_error(DType dtype, OpClass op);
// kGateHeadroom * expected_error: the absolute gate on the one-device baseline.
double baseline_gate(DType dtype, OpClass op);
// max(2 * base_error, expected_error): the bound on the distributed run.
double distributed_bound(DType dtype, OpClass op, double base_error);

}  // namespace sextant
