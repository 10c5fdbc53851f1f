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

namespace sextant::plan {

struct ModelSpec {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, seq = 0;
  int64_t v_head_dim = 0;  // of v and the attention output (MLA); 0: the query/key head dim
  // MoE: `moe_layers` of the layers use `experts` routed experts (top-k) of
  // width moe_ffn, plus `shared_experts` always-active experts of that width.
  int64_t moe_layers = 0, experts = 0, topk = 0, moe_ffn = 0, shared_experts = 0;
  bool swiglu = false;             // 3 matrices per MLP instead of 2
  bool tied_embeddings = false;    // the LM head reuses the input embedding (one vocab x h matrix, not two)
  bool learned_positions = false;  // a seq x h table of position embeddings (GPT-2), not rotary
  // Attention parameters per layer when not (H + K) d + K dv columns of QKV
  // and H dv rows of the output (MLA's low-rank projections); 0: those.
  double attention_params_override = 0;
  bool causal = true;

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t dhead() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t dv() const { return v_head_dim > 0 ? v_head_dim : dhead(); }
  int64_t dense_layers() const { return layers - moe_layers; }
  double attention_params() const;         // per layer: h((H + K) d + K dv) + H dv h
  double mlp_params(int64_t width) const;  // (2 or 3) h width
  double embedding_params() const;         // input embedding + LM head (one matrix when tied) + positions
  double total_params() const;
  double active_params() const;  // per token
};

struct ClusterSpec {
  std::string device = "H100";
  int64_t gpus = 8, gpus_per_node = 8;
  double memory_gb = 80, peak_tflops = 989;  // dense bf16
  double nvlink_GBps = 450;                  // per GPU, one direction (H100 NVLink 4: 900 GB/s bidirectional)
  double network_GBps = 50;                  // per GPU (400 Gb/s InfiniBand NDR)
  double latency_us = 10;                    // alpha of every collective step
  double gemm_efficiency = 0.75;             // achievable fraction of peak for the model's matmuls
  double usable_memory = 0.9;                // leave room for the CUDA context and fragmentation
};

struct TrainSpec {
  int64_t global_batch = 0;  // sequences per step
  int64_t micro_batch = 1;   // sequences per microbatch
};

// Activation recomputation, as the step runs it (kernels/model/gpt_config.h):
// selective recomputes the attention core, full each layer's forward.
enum class Recompute { none, selective, full };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct Config {
  int tp = 1, cp = 1, pp = 1, dp = 1, ep = 1, etp = 1, vpp = 1;
  bool sp = false;
  Recompute recompute = Recompute::none;
  bool distributed_optimizer = true;
  std::string to_string() const;
};

struct Estimate {
  Config config;
  int64_t microbatches = 0;
  // Memory per GPU on the most loaded pipeline stage, bytes.
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, memory = 0;
  bool fits = false;
  // Seconds per step (exposed, i.e. not hidden behind compute).
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

// Five well-known 6D configurations, each a model on a cluster with its
// parallel config, the MFU commonly quoted for such a run (LLaMA-3 405B: the
// Llama 3 paper, arXiv:2407.21783, reports 38-43%; the others are round
// figures from Megatron-style tuning guides) and the usual reason for the loss.
struct ReferenceRun {
  std::string label, model, device;
  int64_t gpus = 0, gpus_per_node = 8, global_batch = 0;
  Config config;
  double reported_mfu = 0;
  std::string reported_reason;
};
const std::vector<ReferenceRun>& reference_runs();

}  // namespace sextant::plan
