// The cuDNN graphs as far as they are checked without a GPU: the library
// loads (or names where it looked), and cuDNN's frontend validates the
// forward and backward graphs of the shapes the block op hands it (dims,
// strides of pieces inside a block, GQA, causal). Lowering a graph to an
// execution plan needs a device; ops_cuda_test covers that on a GPU.
#include "kernels/ops/cuda/cudnn_sdpa.h"

#include <gtest/gtest.h>

#include <cmath>

#include <cudnn_frontend.h>

#include "harness/error.h"

namespace sextant::ops::cuda::cudnn {
namespace {

// Skips (visibly) where no libcudnn.so.9 is installed.
bool library_present() {
  try {
    load_library();
    return true;
  } catch (const RuntimeError&) {
    return false;
  }
}

TEST(CudnnSdpa, MissingLibraryIsOneLineNamingWhatWasTried) {
  try {
    open_library({"/nonexistent/libcudnn.so.9"}, nullptr);
    FAIL() << "opened a library that does not exist";
  } catch (const RuntimeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("/nonexistent/libcudnn.so.9"), std::string::npos) << message;
    EXPECT_NE(message.find("SEXTANT_CUDNN_LIBRARY"), std::string::npos) << message;
    EXPECT_NE(message.find("attention_impl=own"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CudnnSdpa, LibraryLoadsAndIsVersion9) {
  if (!library_present()) GTEST_SKIP() << "no libcudnn.so.9 (tried " << library_candidates().front() << ")";
  EXPECT_GE(library_version(), 90000);
  EXPECT_LT(library_version(), 100000);
}

SdpaShape shape(int64_t hq, int64_t hk, int64_t sq, int64_t sk, bool causal, DType dtype = DType::bf16, int64_t d = 64,
                int64_t dv = 64) {
  return {.dtype = dtype,
          .b = 2,
          .hq = hq,
          .hk = hk,
          .d = d,
          .dv = dv,
          .sq = sq,
          .sk = sk,
          .causal = causal,
          .scale = 1.0f / std::sqrt(static_cast<float>(d))};
}

// The shapes pieces take: square causal diagonals, no-mask rectangles (a
// zigzag step's half of the queries or keys, a sampled row against its
// earlier keys), MHA and GQA, bf16 and f16.
TEST(CudnnSdpa, GraphsOfBlockPiecesValidate) {
  if (!library_present()) GTEST_SKIP() << "no libcudnn.so.9";
  for (const SdpaShape& s :
       {shape(4, 4, 256, 256, false), shape(4, 4, 256, 256, true), shape(8, 2, 128, 256, false),
        shape(8, 2, 256, 256, true, DType::f16), shape(4, 1, 32, 64, false), shape(4, 4, 1, 37, false),
        shape(4, 4, 128, 128, true, DType::bf16, 128, 64), shape(4, 2, 64, 128, false, DType::bf16, 96, 64)}) {
    SCOPED_TRACE(testing::Message() << "heads " << s.hq << "/" << s.hk << " rows " << s.sq << " x " << s.sk << " d "
                                    << s.d << "/" << s.dv << (s.causal ? " causal" : ""));
    for (int sm : {80, 90}) {
      std::shared_ptr<cudnn_frontend::graph::Graph> forward, backward;
      ASSERT_NO_THROW(forward = forward_graph(s, sm)) << "sm " << sm;
      ASSERT_NO_THROW(backward = backward_graph(s, sm)) << "sm " << sm;
      EXPECT_NE(forward, nullptr);
      EXPECT_NE(backward, nullptr);
    }
  }
}

// What the fused engines do not take is refused before cuDNN sees it.
TEST(CudnnSdpa, UnsupportedShapesAreRefused) {
  EXPECT_FALSE(supports(DType::f32, 64));
  EXPECT_FALSE(supports(DType::bf16, 12));
  EXPECT_FALSE(supports(DType::bf16, 256));
  EXPECT_TRUE(supports(DType::f16, 128));
  if (!library_present()) GTEST_SKIP() << "no libcudnn.so.9";
  EXPECT_THROW(forward_graph(shape(4, 4, 64, 64, false, DType::f32), 90), RuntimeError);
  EXPECT_THROW(forward_graph(shape(4, 4, 32, 64, true), 90), RuntimeError);    // a causal piece must be square
  EXPECT_THROW(backward_graph(shape(3, 2, 64, 64, false), 90), RuntimeError);  // 2 kv heads cannot serve 3
  // cuDNN's own refusal (one row against one key, backward): the block op
  // runs our kernels for such a piece (cudnn::takes is false).
  EXPECT_THROW(backward_graph(shape(4, 4, 1, 1, false), 90), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops::cuda::cudnn
