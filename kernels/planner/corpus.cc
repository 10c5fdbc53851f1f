#include "kernels/planner/corpus.h"

#include "harness/peaks.h"

namespace sextant::plan {

namespace {

// Megatron's GPT: GELU MLP of 4h, MHA, tied embeddings, learned positions.
ModelSpec gpt(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq) {
  ModelSpec m;
  m.name = name, m.layers = layers, m.hidden = hidden, m.heads = heads, m.ffn = 4 * hidden, m.vocab = vocab;
  m.seq = seq, m.tied_embeddings = true, m.learned_positions = true;
  return m;
}

// Llama-style: SwiGLU, grouped KV heads, untied embeddings, rotary positions.
ModelSpec llama(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t ffn,
                int64_t vocab, int64_t seq) {
  ModelSpec m;
  m.name = name, m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = kv_heads, m.ffn = ffn;
  m.vocab = vocab, m.seq = seq, m.swiglu = true;
  return m;
}

// Qwen3's MoE models: every layer MoE, no shared expert, head dim 128.
ModelSpec qwen3_moe(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t experts, int64_t moe_ffn) {
  ModelSpec m = llama(name, layers, hidden, heads, 4, moe_ffn, 151936, 4096);
  m.head_dim = 128, m.moe_layers = layers, m.experts = experts, m.topk = 8, m.moe_ffn = moe_ffn;
  return m;
}

struct Parallel {
  int tp = 1, cp = 1, pp = 1, dp = 1, ep = 1, vpp = 1;
};

// A row's step settings (its batch is the row's own) and the parts of its
// parallel config that are not the layout.
struct Settings {
  TrainSpec step;
  Recompute recompute = Recompute::none;
  bool distributed_optimizer = true;
  bool sequence_parallel = true;  // where tp > 1
};

PublishedRun row(const char* label, const ModelSpec& m, const char* device, int64_t gpus, int64_t global_batch,
                 int64_t micro_batch, Parallel p, const Settings& s, double mfu, const char* source) {
  PublishedRun r;
  r.label = label, r.model = m, r.device = device, r.gpus = gpus;
  r.train = s.step;
  r.train.global_batch = global_batch, r.train.micro_batch = micro_batch;
  r.config.tp = p.tp, r.config.cp = p.cp, r.config.pp = p.pp, r.config.dp = p.dp, r.config.ep = p.ep;
  r.config.vpp = p.vpp, r.config.sp = p.tp > 1 && s.sequence_parallel, r.config.recompute = s.recompute;
  r.config.distributed_optimizer = s.distributed_optimizer;
  r.reported_mfu = mfu;
  r.source = source;
  return r;
}

double peak(const char* device) { return gpu_peak_tflops(device) * 1e12; }

// MFU from tokens per second and GPU, counted with the planner's FLOPs.
double from_tokens(const ModelSpec& m, const char* device, double tokens_per_s) {
  return tokens_per_s * model_flops_per_step(m, 1) / m.seq / peak(device);
}

// Narayanan et al. 2021 count full recomputation and non-causal attention:
// 96 B s l h^2 (1 + s / 6h + V / 16 l h) per step.
double from_sc21(const ModelSpec& m, double hardware_tflops) {
  const double s = m.seq, l = m.layers, h = m.hidden, v = m.vocab;
  const double theirs = 96 * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  return hardware_tflops * 1e12 * model_flops_per_step(m, 1) / theirs / peak("A100");
}

// Megatron-LM's num_floating_point_operations before it halved causal
// attention (2024): the planner's FLOPs with the scores counted whole.
double from_megatron_2024(const ModelSpec& m, const char* device, double tflops) {
  ModelSpec full = m;
  full.causal = false;
  return tflops * 1e12 * model_flops_per_step(m, 1) / model_flops_per_step(full, 1) / peak(device);
}

constexpr const char* kSc21 =
    "Narayanan et al. 2021 (SC21) table 1 as in NVIDIA/Megatron-LM README.md@b83477a3 (images/cases_april2021.png; "
    "vocab 51200, seq 2048 in the text), configs from examples/sc21/run_table_1.sh@6985e589 (fp16, full recompute); "
    "hardware TFLOP/s converted to model FLOPs; DP reduces after the backward (Megatron's local DDP)";
constexpr const char* kMcore =
    "NVIDIA/Megatron-LM README.md@d98e8a64 (images/model_table.png; vocab 131072, seq 4096, --tp-comm-overlap "
    "--overlap-grad-reduce --overlap-param-gather in the text), TFLOP/s counted with whole attention; micro batch 1, "
    "GPT MLP, MHA and bf16 assumed (not published); gradients reduced in f32, Megatron-LM's default under bf16 "
    "(megatron/training/arguments.py), as the text names no --grad-reduce-in-bf16";
constexpr const char* kNemo2407 =
    "NVIDIA/NeMo docs/source/performance/performance_summary.md@8e3d65dc (24.07, FP8, DGX-H100), tokens/s/GPU; TP "
    "overlap on as NeMo's recipes set it";
constexpr const char* kBridge =
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md@4ab94dfa (DGX-H100), tokens/s/GPU";
constexpr const char* kLlama3 =
    "Llama Team 2024, The Llama 3 Herd of Models (arXiv:2407.21783) table 4, TFLOP/s per GPU over 989; interleaved "
    "schedule with 4 chunks per rank assumed (the count is not published)";
constexpr const char* kSeeds =
    "the 6D parallelism tutorial's table of typical runs (round MFU figures, configs as the tutorial gives them)";

std::vector<PublishedRun> build() {
  // 2021: attention unfused (FlashAttention came in 2022; Megatron fused
  // only scale, mask and softmax); fp16 gradients all-reduced in fp16; no
  // pipeline send/recv overlap (Megatron-LM added it in May 2023, commit
  // f9283c5a, and made it the interleaved schedule's default in October).
  const Settings sc21{.step = {.overlap = {.tp = 0, .dp = 0, .pp = 0},
                               .attention = AttentionKernel::unfused,
                               .cross_entropy = CrossEntropy::unfused,
                               .grad_reduce = GradReduce::bf16},
                      .recompute = Recompute::full,
                      .distributed_optimizer = false,
                      .sequence_parallel = false};
  // Megatron-LM's defaults where a run's source names no other: the
  // cross-entropy unfused (--cross-entropy-loss-fusion off) and the main
  // gradients reduced in f32 under bf16.
  const Settings mcore{.step = {.overlap = {.tp = 1}, .cross_entropy = CrossEntropy::unfused}};
  const Settings nemo_fp8{
      .step = {.precision = Precision::fp8, .overlap = {.tp = 1}, .cross_entropy = CrossEntropy::unfused}};
  // Megatron-Bridge's performance recipes set cross_entropy_loss_fusion
  // with Transformer Engine's kernel, and grad_reduce_in_fp32 off
  // (scripts/performance/configs/{llama3,llama31,deepseek,qwen3}/*_llm_pretrain.py@v0.2.0).
  const Settings bridge_fp8{.step = {.precision = Precision::fp8,
                                     .overlap = {.tp = 1},
                                     .cross_entropy = CrossEntropy::fused,
                                     .grad_reduce = GradReduce::bf16}};
  // Not Megatron: Meta's and DeepSeek's own stacks, whose loss kernels are
  // not published; costed fused.
  const Settings llama3{.step = {.cross_entropy = CrossEntropy::fused}};
  const Settings seeds{.step = {.cross_entropy = CrossEntropy::unfused}, .recompute = Recompute::full};
  std::vector<PublishedRun> t;
  auto sc21_row = [&](const char* label, int64_t layers, int64_t hidden, int64_t heads, int64_t gpus, int64_t batch,
                      int64_t micro, Parallel p, double tflops) {
    const ModelSpec m = gpt(label, layers, hidden, heads, 51200, 2048);
    t.push_back(row(label, m, "A100", gpus, batch, micro, p, sc21, from_sc21(m, tflops), kSc21));
  };
  sc21_row("SC21 GPT 1.7B", 24, 2304, 24, 32, 512, 16, {.dp = 32}, 137);
  sc21_row("SC21 GPT 3.6B", 30, 3072, 32, 64, 512, 16, {.tp = 2, .dp = 32}, 138);
  sc21_row("SC21 GPT 7.5B", 36, 4096, 32, 128, 512, 16, {.tp = 4, .dp = 32}, 142);
  sc21_row("SC21 GPT 18B", 40, 6144, 48, 256, 1024, 8, {.tp = 8, .dp = 32}, 135);
  sc21_row("SC21 GPT 39B", 48, 8192, 64, 512, 1536, 4, {.tp = 8, .pp = 2, .dp = 32}, 138);
  sc21_row("SC21 GPT 76B", 60, 10240, 80, 1024, 1792, 2, {.tp = 8, .pp = 4, .dp = 32, .vpp = 3}, 140);
  sc21_row("SC21 GPT 145B", 80, 12288, 96, 1536, 2304, 2, {.tp = 8, .pp = 8, .dp = 24, .vpp = 2}, 148);
  sc21_row("SC21 GPT 310B", 96, 16384, 128, 1920, 2160, 1, {.tp = 8, .pp = 16, .dp = 15, .vpp = 2}, 155);
  sc21_row("SC21 GPT 530B", 105, 20480, 128, 2520, 2520, 1, {.tp = 8, .pp = 35, .dp = 9, .vpp = 3}, 163);
  sc21_row("SC21 GPT 1T", 128, 25600, 160, 3072, 3072, 1, {.tp = 8, .pp = 64, .dp = 6}, 163);

  auto mcore_row = [&](const char* label, int64_t layers, int64_t hidden, int64_t heads, int tp, double tflops) {
    const ModelSpec m = gpt(label, layers, hidden, heads, 131072, 4096);
    t.push_back(row(label, m, "H100", 48 * tp, 192, 1, {.tp = tp, .dp = 48}, mcore,
                    from_megatron_2024(m, "H100", tflops), kMcore));
  };
  mcore_row("MCore GPT 1.7B", 24, 2048, 16, 1, 408.8);
  mcore_row("MCore GPT 7.1B", 30, 4096, 32, 2, 465.9);
  mcore_row("MCore GPT 16B", 32, 6144, 48, 4, 489.1);
  mcore_row("MCore GPT 32B", 48, 7168, 56, 8, 459.6);

  auto nemo_row = [&](const char* label, const ModelSpec& m, int64_t gpus, int64_t batch, int64_t micro, Parallel p,
                      double tokens_per_s) {
    t.push_back(
        row(label, m, "H100", gpus, batch, micro, p, nemo_fp8, from_tokens(m, "H100", tokens_per_s), kNemo2407));
  };
  const ModelSpec gpt3_175b = gpt("gpt3-175b", 96, 12288, 96, 50257, 2048);
  const ModelSpec llama2_7b = llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096);
  const ModelSpec llama2_70b = llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096);
  // Nemotron: a squared-ReLU MLP of two matrices, rotary positions, untied
  // embeddings (NVIDIA/NeMo-Framework-Launcher
  // launcher_scripts/conf/training/nemotron/nemotron_8b.yaml@089b90e6).
  ModelSpec nemotron_340b = gpt("nemotron-340b", 96, 18432, 96, 256000, 4096);
  nemotron_340b.kv_heads = 8;
  const ModelSpec llama3_8b = llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192);
  const ModelSpec llama3_70b = llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192);
  nemo_row("NeMo GPT3 5B", gpt("gpt3-5b", 24, 4096, 32, 50257, 2048), 64, 2048, 4, {.dp = 64}, 23406);
  nemo_row("NeMo GPT3 20B", gpt("gpt3-20b", 44, 6144, 48, 50257, 2048), 64, 256, 2, {.tp = 2, .dp = 32}, 5851);
  nemo_row("NeMo GPT3 175B 128", gpt3_175b, 128, 256, 1, {.tp = 4, .pp = 8, .dp = 4, .vpp = 6}, 716);
  nemo_row("NeMo GPT3 175B 512", gpt3_175b, 512, 2048, 2, {.tp = 4, .pp = 8, .dp = 16, .vpp = 6}, 825);
  nemo_row("NeMo Llama2 7B", llama2_7b, 8, 128, 1, {.dp = 8}, 16934);
  nemo_row("NeMo Llama2 13B", llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096), 16, 128, 1,
           {.pp = 4, .dp = 4, .vpp = 10}, 8715);
  nemo_row("NeMo Llama2 70B", llama2_70b, 64, 128, 1, {.tp = 4, .pp = 4, .dp = 4, .vpp = 20}, 1728);
  ModelSpec nemotron_8b = gpt("nemotron-8b", 32, 4096, 32, 256000, 4096);
  ModelSpec nemotron_22b = gpt("nemotron-22b", 40, 6144, 48, 256000, 4096);
  for (ModelSpec* m : {&nemotron_8b, &nemotron_22b, &nemotron_340b})
    m->tied_embeddings = m->learned_positions = false, m->squared_relu = true;
  nemo_row("NeMo Nemotron 8B", nemotron_8b, 64, 256, 4, {.tp = 2, .dp = 32}, 12507);
  nemo_row("NeMo Nemotron 22B", nemotron_22b, 64, 256, 2, {.tp = 2, .pp = 4, .dp = 8, .vpp = 10}, 4312);
  nemo_row("NeMo Nemotron 340B", nemotron_340b, 128, 32, 1, {.tp = 8, .pp = 8, .dp = 2, .vpp = 12}, 326);
  nemo_row("NeMo Llama3 8B", llama3_8b, 8, 128, 1, {.cp = 2, .dp = 4}, 12273);
  nemo_row("NeMo Llama3 70B", llama3_70b, 64, 128, 1, {.tp = 4, .cp = 2, .pp = 4, .dp = 2, .vpp = 5}, 1524);

  const ModelSpec llama31_405b = llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192);
  auto bridge_row = [&](const char* label, const ModelSpec& m, int64_t gpus, int64_t batch, Parallel p, Overlap overlap,
                        double tokens_per_s, const char* release) {
    Settings s = bridge_fp8;
    s.step.overlap = overlap;
    t.push_back(row(label, m, "H100", gpus, batch, 1, p, s, from_tokens(m, "H100", tokens_per_s),
                    (std::string(kBridge) + ", " + release).c_str()));
  };
  bridge_row("Bridge Llama3 8B", llama3_8b, 8, 128, {.dp = 8}, {.tp = 1}, 14451, "25.11 FP8 current scaling, FSDP");
  bridge_row("Bridge Llama3 70B", llama3_70b, 64, 128, {.tp = 4, .pp = 8, .dp = 2, .vpp = 5}, {.tp = 1}, 1602,
             "25.11 FP8 current scaling");
  bridge_row("Bridge Llama3.1 405B", llama31_405b, 1024, 512, {.tp = 8, .cp = 2, .pp = 8, .dp = 8, .vpp = 8}, {.tp = 1},
             292, "25.11 FP8 current scaling");
  ModelSpec dsv3 = model_preset("deepseek-v3");
  // The MoE rows' overlap as their configs set it. DeepSeek-V3 (25.09):
  // DeepEP with the A2A overlapped across microbatches, gradient reduce not
  // overlapped, no TP overlap (scripts/performance/run_script.py and
  // src/megatron/bridge/recipes/deepseek/deepseek_v3.py@v0.1.0rc4). Its
  // config also recomputes mla_up_proj and mlp, which the planner does not
  // cost, and trains one MTP layer (the preset's). Qwen3 235B (25.11): A2A overlap on, TP
  // overlap off (scripts/performance/configs/qwen3/*.py@v0.2.0). Qwen3 30B
  // (26.06): HybridEP, A2A overlap off (scripts/performance/configs/qwen/*.py@v0.5.1).
  bridge_row("Bridge DeepSeek-V3", dsv3, 1024, 8192, {.tp = 2, .pp = 8, .dp = 64, .ep = 64, .vpp = 4},
             {.dp = 0, .ep = 1}, 1297,
             "25.09 FP8 (blockwise 1297 vs per-tensor), token-dropless with forced balance; DeepEP, A2A overlap");
  bridge_row("Bridge Qwen3 235B-A22B", qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 128, 1536), 256, 2048,
             {.tp = 2, .pp = 8, .dp = 16, .ep = 32, .vpp = 4}, {.ep = 1}, 1575,
             "25.11 FP8 current scaling, A2A overlap");
  bridge_row("Bridge Qwen3 30B-A3B", qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 128, 768), 16, 1024, {.dp = 16, .ep = 16},
             {.tp = 1}, 8826, "26.06 FP8, HybridEP");

  t.push_back(row("Llama3 405B 8K 8192", llama31_405b, "H100", 8192, 2048, 1, {.tp = 8, .pp = 16, .dp = 64, .vpp = 4},
                  llama3, 430.0e12 / peak("H100"), kLlama3));
  t.push_back(row("Llama3 405B 8K 16384", llama31_405b, "H100", 16384, 2048, 1,
                  {.tp = 8, .pp = 16, .dp = 128, .vpp = 4}, llama3, 400.0e12 / peak("H100"), kLlama3));
  ModelSpec llama31_128k = llama31_405b;
  llama31_128k.seq = 131072;
  t.push_back(row("Llama3 405B 128K", llama31_128k, "H100", 16384, 128, 1,
                  {.tp = 8, .cp = 16, .pp = 16, .dp = 8, .vpp = 4}, llama3, 380.0e12 / peak("H100"), kLlama3));

  // DeepSeek publishes GPU hours, not MFU: 180K H800 hours per trillion
  // tokens is 1543 tokens/s per GPU, wall clock with every stall.
  const Settings dualpipe{
      .step = {.precision = Precision::fp8, .overlap = {.ep = 1}, .cross_entropy = CrossEntropy::fused}};
  t.push_back(row("DeepSeek-V3 2048 H800", dsv3, "H800", 2048, 15360, 1, {.pp = 16, .dp = 128, .ep = 64}, dualpipe,
                  from_tokens(dsv3, "H800", 1e12 / (180e3 * 3600)),
                  "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv:2412.19437): 180K H800 GPU hours per "
                  "trillion tokens (2.664M for 14.8T in deepseek-ai/DeepSeek-V3 README.md@9b4e9788), EP64 TP1 "
                  "(deepseek-ai/profile-data README.md@44960242), PP16 with DualPipe's overlap; MFU derived"));

  // The tutorial's round figures, each with the settings of the run it
  // names where one was published (Llama 3, DeepSeek-V3), else full
  // recomputation and Megatron's default overlap.
  const size_t first_tutorial_row = t.size();
  t.push_back(row("Tutorial LLaMA-2 70B", model_preset("llama2-70b"), "A100", 64, 1024, 1, {.tp = 8, .dp = 8}, seeds,
                  0.48, kSeeds));
  t.push_back(row("Tutorial LLaMA-3 405B", model_preset("llama3-405b"), "H100", 16384, 2048, 1,
                  {.tp = 8, .pp = 16, .dp = 128, .vpp = 4}, llama3, 0.43, kSeeds));
  t.push_back(row("Tutorial DeepSeek-V3", dsv3, "H800", 2048, 15360, 1, {.pp = 16, .dp = 128, .ep = 64}, dualpipe, 0.40,
                  kSeeds));
  t.push_back(row("Tutorial 128K context", model_preset("llama2-70b-128k"), "H100", 256, 64, 1,
                  {.tp = 8, .cp = 4, .pp = 4, .dp = 2}, seeds, 0.35, kSeeds));
  t.push_back(row("Tutorial video DiT", model_preset("video-dit"), "H100", 512, 256, 1,
                  {.tp = 4, .cp = 4, .pp = 4, .dp = 8}, seeds, 0.32, kSeeds));
  for (size_t i = first_tutorial_row; i < t.size(); ++i) t[i].illustrative = true;
  return t;
}

}  // namespace

const std::vector<PublishedRun>& published_runs() {
  static const std::vector<PublishedRun> runs = build();
  return runs;
}

ClusterSpec run_cluster(const PublishedRun& r) {
  ClusterSpec c = cluster_preset(r.device, r.gpus);
  c.gpus_per_node = r.gpus_per_node;
  return c;
}

}  // namespace sextant::plan
