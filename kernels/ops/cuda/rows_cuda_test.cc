// The row-wise and element-wise CUDA ops against the host op and the float64
// reference, per storage dtype: LayerNorm, GELU, softmax, cross-entropy
// (whole vocabulary and vocab-parallel slices), bias, Adam. Sizes include
// rows too long for the shared-memory row cache and odd lengths.
#include <gtest/gtest.h>

#include <vector>

#include "harness/error.h"
#include "kernels/ops/adam.h"
#include "kernels/ops/bias.h"
#include "kernels/ops/cross_entropy.h"
#include "kernels/ops/cuda/cuda_testing.h"
#include "kernels/ops/gelu.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/softmax.h"
#include "reference/adam.h"
#include "reference/cross_entropy.h"
#include "reference/gelu.h"
#include "reference/layernorm.h"
#include "reference/softmax.h"

namespace sextant::ops {
namespace {

using testing::cuda_conforms;
using testing::gpu;
using testing::host;
using testing::input;

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};
// Odd, long, and past the 40 KiB row cache (12000 f32 values). LayerNorm's
// forward takes its vector kernel at whole 16-byte vectors (8, 1000, 4096,
// 12000: one vector, several per thread, a model width, 768 threads) and its
// row kernel at 37.
constexpr int64_t kRowLengths[] = {8, 37, 1000, 4096, 12000};

TEST(CudaLayerNorm, ForwardAndBackwardConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kDtypes)
    for (int64_t h : kRowLengths)
      for (DType param : {d, DType::f32}) {  // parameters in the activation dtype or f32
        SCOPED_TRACE(::testing::Message() << dtype_name(d) << " h " << h << " params " << dtype_name(param));
        const Tensor x = input({3, 5, h}, d, "ln.x", 2.0), dy = input({3, 5, h}, d, "ln.dy");
        const Tensor gamma = input({h}, param, "ln.gamma"), beta = input({h}, param, "ln.beta");
        Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
        Tensor dgamma = Tensor::empty({h}, param), dbeta = Tensor::empty({h}, param);
        const LayerNormStats stats = layernorm_forward(x, gamma, beta, y);
        layernorm_backward(dy, x, gamma, stats, dx, dgamma, dbeta);
        Tensor gy = gpu(y), gdx = gpu(dx), gdgamma = gpu(dgamma), gdbeta = gpu(dbeta);
        const LayerNormStats gstats = layernorm_forward(gpu(x), gpu(gamma), gpu(beta), gy);
        layernorm_backward(gpu(dy), gpu(x), gpu(gamma), gstats, gdx, gdgamma, gdbeta);
        const ref::LayerNormOut rf = ref::layernorm_forward(x, gamma, beta);
        const ref::LayerNormGrads rb = ref::layernorm_backward(dy, x, gamma);
        EXPECT_TRUE(cuda_conforms(gy, y, rf.y, d, OpClass::norm));
        EXPECT_TRUE(cuda_conforms(gstats.mean, stats.mean, rf.mean, DType::f32, OpClass::row_stat));
        EXPECT_TRUE(cuda_conforms(gstats.rstd, stats.rstd, rf.rstd, DType::f32, OpClass::row_stat));
        EXPECT_TRUE(cuda_conforms(gdx, dx, rb.dx, d, OpClass::norm));
        EXPECT_TRUE(cuda_conforms(gdgamma, dgamma, rb.dgamma, param, OpClass::norm));
        EXPECT_TRUE(cuda_conforms(gdbeta, dbeta, rb.dbeta, param, OpClass::norm));
      }
}

TEST(CudaGelu, ForwardAndBackwardConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kDtypes) {
    const Tensor x = input({7, 333}, d, "gelu.x", 4.0), dy = input({7, 333}, d, "gelu.dy");
    Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
    gelu_forward(x, y);
    gelu_backward(dy, x, dx);
    Tensor gy = gpu(y), gdx = gpu(dx);
    gelu_forward(gpu(x), gy);
    gelu_backward(gpu(dy), gpu(x), gdx);
    EXPECT_TRUE(cuda_conforms(gy, y, ref::gelu_forward(x), d, OpClass::elementwise));
    EXPECT_TRUE(cuda_conforms(gdx, dx, ref::gelu_backward(dy, x), d, OpClass::elementwise));
    Tensor in_place = gpu(dy);  // dx may alias dy
    gelu_backward(in_place, gpu(x), in_place);
    EXPECT_EQ(testing::differing_elements(in_place, gdx), 0) << dtype_name(d);
  }
}

TEST(CudaSoftmax, ForwardAndBackwardConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kDtypes)
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE(::testing::Message() << dtype_name(d) << " n " << n);
      const Tensor x = input({4, n}, d, "softmax.x", 5.0), dy = input({4, n}, d, "softmax.dy");
      Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
      softmax_forward(x, y);
      softmax_backward(dy, y, dx);
      Tensor gy = gpu(y), gdx = gpu(dx);
      softmax_forward(gpu(x), gy);
      softmax_backward(gpu(dy), gy, gdx);
      const Tensor ry = ref::softmax_forward(x);
      EXPECT_TRUE(cuda_conforms(gy, y, ry, d, OpClass::softmax));
      EXPECT_TRUE(cuda_conforms(gdx, dx, ref::softmax_backward(dy, ry), d, OpClass::softmax));
    }
}

std::vector<int64_t> targets_for(int64_t rows, int64_t vocab) {
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int64_t>(random_bits(3, tensor_id("ce.t"), r) % vocab);
  return t;
}

// With padding rows too (targets kIgnoreTarget): loss 0, gradient 0, not counted in the mean.
TEST(CudaCrossEntropy, WholeVocabularyConforms) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kDtypes)
    for (int64_t vocab : {50, 20000})
      for (bool padding : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(d) << " vocab " << vocab << " padding " << padding);
        const int64_t rows = 9;
        const Tensor logits = input({3, 3, vocab}, d, "ce.logits", 8.0);
        std::vector<int64_t> targets = targets_for(rows, vocab);
        if (padding) targets[2] = targets[7] = kIgnoreTarget;
        const CrossEntropyForward f = cross_entropy_forward(logits, targets, LossReduction::mean);
        const CrossEntropyForward gf = cross_entropy_forward(gpu(logits), targets, LossReduction::mean);
        const double ref_loss = ref::cross_entropy_forward(logits, targets, ref::Reduction::mean);
        EXPECT_NEAR(gf.loss, ref_loss, std::max(2 * std::abs(f.loss - ref_loss), 1e-5 * std::abs(ref_loss)));
        EXPECT_FALSE(gf.stats.max.is_host());
        Tensor dlogits = Tensor::empty(logits.shape(), d), gdlogits = gpu(dlogits);
        cross_entropy_backward(logits, targets, f.stats, LossReduction::mean, 1.5f, dlogits);
        cross_entropy_backward(gpu(logits), targets, gf.stats, LossReduction::mean, 1.5f, gdlogits);
        EXPECT_TRUE(cuda_conforms(gdlogits, dlogits,
                                  ref::cross_entropy_backward(logits, targets, ref::Reduction::mean, 1.5), d,
                                  OpClass::softmax));
        if (!padding) continue;
        const Tensor row_loss = host(cross_entropy_row_loss(gf.stats, targets)), grad = host(gdlogits);
        for (int64_t r : {2, 7}) {
          EXPECT_EQ(row_loss.at(r), 0.0);
          for (int64_t j = 0; j < vocab; ++j) ASSERT_EQ(grad.at(r * vocab + j), 0.0) << "row " << r;
        }
      }
}

// Vocab-parallel pieces: two slices, their statistics combined as the TP
// all-reduces combine them (max, then sum, sum), the backward per slice.
TEST(CudaCrossEntropy, VocabSlicesCombineToTheWhole) {
  SEXTANT_REQUIRE_GPU();
  const int64_t rows = 6, vocab = 64, half = 32;
  for (DType d : kDtypes) {
    const Tensor logits = input({rows, vocab}, d, "ce.slices", 8.0);
    const std::vector<int64_t> targets = targets_for(rows, vocab);
    const Tensor slices[2] = {gpu(narrow(logits, 1, 0, half)), gpu(narrow(logits, 1, half, half))};
    const Tensor m0 = host(cross_entropy_row_max(slices[0])), m1 = host(cross_entropy_row_max(slices[1]));
    Tensor max = Tensor::empty({rows}, DType::f32);
    for (int64_t r = 0; r < rows; ++r) max.set(r, std::max(m0.at(r), m1.at(r)));
    CrossEntropyStats stats;
    stats.max = gpu(max);
    const Tensor s0 = host(cross_entropy_sum_exp(slices[0], stats.max)),
                 s1 = host(cross_entropy_sum_exp(slices[1], stats.max));
    const Tensor t0 = host(cross_entropy_target_logit(slices[0], targets, 0)),
                 t1 = host(cross_entropy_target_logit(slices[1], targets, half));
    Tensor sum = Tensor::empty({rows}, DType::f32), target = Tensor::empty({rows}, DType::f32);
    for (int64_t r = 0; r < rows; ++r) sum.set(r, s0.at(r) + s1.at(r)), target.set(r, t0.at(r) + t1.at(r));
    stats.sum_exp = gpu(sum);
    stats.target_logit = gpu(target);
    const Tensor row_loss = host(cross_entropy_row_loss(stats));
    const Tensor ref_rows = ref::cross_entropy_row_loss(logits, targets);
    EXPECT_LT(compare(row_loss, ref_rows).rel_l2, 1e-5) << dtype_name(d);  // f32 statistics of rounded logits
    std::vector<Tensor> grads;
    for (int part = 0; part < 2; ++part) {
      Tensor g = Tensor::empty(slices[part].shape(), d, Device::cuda);
      cross_entropy_backward(slices[part], targets, stats, LossReduction::sum, 1.0f, g, part * half);
      grads.push_back(host(g));
    }
    const Tensor whole = concat(grads, 1);
    Tensor host_whole = Tensor::empty(logits.shape(), d);
    cross_entropy_backward(logits, targets, cross_entropy_forward(logits, targets, LossReduction::sum).stats,
                           LossReduction::sum, 1.0f, host_whole);
    EXPECT_TRUE(cuda_conforms(whole, host_whole, ref::cross_entropy_backward(logits, targets, ref::Reduction::sum), d,
                              OpClass::softmax));
  }
}

TEST(CudaBias, AddAndBackwardConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType d : kDtypes) {
    const int64_t rows = 3000, n = 70;  // many rows: several column-sum splits
    const Tensor x = input({rows, n}, d, "bias.x"), bias = input({n}, d, "bias.b");
    Tensor y = Tensor::empty(x.shape(), d), db = Tensor::empty({n}, d);
    bias_add(x, bias, y);
    bias_backward(x, db);
    Tensor gy = gpu(y), gdb = gpu(db);
    bias_add(gpu(x), gpu(bias), gy);
    bias_backward(gpu(x), gdb);
    // The f64 reference: y = x + b row by row, db = column sums of x.
    Tensor ry = Tensor::empty(x.shape(), DType::f64), rdb = Tensor::zeros({n}, DType::f64);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        ry.set(r * n + j, x.at(r * n + j) + bias.at(j));
        rdb.set(j, rdb.at(j) + x.at(r * n + j));
      }
    EXPECT_TRUE(cuda_conforms(gy, y, ry, d, OpClass::elementwise));
    EXPECT_TRUE(cuda_conforms(gdb, db, rdb, d, OpClass::linear));
  }
}

// Three AdamW steps on f32 master state, the gradient in each storage dtype.
TEST(CudaAdam, StepsConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType grad_dtype : kDtypes) {
    const Shape shape{5, 77};
    Tensor p = input(shape, DType::f32, "adam.p"), m = Tensor::zeros(shape, DType::f32),
           v = Tensor::zeros(shape, DType::f32);
    Tensor gp = gpu(p), gm = gpu(m), gv = gpu(v);
    Tensor rp = p.to(DType::f64), rm = m.to(DType::f64), rv = v.to(DType::f64);
    const AdamConfig config{1e-2, 0.9, 0.999, 1e-8, 0.1};
    const ref::AdamConfig ref_config{1e-2, 0.9, 0.999, 1e-8, 0.1};
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor grad = random_tensor(shape, grad_dtype, {42, tensor_id("adam.g"), 1.0 / step});
      adam_step(p, grad, m, v, step, config);
      adam_step(gp, gpu(grad), gm, gv, step, config);
      ref::adam_step(rp, grad, rm, rv, step, ref_config);
    }
    EXPECT_TRUE(cuda_conforms(gp, p, rp, DType::f32, OpClass::optimizer)) << "param, grad " << dtype_name(grad_dtype);
    EXPECT_TRUE(cuda_conforms(gm, m, rm, DType::f32, OpClass::optimizer)) << "exp_avg, grad " << dtype_name(grad_dtype);
    EXPECT_TRUE(cuda_conforms(gv, v, rv, DType::f32, OpClass::optimizer))
        << "exp_avg_sq, grad " << dtype_name(grad_dtype);
  }
}

TEST(CudaOps, MixedDevicesAreAClearError) {
  SEXTANT_REQUIRE_GPU();
  const Tensor x = input({4, 8}, DType::f32, "mixed.x");
  Tensor y = Tensor::empty({4, 8}, DType::f32, Device::cuda);
  try {
    gelu_forward(x, y);
    ADD_FAILURE() << "no error for a host input with a device output";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_forward: y is on cuda but x is on host"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sextant::ops
