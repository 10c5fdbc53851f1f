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
    // = 187M); its core as the up-projected heads Megatron's FLOP count uses
    // (training.py, multi_latent_attention): queries and keys of 128 + 64
    // dims, values of 128; its activations as MHA of those heads.
    m = {};
    m.name = "deepseek-v3", m.layers = 61, m.hidden = 7168, m.heads = 128, m.head_dim = 192, m.v_head_dim = 128;
    m.ffn = 18432;
    m.vocab = 129280, m.seq = 4096, m.swiglu = true;
    m.moe_layers = 58, m.experts = 256, m.topk = 8, m.moe_ffn = 2048, m.shared_experts = 1;
    m.mtp_layers = 1;  // trained with one MTP depth (DeepSeek-V3 report, section 2.2)
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

ClusterSpec cluster_preset(const std::string& device, int64_t gpus) {
  ClusterSpec c;
  c.device = device;
  c.gpus = gpus;
  // Memory (GiB), its bandwidth (GB/s), SMs, NVLink and network bandwidth
  // per GPU (GB/s, one direction): the vendors' data sheets (SXM parts);
  // H800 is H100 with NVLink cut to 400 GB/s both ways; the network is one
  // 400 Gb/s NIC per GPU (200 Gb/s HDR on A100 clusters such as Selene).
  struct Links {
    double memory_gb, hbm_GBps;
    int sms;
    double nvlink_GBps, network_GBps;
  };
  const std::optional<Links> links = find_named<Links>({{"H100", {80, 3350, 132, 450, 50}},
                                                        {"H800", {80, 3350, 132, 200, 50}},
                                                        {"H200", {141, 4800, 132, 450, 50}},
                                                        {"A100", {80, 2039, 108, 300, 25}},
                                                        {"B200", {180, 8000, 148, 900, 50}}},
                                                       device);
  if (!links)
    throw UsageError(cat("--device '", device,
                         "' must be one of H100, H800, H200, A100, B200 (or give --memory-gb and --peak-tflops)"));
  c.memory_gb = links->memory_gb, c.hbm_GBps = links->hbm_GBps, c.sms = links->sms;
  c.nvlink_GBps = links->nvlink_GBps, c.network_GBps = links->network_GBps;
  c.fp8_peak_tflops = gpu_fp8_peak_tflops(device);
  c.peak_tflops = gpu_peak_tflops(device);
  return c;
}

}  // namespace sextant::plan
