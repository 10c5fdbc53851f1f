// What the planner plans for: the model, the cluster, the batch and one
// parallel config (planner.h searches them, memory.h sizes them).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/model/recompute.h"

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

// Activation recomputation, as the step runs it.
using model::Recompute;
using model::recompute_name;

struct Config {
  int tp = 1, cp = 1, pp = 1, dp = 1, ep = 1, etp = 1, vpp = 1;
  bool sp = false;
  Recompute recompute = Recompute::none;
  bool distributed_optimizer = true;
  std::string to_string() const;
};

}  // namespace sextant::plan
