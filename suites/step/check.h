// What the conformance checks of the step suite share: a run of K steps
// gathered on root, the float64 reference run and the one-rank baseline run
// (both cached per process: they depend on the model, not on the parallel
// config, so a sweep over configs computes them once).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/check.h"
#include "harness/fp8_scales.h"
#include "kernels/model/trainer.h"

namespace sextant::step {

struct StepRecord {  // one step, whole tensors on root
  double loss = 0;
  std::map<std::string, Tensor> grads, params;  // by parameter name: summed gradients, values after Adam
  std::vector<Tensor> routing;                  // per MoE layer: [B s, k] expert ids of every token
  int64_t ties_followed = 0;                    // a following reference: tokens routed as the tested run was
  Fp8Scales fp8_scales;  // FP8 linears of a per-tensor recipe: this rank's layers' decode scales (fp8_scale_names)
};
using RunRecord = std::vector<StepRecord>;

// Collective over host (the trainer's ranks): reset, then `steps` steps,
// each gathered on root. With a checker, blocks no rank holds and replicas
// that disagree bit for bit fail it.
RunRecord run_steps(model::GptTrainer& trainer, Communicator& host, int steps, Checker* checker);
// Root only, cached. The baseline runs on self's device (the kernel
// backend: host, or the GPU); host_self is a host communicator of this rank
// alone for its bookkeeping (on the host it may be self itself).
const RunRecord& reference_run(const model::GptConfig& c, uint64_t seed, int steps);
// Root only. The reference that routes each token as `tested` did wherever
// that is a top k of its own logits to within the tie band, or `plain`
// itself where the two route every token alike. tested_dtype sets the band.
RunRecord following_reference(const model::GptConfig& c, uint64_t seed, const RunRecord& tested, DType tested_dtype);
// The tie band of step k (1-based): two routings whose logits differ by less
// than this, relative to a token's largest logit, are both right.
double routing_tie_band(const model::GptConfig& c, DType tested_dtype, int step);
const RunRecord& baseline_run(const model::GptConfig& c, Communicator& self, Communicator& host_self, uint64_t seed,
                              int steps);
// The decode scale of every FP8 linear's operands in the model, "layers.L.qkv.input", in layer order.
std::vector<std::string> fp8_scale_names(const model::GptConfig& c);
// What a checked tensor of the model is held to at the given training
// growth: op's row, or under FP8 linears the fp8_model row over the casts
// of one layer's forward and backward (harness/tolerance.h).
Bound model_bound(const model::GptConfig& c, DType dtype, OpClass op, double growth);
// Tokens (rows) whose set of experts differs between two [T, k] tables.
std::vector<int64_t> routing_differences(const Tensor& got, const Tensor& want);

}  // namespace sextant::step
