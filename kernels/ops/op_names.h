// The names the ops record their time under (harness/op_times.h): a
// training step's compute split by op. An op called inside another (the
// host attention's gemms, cross_entropy_forward's pieces) counts as the
// outer one.
#pragma once

namespace sextant::ops::timed {

inline constexpr const char* kGemm = "gemm";
inline constexpr const char* kAttention = "attention";
inline constexpr const char* kLayerNorm = "layernorm";
inline constexpr const char* kGelu = "gelu";
inline constexpr const char* kSoftmax = "softmax";
inline constexpr const char* kCrossEntropy = "cross_entropy";
inline constexpr const char* kBias = "bias";
inline constexpr const char* kAdam = "adam";
inline constexpr const char* kAll[] = {kGemm, kAttention, kLayerNorm, kGelu, kSoftmax, kCrossEntropy, kBias, kAdam};

}  // namespace sextant::ops::timed
