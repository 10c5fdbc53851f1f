// Model and cluster presets for `sextant plan`: models with published 6D
// training configurations, from their papers and public model cards.
#include <map>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "kernels/planner/planner.h"

namespace sextant::plan {

namespace {
// name -> model; global batch is set by the caller (see plan_command).
const std::map<std::string, ModelSpec>& models() {
  static const std::map<std::string, ModelSpec> table = [] {
    std::map<std::string, ModelSpec> t;
    ModelSpec m;
    // Llama 2 70B (Touvron et al. 2023): GQA 8 KV heads, SwiGLU, 4K context.
    m = {};
    m.name = "llama2-70b", m.layers = 80, m.hidden = 8192, m.heads = 64, m.kv_heads = 8, m.ffn = 28672;
    m.vocab = 32000, m.seq = 4096, m.swiglu = true;
    t[m.name] = m;
    // A 128K context on a 70B dense model: long enough to need CP.
    m.name = "llama2-70b-128k", m.seq = 131072;
    t[m.name] = m;
    // Llama 3 405B (Dubey et al. 2024): 126 layers, 8K context.
    m = {};
    m.name = "llama3-405b", m.layers = 126, m.hidden = 16384, m.heads = 128, m.kv_heads = 8, m.ffn = 53248;
    m.vocab = 128256, m.seq = 8192, m.swiglu = true;
    t[m.name] = m;
    // DeepSeek-V3 (DeepSeek-AI 2024): 61 layers, the first 3 dense; 256 routed
    // experts (top-8) + 1 shared of width 2048. MLA attention: its parameter
    // count per layer (q_lora 1536, kv_lora 512, 128 heads of 128 + 64 rope
    // dims: 7168*1536 + 1536*128*192 + 7168*576 + 512*128*256 + 128*128*7168
    // = 187M); its FLOPs and activations are modelled as MHA with head_dim 128.
    m = {};
    m.name = "deepseek-v3", m.layers = 61, m.hidden = 7168, m.heads = 128, m.head_dim = 128, m.ffn = 18432;
    m.vocab = 129280, m.seq = 4096, m.swiglu = true;
    m.moe_layers = 58, m.experts = 256, m.topk = 8, m.moe_ffn = 2048, m.shared_experts = 1;
    m.attention_params_override =
        7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 7168;
    t[m.name] = m;
    // A video diffusion transformer of the usual 6D tutorial size: hidden
    // 3072, 48 layers, 16 frames of 256 patches (4096 tokens) per clip,
    // bidirectional attention; the patch embedding and output projection
    // (16 latent channels x 2 x 2 patches = 64) stand in for the vocabulary.
    m = {};
    m.name = "video-dit", m.layers = 48, m.hidden = 3072, m.heads = 24, m.ffn = 12288, m.vocab = 64;
    m.seq = 4096, m.causal = false;
    t[m.name] = m;
    // GPT-3 175B (Brown et al. 2020), GELU MLP.
    m = {};
    m.name = "gpt3-175b", m.layers = 96, m.hidden = 12288, m.heads = 96, m.ffn = 49152, m.vocab = 50257;
    m.seq = 2048;
    t[m.name] = m;
    return t;
  }();
  return table;
}
}  // namespace

std::vector<std::string> model_presets() {
  std::vector<std::string> names;
  for (const auto& [name, m] : models()) names.push_back(name);
  return names;
}

ModelSpec gpt_base() {
  ModelSpec m;
  m.name = "gpt", m.vocab = 50257, m.seq = 1024, m.tied_embeddings = true, m.learned_positions = true;
  return m;
}

ModelSpec model_preset(const std::string& name) {
  auto it = models().find(name);
  if (it == models().end())
    throw UsageError(cat("--model '", name, "' is not a preset (", join(model_presets(), ", "),
                         "); or leave --model out for a GPT of --layers --hidden --heads"));
  return it->second;
}

namespace {
Config reference_config(int tp, int cp, int pp, int dp, int ep = 1, int vpp = 1) {
  Config c;
  c.tp = tp, c.cp = cp, c.pp = pp, c.dp = dp, c.ep = ep, c.etp = 1, c.vpp = vpp, c.sp = tp > 1;
  c.recompute = Recompute::full;  // the table's runs fit only with activation recomputation
  return c;
}
}  // namespace

// Global batches: Llama 2's 4M tokens, Llama 3's 16M at 8K, DeepSeek-V3's
// 15360 sequences; 64 sequences of 128K (8M tokens) and 256 clips for the
// others. Llama 3 405B runs the interleaved schedule (Dubey et al. 2024),
// 4 chunks per rank here (126 layers over 16 stages).
const std::vector<ReferenceRun>& reference_runs() {
  static const std::vector<ReferenceRun> runs = {
      {"LLaMA-2 70B", "llama2-70b", "A100", 64, 8, 1024, reference_config(8, 1, 1, 8), 0.48,
       "dense model, TP on NVLink inside the node, DP all-reduce overlapped with compute"},
      {"LLaMA-3 405B", "llama3-405b", "H100", 16384, 8, 2048, reference_config(8, 1, 16, 128, 1, 4), 0.43,
       "PP=16 bubble (~6%) and cross-node pipeline latency"},
      {"DeepSeek-V3", "deepseek-v3", "H800", 2048, 8, 15360, reference_config(1, 1, 16, 128, 64), 0.40,
       "MoE all-to-all dispatch and expert load imbalance"},
      {"128K context", "llama2-70b-128k", "H100", 256, 8, 64, reference_config(8, 4, 4, 2), 0.35,
       "CP ring communication; the compute / communication ratio falls with long sequences"},
      {"video DiT", "video-dit", "H100", 512, 8, 256, reference_config(4, 4, 4, 8), 0.32,
       "video data loading and the DiT's communication-heavy attention"},
  };
  return runs;
}

ClusterSpec cluster_preset(const std::string& device, int64_t gpus) {
  ClusterSpec c;
  c.device = device;
  c.gpus = gpus;
  // Memory (GiB), NVLink and network bandwidth per GPU (GB/s, one direction).
  struct Links {
    double memory_gb, nvlink_GBps, network_GBps;
  };
  const std::optional<Links> links = find_named<Links>({{"H100", {80, 450, 50}},
                                                        {"H800", {80, 200, 50}},
                                                        {"H200", {141, 450, 50}},
                                                        {"A100", {80, 300, 25}},
                                                        {"B200", {180, 900, 50}}},
                                                       device);
  if (!links)
    throw UsageError(cat("--device '", device,
                         "' must be one of H100, H800, H200, A100, B200 (or give --memory-gb and --peak-tflops)"));
  c.memory_gb = links->memory_gb, c.nvlink_GBps = links->nvlink_GBps, c.network_GBps = links->network_GBps;
  c.peak_tflops = gpu_peak_tflops(device);
  return c;
}

}  // namespace sextant::plan
