// The train case: K conformance steps, then timed training steps.
#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/ops/gemm.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {

std::vector<Recipe> listed(const SweepRequest& req, const std::string& list, const nlohmann::json& params) {
  std::vector<Recipe> out;
  for (const std::string& name : split(list, ',')) out.push_back(recipe_for(parse_recipe(name, req.ranks), params));
  return out;
}

// Pinned (--tp ...) or listed configs are the user's: validated strictly.
// Our own recipes (`own`) and factorisations are dropped where they do not
// fit the user's sizes or step options (e.g. --set schedule=gpipe and a vpp
// 2 recipe). fp8: every config a dense model with FP8 linears.
std::vector<CaseConfig> step_configs(const SweepRequest& req, const std::vector<Recipe>& own, bool fp8) {
  nlohmann::json params = default_params(req);
  if (fp8 && !req.options.contains("moe_every") && !req.options.contains("moe_pattern")) params["moe_every"] = 0;
  if (req.options.contains("peak_tflops")) params["peak_tflops"] = req.options.at("peak_tflops");
  const std::string mode = req.get<std::string>("sweep", std::string(kRecipesMode));
  std::vector<Recipe> list;
  bool strict = true;
  if (req.parallel) {
    list = {recipe_for(*req.parallel, params)};
  } else if (mode == kRecipesMode) {
    list = own;
    strict = false;
  } else if (mode == kAllConfigs) {
    list = factorisations(req.ranks, params);
    strict = false;
  } else {
    list = listed(req, mode, params);
  }
  if (fp8)
    for (Recipe& r : list) r = with_fp8_linears(std::move(r));
  // The model's own rules (sizes, MoE pattern) hold at any parallel config:
  // the user's mistakes there fail loudly instead of filtering every recipe out.
  const model::GptConfig gpt = model::gpt_config_from_json(params);
  model::validate(gpt, ParallelConfig{});
  model::token_source(gpt, 0);  // a broken dataset, or one the model cannot read, fails every config
  for (DType dtype : req.dtypes_or({DType::f32})) validate_dtype(dtype, gpt);
  std::vector<CaseConfig> out;
  std::string first_error;
  for (DType dtype : req.dtypes_or({DType::f32}))
    for (const Recipe& r : list) {
      CaseConfig c = make_config(req, params, r, dtype);
      if (!strict) {
        try {
          validate(c.parallel, c.ranks);
          validate_config(c);
        } catch (const UsageError& e) {
          if (first_error.empty()) first_error = e.what();
          continue;  // a recipe the user's sizes or options rule out
        }
      }
      if (!model::step_faults().shows(model::step_faults().parse(req.fault),
                                      {model::gpt_config_from_json(c.params), c.parallel}))
        continue;
      // The user's FP8 recipe over our own FP8 recipes can repeat a config.
      if (std::any_of(out.begin(), out.end(), [&](const CaseConfig& o) { return o.id() == c.id(); })) continue;
      out.push_back(std::move(c));
    }
  // The user's options ruled out every config of this rank count: say why.
  if (out.empty() && !first_error.empty() && req.fault.empty() && !req.options.empty()) throw UsageError(first_error);
  return out;
}

std::vector<CaseConfig> train_configs(const SweepRequest& req) {
  return step_configs(req, recipes(req.ranks, req.profile), false);
}

// The step's FP8 linears run on the host: a CUDA sweep leaves them out
// unless asked for (--set fp8_recipe), which validate_config then refuses.
std::vector<CaseConfig> fp8_configs(const SweepRequest& req) {
  if (req.device == Device::cuda && !req.has("fp8_recipe")) return {};
  return step_configs(req, fp8_recipes(req.ranks), true);
}

}  // namespace

HostRates measure_host_rates(Communicator& comm) {
  HostRates r;
  // f32 gemm while every rank of the instance runs one (ranks share cores):
  // the best of five 20 ms windows, so that a neighbour's burst does not
  // pass for this machine's peak.
  const int64_t n = 256;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  comm.barrier();
  double best = 0;
  for (int window = 0; window < 5; ++window) {
    int reps = 0;
    const double start = now_seconds();
    double elapsed = 0;
    while (reps < 2 || elapsed < 0.02) {
      ops::gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      ++reps;
      elapsed = now_seconds() - start;
    }
    best = std::max(best, 2.0 * n * n * n * reps / elapsed / 1e12);
  }
  r.sgemm_tflops_per_rank = comm.all_reduce_value(best, ReduceOp::sum) / comm.size();
  if (comm.size() == 1) return r;
  // all_reduce bus bandwidth (1 MiB) and latency (8 B), max over ranks per call.
  std::vector<float> buf(1 << 18, 1.0f);
  double t0 = 0;
  for (int i = 0; i < 4; ++i) {
    if (i == 1) comm.barrier(), t0 = now_seconds();  // the first is a warm-up
    comm.all_reduce(buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum);
  }
  const double big = comm.all_reduce_value((now_seconds() - t0) / 3, ReduceOp::max);
  const double n_ranks = comm.size();
  r.allreduce_busbw_GBps = 2 * (n_ranks - 1) / n_ranks * buf.size() * 4.0 / big / 1e9;
  double one = 0;
  comm.barrier();
  t0 = now_seconds();
  for (int i = 0; i < 10; ++i) one = comm.all_reduce_value(one, ReduceOp::sum);
  r.allreduce_latency_us = comm.all_reduce_value((now_seconds() - t0) / 10, ReduceOp::max) * 1e6;
  return r;
}

std::pair<double, std::string> peak_per_rank(const nlohmann::json& params, int ranks, Device device) {
  if (params.contains("peak_tflops")) return {params.at("peak_tflops").get<double>(), "--peak-tflops (per device)"};
  if (device == Device::cuda) {
    std::vector<DeviceInfo> gpus = describe_cuda_devices();
    if (!gpus.empty() && gpus[0].peak_tflops > 0) return {gpus[0].peak_tflops, gpus[0].peak_source};
    return {0, "unknown: pass --peak-tflops"};
  }
  const DeviceInfo host = describe_host();
  return {host.peak_tflops / ranks, cat(host.peak_source, ", shared by ", ranks, " ranks (host f32 estimate)")};
}

std::pair<double, std::string> fp8_peak_per_rank(const nlohmann::json& params, int ranks, Device device) {
  if (params.contains("peak_tflops")) return {0, "unknown: --peak-tflops gives the bf16 peak alone"};
  if (device == Device::cuda) {
    std::vector<DeviceInfo> gpus = describe_cuda_devices();
    const double peak = gpus.empty() ? 0 : gpu_fp8_peak_tflops(gpus[0].name);
    if (peak > 0) return {peak, "table: dense FP8 of " + gpus[0].name};
    return {0, "unknown: no dense FP8 peak for this device"};
  }
  // The host has no FP8 units: its FP8 gemms dequantize and run in f32.
  const auto [peak, source] = peak_per_rank(params, ranks, device);
  return {peak, source + "; FP8 emulated in f32 on the host"};
}

State setup_train(CaseContext& ctx) {
  State s;
  s.config = ctx.config;
  s.model = model::gpt_config_from_json(ctx.config.params);
  s.model.dtype = ctx.config.dtype;
  s.seed = ctx.seed;
  s.steps = static_cast<int>(ctx.config.params.value("steps", int64_t{3}));
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.device = ctx.device;
  // The baseline's bookkeeping (gathers, the pipeline plan check) needs host
  // data movement where self is a device communicator.
  if (ctx.self.device() != Device::host) s.host_self_split = ctx.host_comm.split(ctx.host_comm.rank(), 0);
  s.comms = std::make_unique<model::ModelComms>(
      model::make_model_comms(ctx.grid, ctx.comm, ctx.host_comm, ctx.self, s.model));
  start_memory_count(s);
  s.trainer =
      std::make_unique<model::GptTrainer>(s.model, *s.comms, s.seed, model::step_faults().parse(ctx.config.fault));
  s.rates = measure_host_rates(ctx.host_comm);
  return s;
}

namespace {

// The train and fp8 cases: the same step, each with its own configs, the faults of its kernels and its table.
CaseTable<State> step_table(std::string name, std::string summary, std::vector<KernelFault> kernel_faults,
                            std::vector<std::string> table_metrics,
                            std::vector<CaseConfig> (*configs)(const SweepRequest&)) {
  return CaseTable<State>{
      .suite = "step",
      .name = std::move(name),
      .summary = std::move(summary),
      .options = model_options(
          {OptionSpec::text("sweep", "recipes (default), all (every factorisation) or a list of configs")}),
      .faults = model::step_faults().docs(),
      .kernel_faults = std::move(kernel_faults),
      .table_metrics = std::move(table_metrics),
      .configs = configs,
      .validate = validate_config,
      .memory = step_memory,
      .setup = setup_train,
      .timed = {{"step", [](State& s) { s.history.push_back(s.trainer->step()); }}},
      .check = check_train,
      .metrics = train_metrics,
  };
}

}  // namespace

CaseDef train_case() {
  return make_case(step_table(
      "train", "GPT training step under TP x SP x CP x EP x PP x DP vs the float64 reference, K steps",
      {KernelFault::attention_forward_scale, KernelFault::attention_backward_softmax_grad,
       KernelFault::causal_mask_diagonal, KernelFault::attention_gqa_head_map, KernelFault::attention_window_off_by_one,
       KernelFault::layernorm_forward_variance, KernelFault::layernorm_backward_mean_term,
       KernelFault::gelu_backward_coefficient, KernelFault::cross_entropy_gradient,
       KernelFault::embedding_backward_duplicates, KernelFault::adam_bias_correction, KernelFault::router_topk_repeats,
       KernelFault::router_choice_bias, KernelFault::moe_permute_order, KernelFault::moe_unpermute_order,
       KernelFault::moe_combine_twice, KernelFault::pipeline_skip_weight_grad, KernelFault::gemm_ignores_beta},
      {"tokens_per_s", "mfu", "bubble_fraction"}, train_configs));
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, train_case);

// The same step with FP8 linears. Its kernel faults are those its FP8 gate
// catches; subtler ones hide in FP8's rounding here and fail step/train,
// which runs the same kernels unquantized.
CaseDef fp8_case() {
  return make_case(
      step_table("fp8", "the training step with FP8 linears under TransformerEngine's recipes vs the float64 reference",
                 {KernelFault::fp8_scale_inverse_twice, KernelFault::layernorm_backward_mean_term,
                  KernelFault::cross_entropy_gradient, KernelFault::adam_bias_correction},
                 {"tokens_per_s", "mfu", "mfu_fp8"}, fp8_configs));
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 15, fp8_case);

}  // namespace sextant::step
