// The parallel-config planner (`sextant plan`). Given a model, a cluster and
// a global batch, it enumerates every valid (tp, cp, pp, dp, ep, etp, vpp,
// sp, recompute) config and estimates per-GPU memory and step time with a
// simple roofline plus alpha-beta communication model. Every formula is
// written out in planner.cc and echoed in --json output, so an estimate can
// be audited.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/planner/specs.h"

namespace sextant::plan {

struct Estimate {
  Config config;
  int64_t microbatches = 0;
  // Memory per GPU on the most loaded pipeline stage, bytes.
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, communication = 0, memory = 0;
  bool fits = false;
  // Seconds per step (time_model.h): compute = gemm + attention +
  // memory_bound + overhead + optimizer_time; communication exposed, i.e.
  // not hidden behind compute.
  double gemm = 0, attention = 0, memory_bound = 0, overhead = 0, optimizer_time = 0;
  double compute = 0, tp_comm = 0, cp_comm = 0, ep_comm = 0, dp_comm = 0, pp_comm = 0, bubble = 0, step = 0;
  double model_flops = 0, mfu = 0, tokens_per_s = 0;
};
void to_json(nlohmann::json& j, const Estimate& e);

// Throws UsageError (one line naming the rule) when the config is invalid for
// the model and cluster.
void validate(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& cfg);
Estimate estimate(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& cfg);
// Every valid config, fitting ones first, then by estimated step time.
std::vector<Estimate> search(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t);

// Megatron's num_floating_point_operations for one step (megatron/training/training.py).
double model_flops_per_step(const ModelSpec& m, int64_t sequences);

// Named presets (throw UsageError naming the known ones).
ModelSpec model_preset(const std::string& name);
// What dimension flags describe without a preset: a GPT (Radford et al.
// 2019): GELU MLP of width 4h, tied embeddings, multi-head attention (KV
// heads = heads), learned position embeddings, GPT-2's vocabulary (50257)
// and context (1024). Layers,
// hidden and heads are the caller's (0 here); ffn 0 means 4 x hidden.
ModelSpec gpt_base();
ClusterSpec cluster_preset(const std::string& device, int64_t gpus);
std::vector<std::string> model_presets();

}  // namespace sextant::plan
