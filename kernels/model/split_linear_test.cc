// The zero-bubble split of the linears' backward (I now, W later) gives the
// very numbers of tensor_parallel's fused backward, with and without SP, in
// the weights' dtype and in FP8 (current scaling). Runs at 1 and 2 ranks.
#include "kernels/model/split_linear.h"

#include <gtest/gtest.h>

#include <tuple>

#include "harness/compare.h"
#include "harness/rng.h"
#include "harness/testing/mpi_world.h"

namespace sextant::model {
namespace {

using testing::world;

Tensor rnd(const Shape& s, const char* name, int rank) {
  return random_tensor(s, DType::f32, RandomSpec{11, tensor_id(name) + static_cast<uint64_t>(rank), 1.0});
}

void expect_same(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(compare(a, b).max_abs, 0.0) << what << " differs from tensor_parallel's backward";
}

// (sequence parallel, FP8 linears)
class SplitLinear : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  bool sp() const { return std::get<0>(GetParam()); }
  std::shared_ptr<tp::Fp8LinearState> fp8() const {
    if (!std::get<1>(GetParam())) return nullptr;
    return std::make_shared<tp::Fp8LinearState>(ops::default_fp8_recipe(ops::Fp8Scaling::current));
  }
};

TEST_P(SplitLinear, ColumnParallelMatchesTheFusedBackward) {
  const int n = world().size(), r = world().rank();
  const tp::TpGroup g{world(), sp()};
  const int64_t b = 2, s = 4 * n, in = 6, out = 4 * n;
  const tp::ColumnParallelLinear layer{rnd({in, out / n}, "w", r), rnd({out / n}, "b", r), fp8()};
  const Tensor x = rnd({b, g.local_seq(s), in}, "x", r), dy = rnd({b, s, out / n}, "dy", r);
  tp::ColumnSaved saved;
  tp::column_parallel_forward(g, layer, x, saved);
  tp::LinearGrads fused;
  const Tensor dx_fused = tp::column_parallel_backward(g, layer, saved, dy, fused);
  const Tensor dx = column_backward_input(g, layer, dy);
  Tensor dw = Tensor::zeros(layer.w.shape(), DType::f32), db = Tensor::zeros(layer.b.shape(), DType::f32);
  column_backward_weight(g, layer, saved, dy, dw, &db);
  expect_same(dx, dx_fused, "dx");
  expect_same(dw, fused.dw, "dw");
  expect_same(db, fused.db, "db");
  column_backward_weight(g, layer, saved, dy, dw, &db);  // W accumulates
  Tensor twice = fused.dw.clone();
  accumulate(twice, fused.dw);
  expect_same(dw, twice, "dw after two microbatches");
}

TEST_P(SplitLinear, RowParallelMatchesTheFusedBackward) {
  const int n = world().size(), r = world().rank();
  const tp::TpGroup g{world(), sp()};
  const int64_t b = 2, s = 4 * n, in = 4 * n, out = 6;
  const tp::RowParallelLinear layer{rnd({in / n, out}, "w", r), rnd({out}, "b", 0), fp8()};
  const Tensor x = rnd({b, s, in / n}, "x", r), dy = rnd({b, g.local_seq(s), out}, "dy", r);
  tp::RowSaved saved;
  tp::row_parallel_forward(g, layer, x, saved);
  tp::LinearGrads fused;
  const Tensor dx_fused = tp::row_parallel_backward(g, layer, saved, dy, fused);
  Tensor dy_full;
  const Tensor dx = row_backward_input(g, layer, dy, dy_full);
  Tensor dw = Tensor::zeros(layer.w.shape(), DType::f32), db = Tensor::zeros(layer.b.shape(), DType::f32);
  row_backward_weight(g, layer, saved, dy_full, dy, dw, &db);
  expect_same(dx, dx_fused, "dx");
  expect_same(dw, fused.dw, "dw");
  expect_same(db, fused.db, "db");
}

INSTANTIATE_TEST_SUITE_P(SequenceParallelAndFp8, SplitLinear, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

}  // namespace
}  // namespace sextant::model
