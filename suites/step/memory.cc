// The step's peak memory: what sextant's tensor accounting (harness/
// memory_use.h) saw each rank hold, by kind, beside the planner's estimate
// of the same config for this step (kernels/planner/memory.h,
// sextant_step_layout), and on a GPU the device's own figures.
#include <algorithm>
#include <cmath>

#include "harness/comm_values.h"
#include "harness/memory_use.h"
#include "kernels/planner/flops.h"
#include "kernels/planner/memory.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {

const MetricDef& kMemoryPeak =
    define_metric({"step", "memory_peak_bytes", "B", Better::lower,
                   "the most any rank's step held at once (sextant's tensors: weights, gradients, optimizer, "
                   "activations, communication buffers, workspace)",
                   "train"});
const MetricDef& kMemoryEstimateError = define_metric(
    {"step", "memory_estimate_error_pct", "%", Better::neither,
     "the planner's estimate of that peak for this config, less the measured, in % of the measured", "train"});
const MetricDef& kMemory = define_metric(
    {"step", "memory", "json", Better::neither,
     "measured peak per rank and, at the most loaded rank, by kind; the planner's estimate by kind; on a GPU the "
     "device's own figures",
     "train"});

MemoryUse since(const MemoryUse& now, const MemoryUse& baseline) {
  MemoryUse out;
  for (int k = 0; k < kMemoryKinds; ++k) out.bytes[k] = now.bytes[k] - baseline.bytes[k];
  return out;
}

nlohmann::json by_kind(const double* bytes) {
  nlohmann::json j = nlohmann::json::object();
  double total = 0;
  for (int k = 0; k < kMemoryKinds; ++k) j[memory_kind_name(memory_kind_at(k))] = bytes[k], total += bytes[k];
  j["total"] = total;
  return j;
}

// The MoE layers of the pipeline rank that holds the most (stage s holds
// layers s L / S .. (s + 1) L / S - 1; interleaving gives a rank several).
int64_t most_moe_layers_on_a_rank(const model::GptConfig& c, const pp::Schedule& schedule) {
  if (schedule.stages <= 0) return -1;
  std::vector<int64_t> held(static_cast<size_t>(schedule.ranks), 0);
  const int64_t per_stage = c.layers / schedule.stages;
  for (int64_t i = 0; i < c.layers; ++i)
    if (c.moe[static_cast<size_t>(i)]) ++held[static_cast<size_t>(schedule.stage_rank[i / per_stage])];
  return *std::max_element(held.begin(), held.end());
}

// The dispatcher's own rule (kernels/moe/dispatcher.cc): peer memory for
// the alltoall dispatcher where the EP ranks share host memory and no ETP splits the experts.
bool dispatches_over_peer_memory(State& s) {
  const ParallelConfig& p = s.config.parallel;
  return s.model.moe_layer_count() > 0 && s.model.dispatcher == moe::DispatcherKind::alltoall && p.ep > 1 &&
         p.etp == 1 && s.comms->ep->peer_memory(1) != nullptr;
}

// The most rows one EP rank's experts received over the balanced count, in
// any MoE layer and microbatch of the last step (each layer's routed
// fractions over its whole batch; EP rank r holds experts r E/ep ..
// (r + 1) E/ep - 1), the most over the ranks; 1 without MoE.
double expert_load(State& s) {
  const int ep = s.config.parallel.ep;
  double load = 1;
  for (const auto& layer : s.trainer->stages().layers()) {
    if (!layer->is_moe()) continue;
    for (int mb = 0; mb < s.model.microbatches; ++mb) {
      const std::vector<double>& f = layer->routing(mb).routed_fraction;
      const size_t local = f.size() / static_cast<size_t>(ep);
      double total = 0, most = 0;
      for (size_t r = 0; r < static_cast<size_t>(ep); ++r) {
        double held = 0;
        for (size_t e = r * local; e < (r + 1) * local; ++e) held += f[e];
        total += held, most = std::max(most, held);
      }
      if (total > 0) load = std::max(load, most * ep / total);
    }
  }
  return s.host->all_reduce_value(load, ReduceOp::max);
}

}  // namespace

void start_memory_count(State& s) {
  s.memory_baseline = memory_in_use(s.device);
  reset_memory_peak(s.device);
  if (s.device == Device::cuda) cuda_reset_pool_peak();
}

void add_memory_metrics(Metrics& m, State& s) {
  // Every rank's peak by kind, gathered: [rank][kind].
  const MemoryUse peak = since(memory_peak(s.device), s.memory_baseline);
  std::vector<double> mine(peak.bytes.begin(), peak.bytes.end());
  std::vector<double> all(mine.size() * static_cast<size_t>(s.host->size()));
  small_all_gather(*s.host, mine.data(), all.data(), mine.size());
  nlohmann::json per_rank = nlohmann::json::array();
  int worst = 0;
  double worst_total = -1;
  for (int r = 0; r < s.host->size(); ++r) {
    double total = 0;
    for (int k = 0; k < kMemoryKinds; ++k) total += all[r * kMemoryKinds + k];
    per_rank.push_back(total);
    if (total > worst_total) worst = r, worst_total = total;
  }
  // The planner's estimate for its heaviest stage, with this schedule's
  // microbatches in flight on the rank that holds the most (in whole shares
  // of its layers).
  const pp::Schedule& schedule = s.trainer->schedule();
  int in_flight = 0, deferred = 0;
  for (int r = 0; r < schedule.ranks; ++r) {
    in_flight = std::max(in_flight, schedule.max_in_flight(r));
    deferred = std::max(deferred, schedule.max_deferred_weight_grads(r));
  }
  const ParallelConfig& p = s.config.parallel;
  plan::StageLoad load;
  load.in_flight = static_cast<double>(in_flight) / std::max(schedule.chunks_per_rank(), 1);
  load.moe_layers = most_moe_layers_on_a_rank(s.model, schedule);
  load.deferred_weight_grads = deferred;
  load.expert_load = expert_load(s);
  const plan::MemoryBreakdown est = plan::estimate_memory(
      plan::model_spec(s.model), plan::train_spec(s.model, p), plan::plan_config(s.model, p),
      plan::sextant_step_layout(static_cast<int>(dtype_size(s.model.dtype)), dispatches_over_peer_memory(s)), load);
  const double estimate[kMemoryKinds] = {est.weights,     est.gradients,     est.optimizer,
                                         est.activations, est.communication, est.workspace};
  const double error = worst_total > 0 ? 100.0 * (est.total() - worst_total) / worst_total : NAN;
  m.add(kMemoryPeak, worst_total);
  if (std::isfinite(error)) m.add(kMemoryEstimateError, error);
  nlohmann::json record = {
      {"device", device_name(s.device)},
      {"per_rank_bytes", per_rank},
      {"rank", worst},
      {"measured", by_kind(&all[static_cast<size_t>(worst) * kMemoryKinds])},
      {"estimate", by_kind(estimate)},
      {"estimate_in_flight", load.in_flight},
      {"estimate_deferred_weight_grads", deferred},
      {"estimate_expert_load", load.expert_load},
      {"error_pct", error},
      {"definition",
       "measured: sextant's tensors the step allocated (trainer built, every step run), at the moment their total "
       "peaked on the rank that held the most; estimate: the planner's memory model of this step "
       "(kernels/planner/memory.h) for the same config, with this schedule's microbatches in flight and its router's "
       "expert load"}};
  if (s.device == Device::cuda) {
    const double used = cuda_used_memory(), pool = cuda_pool_peak_memory();
    record["cuda_used_bytes_after_step"] = used >= 0 ? nlohmann::json(used) : nlohmann::json();
    record["cuda_pool_peak_bytes"] = pool >= 0 ? nlohmann::json(pool) : nlohmann::json();
  }
  m.add_json(kMemory, record);
}

}  // namespace sextant::step
