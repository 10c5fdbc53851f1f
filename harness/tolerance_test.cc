#include "harness/tolerance.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sextant {
namespace {

TEST(Tolerance, EveryRowHasAReasonAndAName) {
  for (const ToleranceRow& row : tolerance_table()) {
    EXPECT_STRNE(row.reason, "");
    EXPECT_EQ(parse_op_class(row.name), row.op);
    EXPECT_GE(row.storage_roundings, 0);
    EXPECT_GT(row.accumulation_growth, 0) << row.name << ": every computation rounds in f32 at least once";
  }
}

TEST(Tolerance, ExpectedErrorIsStorageAndAccumulationRoundoff) {
  const ToleranceRow& row = tolerance_row(OpClass::linear);
  const double u32 = unit_roundoff(DType::f32), u16 = unit_roundoff(DType::bf16);
  EXPECT_DOUBLE_EQ(expected_error(DType::f32, OpClass::linear),
                   (row.storage_roundings + row.accumulation_growth) * u32);
  EXPECT_DOUBLE_EQ(expected_error(DType::bf16, OpClass::linear),
                   row.storage_roundings * u16 + row.accumulation_growth * u32);
  EXPECT_DOUBLE_EQ(baseline_gate(DType::bf16, OpClass::linear),
                   kGateHeadroom * expected_error(DType::bf16, OpClass::linear));
  // A statistic kept in f32 is held to f32 roundoff even in a bf16 run.
  EXPECT_LT(baseline_gate(DType::bf16, OpClass::row_stat), 1e-5);
}

TEST(Tolerance, DistributedBoundIsTwiceTheBaselineOrTheFloor) {
  const double floor = expected_error(DType::f32, OpClass::attention);
  EXPECT_DOUBLE_EQ(distributed_bound(DType::f32, OpClass::attention, floor / 10), floor);
  EXPECT_DOUBLE_EQ(distributed_bound(DType::f32, OpClass::attention, floor * 3), floor * 6);
}

TEST(Tolerance, GatesSitBetweenRoundoffAndVisibleErrors) {
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (const ToleranceRow& row : tolerance_table()) {
      EXPECT_GT(baseline_gate(d, row.op), unit_roundoff(accumulate_dtype(d))) << row.name;
      // A wrong kernel with a 0.3% relative error must fail in f32.
      if (d == DType::f32) {
        EXPECT_LT(baseline_gate(d, row.op), 3e-3) << row.name;
      }
    }
}

TEST(Tolerance, Fp8BoundIsTheOperandsRoundoffPlusTheOpsOwnRow) {
  ASSERT_FALSE(fp8_tolerance_table().empty());
  for (const QuantizedRow& row : fp8_tolerance_table()) EXPECT_STRNE(row.reason, "");
  const Bound b = fp8_bound(OpClass::linear, {0x1p-3, 0x1p-4}, DType::bf16);
  EXPECT_EQ(b.row, "fp8_linear");
  EXPECT_DOUBLE_EQ(b.gate, kGateHeadroom * (std::sqrt(0x1p-6 + 0x1p-8) + expected_error(DType::bf16, OpClass::linear)));
  EXPECT_DOUBLE_EQ(b.floor, expected_error(DType::bf16, OpClass::linear));  // the distributed run casts alike
  EXPECT_EQ(fp8_bound(OpClass::norm, {0x1p-4}, DType::f32).row, "fp8_norm");
  // A step's tensors: the unquantized floor grows with training, the gate does not.
  const Bound step = fp8_bound(OpClass::model, {0x1p-4}, DType::bf16, 3);
  EXPECT_EQ(step.row, "fp8_model");
  EXPECT_DOUBLE_EQ(step.gate, fp8_bound(OpClass::model, {0x1p-4}, DType::bf16).gate);
  EXPECT_DOUBLE_EQ(step.floor, 3 * expected_error(DType::bf16, OpClass::model));
  EXPECT_THROW(fp8_bound(OpClass::softmax, {0x1p-4}, DType::f32), std::exception);
  const Bound same = tolerance_bound(DType::f32, OpClass::norm, 2);
  EXPECT_DOUBLE_EQ(same.gate, 2 * baseline_gate(DType::f32, OpClass::norm));
  EXPECT_EQ(same.row, "norm");
  EXPECT_EQ(exact_bound("fp8_quantization").gate, 0);
}

// The budget grows like sqrt(k) over steps, like k lr past lr_steps, and
// with each layer below the last one; it never shrinks, and one step of the
// head or the last layer keeps the row's numbers.
TEST(Tolerance, TrainingGrowthRisesWithStepsAndDistanceFromTheLoss) {
  const TrainingGrowthRule& rule = training_growth_rule();
  EXPECT_DOUBLE_EQ(rule.growth(1e-3, 1, 0), 1.0);
  EXPECT_DOUBLE_EQ(rule.growth(1e-3, 1, 1), 1.0);
  EXPECT_DOUBLE_EQ(rule.growth(1e-3, 4, 0), 2.0);
  EXPECT_DOUBLE_EQ(rule.growth(1e-3, 10, 1), 10.0 / 3);  // k lr / 3e-3 = 3.33 > sqrt(10)
  EXPECT_DOUBLE_EQ(rule.growth(1e-4, 9, 1), 3.0);
  EXPECT_DOUBLE_EQ(rule.growth(1e-3, 1, 3), rule.per_layer * rule.per_layer);
  EXPECT_GT(rule.per_layer, 1.0);
  for (int depth = 0; depth < 10; ++depth) EXPECT_LE(rule.growth(1e-3, 1, depth), rule.growth(1e-3, 1, depth + 1));
  for (int step = 1; step < 100; ++step) EXPECT_LE(rule.growth(1e-3, step, 2), rule.growth(1e-3, step + 1, 2));
}

}  // namespace
}  // namespace sextant
