// Model and cluster presets for `sextant plan`: models with published 6D
// training configurations, from their papers and public model cards.
#include <map>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "kernels/model/planner.h"

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
    m.attention_params_override = 7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 +
                                  128.0 * 128 * 7168;
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

ModelSpec model_preset(const std::string& name) {
  auto it = models().find(name);
  if (it == models().end())
    throw UsageError(cat("--model '", name, "' is not a preset (", join(model_presets(), ", "),
                         "); or give --layers --hidden --heads --ffn --vocab --seq"));
  return it->second;
}

ClusterSpec cluster_preset(const std::string& device, int64_t gpus) {
  ClusterSpec c;
  c.device = device;
  c.gpus = gpus;
  // Memory (GiB), NVLink and network bandwidth per GPU (GB/s, one direction).
  if (device == "H100") c.memory_gb = 80, c.nvlink_GBps = 450, c.network_GBps = 50;
  else if (device == "H800") c.memory_gb = 80, c.nvlink_GBps = 200, c.network_GBps = 50;
  else if (device == "H200") c.memory_gb = 141, c.nvlink_GBps = 450, c.network_GBps = 50;
  else if (device == "A100") c.memory_gb = 80, c.nvlink_GBps = 300, c.network_GBps = 25;
  else if (device == "B200") c.memory_gb = 180, c.nvlink_GBps = 900, c.network_GBps = 50;
  else throw UsageError(cat("--device '", device, "' must be one of H100, H800, H200, A100, B200 (or give --memory-gb and --peak-tflops)"));
  c.peak_tflops = gpu_peak_tflops(device);
  return c;
}

}  // namespace sextant::plan
