// Device tensors in the harness (narrow, concat, write_slice, to(DType)) and
// the data-movement helpers of cuda_ops.h (permute_rows, add_into, mul_add,
// gather_rows, scatter_add_rows): each against its host counterpart, bit for
// bit where the host does the same arithmetic.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/ops/cuda/cuda_testing.h"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops {
namespace {

using testing::differing_elements;
using testing::gpu;
using testing::host;
using testing::input;

constexpr DType kAll[] = {DType::f64, DType::f32, DType::bf16, DType::f16};

TEST(CudaTensor, NarrowConcatAndWriteSliceMoveTheSameBytes) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kAll) {
    const Tensor x = input({3, 10, 4, 6}, d, "tensor.x");
    const Tensor dx = gpu(x);
    for (int dim : {0, 1, 3}) {
      const Tensor h = narrow(x, dim, 1, 2), c = narrow(dx, dim, 1, 2);
      EXPECT_FALSE(c.is_host());
      EXPECT_EQ(differing_elements(c, h), 0) << dtype_name(d) << " narrow dim " << dim;
    }
    const Tensor joined = concat({narrow(dx, 1, 7, 3), narrow(dx, 1, 0, 7)}, 1);
    EXPECT_EQ(differing_elements(joined, concat({narrow(x, 1, 7, 3), narrow(x, 1, 0, 7)}, 1)), 0) << dtype_name(d);
    Tensor target = Tensor::zeros(x.shape(), d, Device::cuda), host_target = Tensor::zeros(x.shape(), d);
    write_slice(target, 1, 4, narrow(dx, 1, 0, 5));
    write_slice(host_target, 1, 4, narrow(x, 1, 0, 5));
    EXPECT_EQ(differing_elements(target, host_target), 0) << dtype_name(d);
    write_slice(target, 1, 0, narrow(x, 1, 0, 2));  // host source into a device tensor
    write_slice(host_target, 1, 0, narrow(x, 1, 0, 2));
    EXPECT_EQ(differing_elements(target, host_target), 0) << dtype_name(d);
  }
}

TEST(CudaTensor, ConversionsRoundAsTheHost) {
  SEXTANT_REQUIRE_GPU();
  // Values across the ranges that matter: tiny (f16 subnormals), huge (f16
  // overflow), and halfway cases of every format.
  std::vector<double> values;
  for (int e = -30; e <= 20; ++e)
    for (double m : {1.0, 1.00048828125, 1.0009765625, 1.5, 1.99951171875, 1.00390625, 1.001953125})
      for (double sign : {1.0, -1.0}) values.push_back(sign * std::ldexp(m, e));
  values.push_back(65519.0), values.push_back(65520.0), values.push_back(0.0);
  const Tensor x64 = Tensor::from_values({static_cast<int64_t>(values.size())}, values, DType::f64);
  for (DType from : kAll)
    for (DType to : kAll) {
      const Tensor src = x64.to(from);
      EXPECT_EQ(differing_elements(gpu(src).to(to), src.to(to)), 0) << dtype_name(from) << " -> " << dtype_name(to);
    }
}

TEST(CudaHelpers, PermuteRowsMatchesTheHostOrder) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : {DType::f32, DType::bf16, DType::f64}) {
    const Tensor x = input({2, 3, 4, 5, 6}, d, "permute.x");
    const Shape view{2, 3, 4, 5, 6};
    const std::vector<int> order{2, 0, 3, 1, 4};
    Tensor out = Tensor::empty({4, 2, 5, 3, 6}, d, Device::cuda);
    cuda::permute_rows(gpu(x), view, order, out);
    const Tensor h = host(out);
    // out[a][b][c][e][f] = x[b][e][a][c][f]
    int64_t wrong = 0;
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < 5; ++c)
          for (int64_t e = 0; e < 3; ++e)
            for (int64_t f = 0; f < 6; ++f)
              wrong += h.at((((a * 2 + b) * 5 + c) * 3 + e) * 6 + f) != x.at((((b * 3 + e) * 4 + a) * 5 + c) * 6 + f);
    EXPECT_EQ(wrong, 0) << dtype_name(d);
  }
}

TEST(CudaHelpers, AddIntoAndMulAddRoundOnce) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor a = input({300}, d, "ew.a"), b = input({300}, d, "ew.b"), c = input({300}, d, "ew.c");
    Tensor y = gpu(a);
    cuda::add_into(y, gpu(b));
    Tensor out = Tensor::empty({300}, d, Device::cuda), product = Tensor::empty({300}, d, Device::cuda);
    cuda::mul_add(gpu(a), gpu(b), gpu(c), out);
    cuda::mul_add(gpu(a), gpu(b), Tensor(), product);
    const Tensor hy = host(y), hout = host(out), hproduct = host(product);
    int64_t wrong = 0;
    for (int64_t i = 0; i < 300; ++i) {
      const float fa = static_cast<float>(a.at(i)), fb = static_cast<float>(b.at(i)), fc = static_cast<float>(c.at(i));
      const float ab = fa * fb;
      wrong += hy.at(i) != round_to(d, fa + fb);
      wrong += hout.at(i) != round_to(d, ab + fc);
      wrong += hproduct.at(i) != round_to(d, ab);
    }
    EXPECT_EQ(wrong, 0) << dtype_name(d);
  }
}

TEST(CudaHelpers, EmbeddingGatherAndScatterAdd) {
  SEXTANT_REQUIRE_GPU();
  const int64_t rows = 10, h = 7, first = 20;  // the table holds ids [20, 30)
  const std::vector<int64_t> ids{25, 3, 20, 29, 25, 31, 22};
  const Tensor table = input({rows, h}, DType::bf16, "emb.table");
  Tensor out = Tensor::zeros({static_cast<int64_t>(ids.size()), h}, DType::bf16, Device::cuda);
  cuda::gather_rows(gpu(table), ids, first, out);
  const Tensor grad = input({static_cast<int64_t>(ids.size()), h}, DType::bf16, "emb.grad");
  Tensor sums = Tensor::zeros({rows, h}, DType::f32, Device::cuda);
  cuda::scatter_add_rows(gpu(grad), ids, first, sums);
  const Tensor ho = host(out), hs = host(sums);
  std::vector<double> expect_sums(rows * h, 0.0);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t j = 0; j < h; ++j) {
      const int64_t local = ids[t] - first;
      const bool mine = local >= 0 && local < rows;
      EXPECT_EQ(ho.at(t * h + j), mine ? table.at(local * h + j) : 0.0) << "token " << t;
      if (mine) expect_sums[local * h + j] += grad.at(t * h + j);
    }
  for (int64_t i = 0; i < rows * h; ++i) EXPECT_NEAR(hs.at(i), expect_sums[i], 1e-6) << i;
}

}  // namespace
}  // namespace sextant::ops
