#include "app/plan_command.h"

#include <mpi.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/plan_reference.h"
#include "app/plan_replay.h"
#include "harness/error.h"
#include "harness/results.h"
#include "harness/strings.h"
#include "kernels/planner/calibration.h"
#include "kernels/planner/planner.h"
#include "kernels/planner/step_cost.h"

namespace sextant {

namespace {

// Overrides are optional: a given value replaces the preset's, after its rule.
struct PlanFlags {
  std::string model, device = "H100", check, json, calibrate, calibrate_dtype, overlap,
                     replay;  // model "": the GPT base
  plan::TrainSpec train;      // the step settings; the batch is checked before it is set
  std::optional<std::string> mlp;
  std::optional<bool> tied_embeddings;
  bool reference = false;
  int64_t gpus = 0, gpus_per_node = 8, global_batch = 0, micro_batch = 1;
  std::optional<int64_t> layers, hidden, heads, kv_heads, ffn, vocab, seq, experts, topk, moe_ffn, moe_layers,
      mtp_layers;
  std::optional<double> memory_gb, peak_tflops, nvlink, network, efficiency, layer_overhead, hbm;
  int64_t top = 10;
};
PlanFlags flags;

// The search enumerates every factorisation of the GPU count and every
// microbatch count: bounded so that a typing slip cannot run for hours.
constexpr int64_t kMaxGpus = int64_t{1} << 20, kMaxGlobalBatch = int64_t{1} << 24;

// A flag naming one of an enum's values, listed default first: refused by
// IsMember with the names, so a slip reads as one line naming the flag and
// its choices.
template <class Enum>
CLI::Option* add_choice(CLI::App* app, const char* name, Enum& field,
                        const std::vector<std::pair<std::string, Enum>>& names, const char* help) {
  std::vector<std::string> keys;
  for (const auto& entry : names) keys.push_back(entry.first);
  const auto set = [&field, names](const std::string& value) {
    for (const auto& [key, kind] : names)
      if (key == value) field = kind;
  };
  return app->add_option_function<std::string>(name, set, help)->check(CLI::IsMember(keys));
}

void require_in(const char* name, int64_t value, int64_t least, int64_t most) {
  require(value >= least, cat(name, " ", value, " must be at least ", least));
  require(value <= most, cat(name, " ", value, " must be at most ", most));
}

void set_if(int64_t& field, const std::optional<int64_t>& value, const char* name, int64_t least = 1) {
  if (!value) return;
  require_in(name, *value, least, int64_t{1} << 40);
  field = *value;
}

void set_if(double& field, const std::optional<double>& value, const char* name, double most = INFINITY) {
  if (!value) return;
  require(
      std::isfinite(*value) && *value > 0 && *value <= most,
      cat(name, " ", *value, " must be a finite number above 0", std::isinf(most) ? "" : cat(" and at most ", most)));
  field = *value;
}

constexpr std::string_view kRecompute = "recompute";

plan::Config parse_config(const std::string& text) {
  plan::Config c;
  for (const std::string& item : split(text, ',')) {
    size_t eq = item.find('=');
    require(eq != std::string::npos, cat("--check '", text, "' must look like tp=8,pp=16,dp=128"));
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == kRecompute) {
      std::optional<plan::Recompute> r;
      for (plan::Recompute kind : {plan::Recompute::none, plan::Recompute::selective, plan::Recompute::full})
        if (value == plan::recompute_name(kind)) r = kind;
      require(r.has_value(), cat("--check recompute=", value, " must be none, selective or full"));
      c.recompute = *r;
      continue;
    }
    int v = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), v);
    require(error == std::errc() && end == value.data() + value.size() && v >= 1 && v <= kMaxGpus,
            cat("--check ", key, "=", value, " must be a whole number from 1 to ", kMaxGpus));
    const std::optional<int plan::Config::*> size = find_named<int plan::Config::*>({{"tp", &plan::Config::tp},
                                                                                     {"cp", &plan::Config::cp},
                                                                                     {"pp", &plan::Config::pp},
                                                                                     {"dp", &plan::Config::dp},
                                                                                     {"ep", &plan::Config::ep},
                                                                                     {"etp", &plan::Config::etp},
                                                                                     {"vpp", &plan::Config::vpp}},
                                                                                    key);
    if (!size) throw UsageError(cat("--check key '", key, "' must be one of tp, cp, pp, dp, ep, etp, vpp, recompute"));
    c.*(*size) = v;
  }
  require(c.vpp == 1 || c.pp > 1,
          cat("--check vpp ", c.vpp, " needs pp > 1 (the interleaved schedule splits a pipeline)"));
  c.sp = c.tp > 1;
  return c;
}

// "tp=0.5,ep=1": the fractions of each mechanism's communication hidden.
plan::Overlap parse_overlap(const std::string& text) {
  plan::Overlap o;
  if (text.empty()) return o;
  for (const std::string& item : split(text, ',')) {
    const size_t eq = item.find('=');
    require(eq != std::string::npos, cat("--overlap '", text, "' must look like tp=1,dp=1,ep=0,cp=1,pp=1"));
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const std::optional<double plan::Overlap::*> field =
        find_named<double plan::Overlap::*>({{"tp", &plan::Overlap::tp},
                                             {"dp", &plan::Overlap::dp},
                                             {"ep", &plan::Overlap::ep},
                                             {"cp", &plan::Overlap::cp},
                                             {"pp", &plan::Overlap::pp}},
                                            key);
    if (!field) throw UsageError(cat("--overlap key '", key, "' must be one of tp, dp, ep, cp, pp"));
    double v = -1;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), v);
    require(error == std::errc() && end == value.data() + value.size() && v >= 0 && v <= 1,
            cat("--overlap ", key, "=", value, " must be a fraction from 0 to 1"));
    o.*(*field) = v;
  }
  return o;
}

std::string row(int index, const plan::Estimate& e) {
  const double gib = 1024.0 * 1024 * 1024;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%4d  %-34s %6.1f %6.1f %6.1f %6.1f %7.1f %4s %8.3f %6.1f%%  %7.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f",
                index, e.config.to_string().c_str(), e.weights / gib, e.gradients / gib, e.optimizer / gib,
                e.activations / gib, e.memory / gib, e.fits ? "yes" : "no", e.step, 100 * e.mfu, e.compute, e.bubble,
                e.tp_comm, e.cp_comm, e.ep_comm, e.dp_comm, e.pp_comm);
  return buf;
}

// The base model and every override the user gave: what the header prints.
std::string model_description(const plan::ModelSpec& m) {
  std::string base = flags.model.empty() ? "gpt (GPT base: GELU MLP, ffn 4h, tied embeddings, learned positions, MHA)"
                                         : cat(m.name, " (preset)");
  std::vector<std::string> given;
  auto add = [&](const char* flag, const auto& value) {
    if (value) given.push_back(cat(flag, " ", *value));
  };
  add("--layers", flags.layers), add("--hidden", flags.hidden), add("--heads", flags.heads);
  add("--kv-heads", flags.kv_heads), add("--ffn", flags.ffn), add("--vocab", flags.vocab), add("--seq", flags.seq);
  add("--experts", flags.experts), add("--topk", flags.topk), add("--moe-ffn", flags.moe_ffn);
  add("--moe-layers", flags.moe_layers), add("--mtp-layers", flags.mtp_layers), add("--mlp", flags.mlp);
  if (flags.tied_embeddings) given.push_back(cat("--tied-embeddings ", *flags.tied_embeddings ? "true" : "false"));
  return given.empty() ? base : cat(base, ", overrides: ", join(given, " "));
}

const char* kHeader =
    "#     config                             weight   grad    opt    act   total fits   step_s    MFU "
    "  compute  bubble     tp     cp     ep     dp     pp";

}  // namespace

CLI::App* add_plan_command(CLI::App& app) {
  CLI::App* p = app.add_subcommand(
      "plan", "Estimate memory, step time and MFU of every valid parallel config for a model on a cluster");
  p->footer(
      "Examples:\n"
      "  sextant plan --model llama3-405b --gpus 16384 --global-batch 2048 --check tp=8,pp=16,dp=128,recompute=full\n"
      "  sextant plan --model deepseek-v3 --device H800 --gpus 2048 --global-batch 15360 --check "
      "tp=1,pp=16,dp=128,ep=64\n"
      "Memory is per GPU on the heaviest pipeline stage (bf16 weights, fp32 grads, Adam sharded by the\n"
      "distributed optimizer, activations after Korthikanti et al. 2022); time: gemms by shape, attention\n"
      "at cuDNN's published rate, memory-bound kernels from bandwidth, communication exposed as far as\n"
      "--overlap leaves it. Formulas: kernels/planner/time_model.h.");
  p->add_option("--model", flags.model,
                "Preset: " + join(plan::model_presets(), ", ") +
                    " (without it the dimension flags describe a GPT: GELU MLP, ffn 4h, tied embeddings, learned "
                    "positions, MHA, "
                    "vocab 50257, seq 1024; --layers --hidden --heads required)");
  p->add_option("--layers", flags.layers, "Override: layers");
  p->add_option("--hidden", flags.hidden, "Override: hidden size");
  p->add_option("--heads", flags.heads, "Override: attention heads");
  p->add_option("--kv-heads", flags.kv_heads, "Override: KV heads");
  p->add_option("--ffn", flags.ffn, "Override: dense FFN width");
  p->add_option("--vocab", flags.vocab, "Override: vocabulary");
  p->add_option("--seq", flags.seq, "Override: sequence length");
  p->add_option("--experts", flags.experts, "Override: routed experts (0: dense)");
  p->add_option("--topk", flags.topk, "Override: experts per token");
  p->add_option("--moe-ffn", flags.moe_ffn, "Override: expert FFN width");
  p->add_option("--moe-layers", flags.moe_layers, "Override: number of MoE layers");
  p->add_option("--mtp-layers", flags.mtp_layers,
                "Override: multi-token prediction depths (DeepSeek-V3: 1), each a layer of the last layer's kind on "
                "the last stage, a [2h -> h] projection and the LM head's logits again");
  p->add_option("--mlp", flags.mlp,
                "Override: MLP kind, gelu (2 matrices), swiglu (3) or squared-relu (2, its activation in two "
                "unfused passes)")
      ->check(CLI::IsMember({"gelu", "swiglu", "squared-relu"}));
  p->add_option("--tied-embeddings", flags.tied_embeddings,
                "Override: true if the LM head reuses the input embedding (one vocab x h matrix), false for two");
  p->add_option("--device", flags.device, "GPU: H100, H800, H200, A100, B200");
  p->add_option("--gpus", flags.gpus, "GPUs in the cluster (required unless --reference)");
  p->add_option("--gpus-per-node", flags.gpus_per_node, "GPUs per node (TP stays inside a node)");
  p->add_option("--memory-gb", flags.memory_gb, "Override: GPU memory (GiB)");
  p->add_option("--peak-tflops", flags.peak_tflops, "Override: dense bf16 peak TFLOP/s per GPU");
  p->add_option("--nvlink-GBps", flags.nvlink, "Override: NVLink bandwidth per GPU (GB/s)");
  p->add_option("--network-GBps", flags.network, "Override: network bandwidth per GPU (GB/s)");
  p->add_option("--gemm-efficiency", flags.efficiency, "Achievable fraction of peak for matmuls (0.75)");
  p->add_option(
      "--layer-overhead-us", flags.layer_overhead,
      "Override: seconds (us) per layer and microbatch beyond the costed kernels (fitted on the published runs)");
  p->add_option("--hbm-GBps", flags.hbm, "Override: device memory bandwidth (GB/s)");
  add_choice(p, "--precision", flags.train.precision, {{"bf16", plan::Precision::bf16}, {"fp8", plan::Precision::fp8}},
             "Precision of the linears: bf16 or fp8");
  add_choice(p, "--attention", flags.train.attention,
             {{"fused", plan::AttentionKernel::fused}, {"unfused", plan::AttentionKernel::unfused}},
             "The attention core's kernel: fused (FlashAttention, cuDNN) or unfused (the [s, s] scores through "
             "memory)");
  add_choice(p, "--cross-entropy", flags.train.cross_entropy,
             {{"fused", plan::CrossEntropy::fused}, {"unfused", plan::CrossEntropy::unfused}},
             "The LM head's loss: fused (one kernel, --cross-entropy-loss-fusion) or unfused (Megatron's default: "
             "f32 passes over the logits)");
  add_choice(p, "--grad-reduce", flags.train.grad_reduce,
             {{"f32", plan::GradReduce::f32}, {"bf16", plan::GradReduce::bf16}},
             "The data-parallel gradients' type on the wire: f32 (Megatron-LM's default under bf16) or bf16 "
             "(--grad-reduce-in-bf16, as NVIDIA's performance recipes run)");
  p->add_option("--overlap", flags.overlap,
                "Fraction of each mechanism's communication hidden behind compute, e.g. tp=1,ep=1 (defaults: tp 0, "
                "dp 1, ep 0, cp 1, pp 1 under vpp > 1: kernels/planner/time_model.h)");
  p->add_option("--global-batch", flags.global_batch, "Sequences per step (required unless --reference)");
  p->add_option("--micro-batch", flags.micro_batch, "Sequences per microbatch");
  p->add_option("--top", flags.top, "Configs to list");
  p->add_option("--check", flags.check, "Evaluate one config, e.g. tp=8,pp=16,dp=128,recompute=full");
  p->add_option("--json", flags.json, "Also write every estimate as JSON here");
  p->add_option("--calibrate", flags.calibrate,
                "Build the step time from the measured rates in this results file (ops gemm / attention / "
                "layernorm / gelu, collectives per group size and kind, pipeline p2p latency, or a step/sweep "
                "calibration) instead of the roofline: kernels/planner/step_cost.h")
      ->type_name("RESULTS.json");
  p->add_option("--calibrate-dtype", flags.calibrate_dtype,
                "The dtype of the ops cases to calibrate with (default: bf16 for GPU results, f32 for host ones)");
  p->add_flag("--reference", flags.reference,
              "Published training runs (Megatron-LM, NeMo, Llama 3, DeepSeek-V3, the 6D tutorial): reported MFU, "
              "the planner's with its free parameters fitted on all runs and on all but that one, the gaps and "
              "where each step goes");
  p->add_option("--replay", flags.replay,
                "A stored run's host step/sweep cases predicted again by this build's calibrated planner, from the "
                "calibration and contention the run recorded, beside the measured and the recorded prediction")
      ->type_name("RESULTS.json");
  return p;
}

namespace {

std::optional<plan::Calibration> read_calibration() {
  if (flags.calibrate.empty()) return std::nullopt;
  const nlohmann::json doc = read_results_file(flags.calibrate, "--calibrate");
  std::string dtype = flags.calibrate_dtype;
  if (dtype.empty()) dtype = doc["system"].value("device_kind", std::string("host")) == "cuda" ? "bf16" : "f32";
  return plan::calibration_from_results(doc, dtype);
}

// The calibrated estimates of the `top` best roofline configs, best first
// (the simulator runs per config: the whole search space would be slow).
std::vector<plan::Estimate> calibrated(const std::vector<plan::Estimate>& all, const plan::ModelSpec& m,
                                       const plan::ClusterSpec& c, const plan::TrainSpec& t,
                                       const plan::Calibration& cal, size_t top) {
  std::vector<plan::Estimate> out;
  for (size_t i = 0; i < all.size() && out.size() < top; ++i) {
    if (!all[i].fits) continue;
    plan::StepShape shape;
    shape.schedule = all[i].config.vpp > 1 ? pp::ScheduleId::interleaved : pp::ScheduleId::one_f_one_b;
    shape.bytes_per_element = 2;
    out.push_back(plan::estimate_calibrated(m, c, t, all[i].config, shape, cal));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const plan::Estimate& a, const plan::Estimate& b) { return a.step < b.step; });
  return out;
}

}  // namespace

int run_plan_command() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!flags.replay.empty()) {
    if (rank == 0) print_sweep_replay(flags.replay);
    return 0;
  }
  const std::optional<plan::Calibration> cal = read_calibration();
  if (flags.reference) {
    if (rank == 0) print_reference_table(cal ? &*cal : nullptr);
    return 0;
  }
  require(flags.gpus != 0, "--gpus is required (the GPUs in the cluster), unless --reference");
  require_in("--gpus", flags.gpus, 1, kMaxGpus);
  require_in("--gpus-per-node", flags.gpus_per_node, 1, kMaxGpus);
  require(flags.global_batch != 0, "--global-batch is required (sequences per step), unless --reference");
  require_in("--global-batch", flags.global_batch, 1, kMaxGlobalBatch);
  require_in("--micro-batch", flags.micro_batch, 1, flags.global_batch);
  require_in("--top", flags.top, 1, int64_t{1} << 30);
  if (!flags.json.empty()) require_writable_file(flags.json, "--json");
  plan::ModelSpec m = flags.model.empty() ? plan::gpt_base() : plan::model_preset(flags.model);
  if (flags.model.empty())
    require(flags.layers && flags.hidden && flags.heads,
            "without --model, --layers, --hidden and --heads describe the GPT to plan (or name a --model preset)");
  set_if(m.layers, flags.layers, "--layers");
  set_if(m.hidden, flags.hidden, "--hidden");
  set_if(m.heads, flags.heads, "--heads");
  set_if(m.kv_heads, flags.kv_heads, "--kv-heads");
  set_if(m.ffn, flags.ffn, "--ffn");
  set_if(m.vocab, flags.vocab, "--vocab");
  set_if(m.seq, flags.seq, "--seq");
  set_if(m.experts, flags.experts, "--experts", 0);
  set_if(m.moe_layers, flags.moe_layers, "--moe-layers", 0);
  set_if(m.mtp_layers, flags.mtp_layers, "--mtp-layers", 0);
  set_if(m.topk, flags.topk, "--topk");
  set_if(m.moe_ffn, flags.moe_ffn, "--moe-ffn");
  require(m.experts == 0 || (m.topk > 0 && m.topk <= m.experts),
          cat("--topk ", m.topk, " must be between 1 and --experts ", m.experts));
  require(m.moe_layers <= m.layers, cat("--moe-layers ", m.moe_layers, " must not exceed --layers ", m.layers));
  if (flags.mlp) m.swiglu = *flags.mlp == "swiglu", m.squared_relu = *flags.mlp == "squared-relu";
  if (flags.tied_embeddings) m.tied_embeddings = *flags.tied_embeddings;
  if (m.ffn == 0) m.ffn = 4 * m.hidden;  // the GPT base's width
  require(m.head_dim > 0 || m.hidden % m.heads == 0,
          cat("--heads ", m.heads, " must divide --hidden ", m.hidden, " (the head dim is hidden / heads)"));
  require(m.kv() <= m.heads && m.heads % m.kv() == 0, cat("--kv-heads ", m.kv(), " must divide --heads ", m.heads));
  plan::ClusterSpec c;
  try {
    c = plan::cluster_preset(flags.device, flags.gpus);
  } catch (const UsageError&) {
    if (!flags.memory_gb || !flags.peak_tflops) throw;
    c.device = flags.device, c.gpus = flags.gpus;  // another GPU, described by the overrides below
  }
  c.gpus_per_node = flags.gpus_per_node;
  set_if(c.memory_gb, flags.memory_gb, "--memory-gb");
  set_if(c.peak_tflops, flags.peak_tflops, "--peak-tflops");
  set_if(c.nvlink_GBps, flags.nvlink, "--nvlink-GBps");
  set_if(c.network_GBps, flags.network, "--network-GBps");
  set_if(c.gemm_efficiency, flags.efficiency, "--gemm-efficiency", 1.0);
  set_if(c.hbm_GBps, flags.hbm, "--hbm-GBps");
  if (flags.layer_overhead) {
    require(std::isfinite(*flags.layer_overhead) && *flags.layer_overhead >= 0 && *flags.layer_overhead <= 1e6,
            cat("--layer-overhead-us ", *flags.layer_overhead, " must be from 0 to 1e6"));
    c.layer_overhead_us = *flags.layer_overhead;
  }
  require(flags.train.precision == plan::Precision::bf16 || c.fp8_peak_tflops > 0,
          cat("--precision fp8 needs FP8 tensor cores: ", c.device, " has none"));
  plan::TrainSpec t = flags.train;
  t.global_batch = flags.global_batch, t.micro_batch = flags.micro_batch, t.overlap = parse_overlap(flags.overlap);

  std::vector<plan::Estimate> all = plan::search(m, c, t);
  std::optional<plan::Estimate> checked;
  if (!flags.check.empty()) checked = plan::estimate(m, c, t, parse_config(flags.check));
  if (cal) {
    all = calibrated(all, m, c, t, *cal, 100);
    if (checked) {
      plan::StepShape shape;
      shape.schedule = checked->config.vpp > 1 ? pp::ScheduleId::interleaved : pp::ScheduleId::one_f_one_b;
      shape.bytes_per_element = 2;
      checked = plan::estimate_calibrated(m, c, t, checked->config, shape, *cal);
    }
  }
  if (rank != 0) return 0;
  size_t fitting = 0;
  for (const plan::Estimate& e : all) fitting += e.fits;
  char mtp[48] = "";
  if (m.mtp_layers > 0) std::snprintf(mtp, sizeof mtp, " + %.2fB MTP", m.mtp_params() / 1e9);
  std::printf("# %s: %.2fB parameters (%.2fB active)%s, seq %ld, global batch %ld sequences\n",
              model_description(m).c_str(), m.total_params() / 1e9, m.active_params() / 1e9, mtp,
              static_cast<long>(m.seq), static_cast<long>(t.global_batch));
  std::printf("# %ld x %s (%.0f GiB, %.0f TFLOP/s bf16, %ld per node); %zu valid configs, %zu fit in memory\n",
              static_cast<long>(c.gpus), c.device.c_str(), c.memory_gb, c.peak_tflops,
              static_cast<long>(c.gpus_per_node), all.size(), fitting);
  std::printf("# %s, micro batch %ld\n", t.settings().c_str(), static_cast<long>(t.micro_batch));
  if (cal)
    std::printf("# calibrated from %s: the 100 best fitting configs of the roofline, re-estimated and re-ranked\n",
                cal->source.c_str());
  std::printf("# memory in GiB per GPU (heaviest stage); times in seconds per step (exposed)\n%s\n", kHeader);
  for (int64_t i = 0; i < flags.top && i < static_cast<int64_t>(all.size()); ++i)
    std::printf("%s\n", row(static_cast<int>(i + 1), all[i]).c_str());
  if (checked) {
    std::printf("# --check %s\n%s\n", flags.check.c_str(), row(0, *checked).c_str());
    std::printf("# %s\n", checked->fits ? "valid and fits in memory" : "valid but does NOT fit in memory");
  }
  if (!flags.json.empty()) {
    nlohmann::json j = {{"model", m.name},
                        {"model_description", model_description(m)},
                        {"gpus", c.gpus},
                        {"device", c.device},
                        {"estimates", all}};
    std::ofstream(flags.json) << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace sextant
