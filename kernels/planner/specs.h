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
  bool swiglu = false;  // 3 matrices per MLP instead of 2
  // Squared ReLU (Nemotron-4): GELU's two matrices, but Megatron fuses no
  // kernel for it, so relu and the square run as two elementwise passes.
  bool squared_relu = false;
  bool tied_embeddings = false;    // the LM head reuses the input embedding (one vocab x h matrix, not two)
  bool learned_positions = false;  // a seq x h table of position embeddings (GPT-2), not rotary
  // Attention parameters per layer when not (H + K) d + K dv columns of QKV
  // and H dv rows of the output (MLA's low-rank projections); 0: those.
  double attention_params_override = 0;
  bool causal = true;
  // Multi-token prediction (DeepSeek-V3; Megatron's --mtp-num-layers): each
  // depth trains one more layer of the last layer's kind (MoE where the
  // model has MoE layers), a [2h -> h] projection and the shared LM head's
  // logits again, all on the last pipeline stage.
  int64_t mtp_layers = 0;

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t dhead() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t dv() const { return v_head_dim > 0 ? v_head_dim : dhead(); }
  int64_t dense_layers() const { return layers - moe_layers; }
  // The layers a step trains: the model's and the MTP depths'.
  int64_t trained_moe_layers() const { return moe_layers + (moe_layers > 0 ? mtp_layers : 0); }
  int64_t trained_dense_layers() const { return layers + mtp_layers - trained_moe_layers(); }
  double attention_params() const;         // per layer: h((H + K) d + K dv) + H dv h
  double mlp_params(int64_t width) const;  // (2 or 3) h width
  double moe_mlp_params() const;           // an MoE layer's routed and shared experts and its router
  double embedding_params() const;         // input embedding + LM head (one matrix when tied) + positions
  double total_params() const;             // the model's, without MTP
  double active_params() const;            // per token, without MTP
  double mtp_params() const;               // the MTP depths' layers and projections (the embedding and head are shared)
};

struct ClusterSpec {
  std::string device = "H100";
  int64_t gpus = 8, gpus_per_node = 8;
  double memory_gb = 80, peak_tflops = 989;  // dense bf16
  double fp8_peak_tflops = 1979;             // dense FP8 (0: none)
  double hbm_GBps = 3350;                    // device memory bandwidth (H100 SXM data sheet)
  int sms = 132;             // streaming multiprocessors: a gemm's tiles run in waves of this many (0: no waves)
  double nvlink_GBps = 450;  // per GPU, one direction (H100 NVLink 4: 900 GB/s bidirectional)
  double network_GBps = 50;  // per GPU (400 Gb/s InfiniBand NDR)
  double latency_us = 10;    // alpha of every collective step
  // The two free parameters of the time model (time_model.h), fitted on the
  // published runs of corpus.h; `plan --reference` refits them and shows
  // that the fit gives these.
  double gemm_efficiency = 0.635;  // fraction of peak a large, full-wave gemm reaches
  double layer_overhead_us =
      1250;  // per layer and microbatch, forward and backward: launches, small kernels, waits not costed
  double gemm_latency_us = 4;  // per gemm call: launch and pipeline fill (cuBLAS on a GPU)
  double usable_memory = 0.9;  // leave room for the CUDA context and fragmentation
};

// Which mechanisms hide communication behind compute, each the fraction of
// that communication the run overlaps with the compute that can cover it
// (time_model.h). Defaults: Megatron-LM's usual flags.
struct Overlap {
  double tp = 0;  // TP collectives behind the layer's gemms (--tp-comm-overlap, userbuffers): off by default
  double dp = 1;  // gradient reduce-scatter and parameter all-gather behind the backward and forward
                  // (--overlap-grad-reduce, --overlap-param-gather)
  double ep = 0;  // MoE all-to-all behind another microbatch's compute (DualPipe; --overlap-moe-expert-parallel-comm)
  double cp = 1;  // the CP ring's send/recv behind each block's attention (always on in Megatron's ring)
  double pp = 1;  // the pipeline's send/recv behind the next model chunk's compute: only under the interleaved
                  // schedule, where Megatron overlaps it by default (--no-overlap-p2p-communication turns it off)
};

// The precision of the linears: bf16, or FP8 with its casts (Transformer Engine).
enum class Precision { bf16, fp8 };

// The attention core's kernel: fused (FlashAttention, cuDNN: the scores stay
// on chip), or unfused (Megatron before FlashAttention: batched gemms around
// a fused scale-mask-softmax, the [s, s] scores through device memory).
enum class AttentionKernel { fused, unfused };

// The LM head's cross-entropy: fused (one kernel reads the logits forward
// and writes their gradient backward: Transformer Engine's or Megatron's
// --cross-entropy-loss-fusion), or unfused (Megatron's default: the f32
// upcast, max, subtract, exp, sum and normalise passes, the gradient's
// scale and downcast; time_model.cc counts their bytes).
enum class CrossEntropy { fused, unfused };

// The data-parallel gradients' type on the wire: f32 (Megatron-LM's default
// under bf16, which accumulates and reduces the main gradients in f32
// unless --grad-reduce-in-bf16), or the 16-bit type of the parameters
// (bf16; Megatron-Bridge's performance recipes set
// grad_reduce_in_fp32 off; fp16 in 2021's Megatron).
enum class GradReduce { f32, bf16 };

// An aggregate, so that a run names only what differs from the defaults:
// TrainSpec{1024, 1} or {.precision = Precision::fp8, .overlap = {.tp = 1}}.
struct TrainSpec {
  int64_t global_batch = 0;  // sequences per step
  int64_t micro_batch = 1;   // sequences per microbatch
  Precision precision = Precision::bf16;
  Overlap overlap = {};
  AttentionKernel attention = AttentionKernel::fused;
  CrossEntropy cross_entropy = CrossEntropy::fused;
  GradReduce grad_reduce = GradReduce::f32;

  // What the step time assumes beyond the batch: "linears fp8, attention
  // fused, cross-entropy unfused, gradients reduced in f32, overlap tp 1 dp
  // 1 ep 0 cp 1 pp 1".
  std::string settings() const;
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
