// Which kernels compute attention blocks on a GPU: our own
// (kernels/ops/cuda/attention*.cu) or cuDNN's fused SDPA
// (kernels/ops/cuda/attention_cudnn.cc). cuDNN computes the blocks it takes
// (fused_attention_supports) and our kernels the rest, so an f32 run is the
// same under either. Blocks on the host always run the host op.
#pragma once

#include <cstdint>
#include <string>

#include "harness/case.h"
#include "harness/device.h"
#include "harness/options.h"
#include "harness/tensor.h"

namespace sextant::ops {

enum class AttentionImpl { own, cudnn };

std::string attention_impl_name(AttentionImpl impl);          // "own", "cudnn"
AttentionImpl parse_attention_impl(const std::string& name);  // throws UsageError

// cuDNN's fused attention: 16-bit storage, head_dim a multiple of 8 up to 128.
bool fused_attention_supports(DType dtype, int64_t head_dim);

// The option of every case that runs attention: --set attention_impl=own|cudnn.
OptionSpec attention_impl_option();
// Records it in a case's params where it matters: on cuda (cudnn unless the
// user chose) or when the user set it. Host runs record none, so their
// params match the runs stored before the option existed.
void record_attention_impl(const SweepRequest& req, nlohmann::json& params);
// The implementation a case's params name (none recorded: own).
AttentionImpl attention_impl_of(const nlohmann::json& params);
// cudnn needs --device cuda: UsageError naming the rule otherwise.
void require_attention_impl_runs(AttentionImpl impl, Device device);

}  // namespace sextant::ops
