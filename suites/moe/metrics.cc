// The cost model (results/METRICS.md, moe row). Per-part times come from the
// layer's own wall clocks, per rank, median over the timed iterations; the
// harness's fwd_bwd time (max over ranks per iteration) sets tokens/s and
// TFLOP/s.
//   dispatch_GBps       rows received from other ranks in the forward
//                       dispatch / its time, per rank (mean over ranks)
//   combine_GBps        the same for the forward combine
//   dispatch_GBps_aggregate  all ranks' dispatch bytes / the slowest dispatch
//   imbalance_expert    max / mean kept slots per expert (whole batch)
//   imbalance_rank      max / mean rows the ranks' experts process
//   dropped_tokens      slots dropped over capacity (whole batch)
//   tokens_per_s        tokens of the batch / fwd_bwd time
//   expert_tflops       expert gemm FLOPs (12 n h f per expert and rank,
//                       forward + backward) / fwd_bwd time, per rank
//   a2a_share           time inside the token collectives (dispatch and
//                       combine, forward and backward) / the layer's time,
//                       mean over ranks
//   dispatch_share      forward dispatch + combine / forward time, mean over ranks
// Extras: dispatch_time_s, combine_time_s (max over ranks), peer_memory (1
// where the rows moved through peer memory on every rank), expert_load
// (kept slots per expert), time_split (rank 0's layer time by part).
#include <algorithm>

#include "harness/error.h"
#include "suites/moe/moe.h"

namespace sextant::moe_suite {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kDispatchGBps =
    define_metric({"moe", "dispatch_GBps", "GB/s", Better::higher,
                   "bytes received from other ranks in the dispatch / its time, mean over ranks"});
const MetricDef& kCombineGBps =
    define_metric({"moe", "combine_GBps", "GB/s", Better::higher,
                   "bytes received from other ranks in the combine / its time, mean over ranks"});
const MetricDef& kDispatchGBpsAggregate =
    define_metric({"moe", "dispatch_GBps_aggregate", "GB/s", Better::higher,
                   "all ranks' dispatch bytes / the slowest rank's dispatch time"});
const MetricDef& kImbalanceExpert =
    define_metric({"moe", "imbalance_expert", "1", Better::neither, "max / mean kept tokens per expert"});
const MetricDef& kImbalanceRank =
    define_metric({"moe", "imbalance_rank", "1", Better::neither, "max / mean rows an expert-parallel rank computes"});
const MetricDef& kDroppedTokens =
    define_metric({"moe", "dropped_tokens", "slots", Better::neither, "routed slots over capacity and dropped"});
const MetricDef& kTokensPerS = define_metric(
    {"moe", "tokens_per_s", "tokens/s", Better::higher, "tokens of the layer batch / median fwd_bwd time"});
const MetricDef& kExpertTflops =
    define_metric({"moe", "expert_tflops", "TFLOP/s", Better::higher, "expert matmul FLOP/s per rank"});
const MetricDef& kA2aShare = define_metric({"moe", "a2a_share", "1", Better::neither,
                                            "fraction of the layer time spent in token all-to-all, mean over ranks"});
const MetricDef& kDispatchShare =
    define_metric({"moe", "dispatch_share", "1", Better::neither,
                   "(forward dispatch + combine) / forward time of the layer, mean over ranks"});
const MetricDef& kPeerMemory = define_metric(
    {"moe", "peer_memory", "1", Better::neither, "1: the alltoall rows moved through peer memory (transport)"});
const MetricDef& kDispatchTimeS =
    define_metric({"moe", "dispatch_time_s", "s", Better::lower, "dispatch time, max over ranks"});
const MetricDef& kCombineTimeS =
    define_metric({"moe", "combine_time_s", "s", Better::lower, "combine time, max over ranks"});
const MetricDef& kExpertLoad = define_metric({"moe", "expert_load", "json", Better::neither, "kept slots per expert"});
const MetricDef& kTimeSplit =
    define_metric({"moe", "time_split", "json", Better::neither,
                   "rank 0's seconds in forward, backward, router, experts, token_comm, grad_reduce"});
}  // namespace

namespace {

// Median over the last `iters` layer runs of one per-run quantity.
template <class Fn>
double median_of(const std::vector<moe::MoeTimes>& history, int iters, Fn fn) {
  const size_t n = std::min(history.size(), static_cast<size_t>(std::max(iters, 1)));
  std::vector<double> v;
  for (size_t i = history.size() - n; i < history.size(); ++i) v.push_back(fn(history[i]));
  return summarize(v).median;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

Metrics metrics(State& s, const RegionTimes& times) {
  const TimeStats& t = times.at("fwd_bwd");
  if (s.history.empty()) throw RuntimeError("moe metrics: the layer never ran");
  Communicator& host = *s.host;
  const int ranks = host.size();
  const moe::MoeTimes& last = s.history.back();
  const double dispatch_s = median_of(s.history, t.iters, [](const moe::MoeTimes& m) { return m.dispatch.dispatch_s; });
  const double combine_s = median_of(s.history, t.iters, [](const moe::MoeTimes& m) { return m.dispatch.combine_s; });
  const double share = median_of(
      s.history, t.iters, [](const moe::MoeTimes& m) { return ratio(m.dispatch.comm_s, m.forward_s + m.backward_s); });
  const double dispatch_share = median_of(s.history, t.iters, [](const moe::MoeTimes& m) {
    return ratio(m.dispatch.dispatch_s + m.dispatch.combine_s, m.forward_s);
  });
  const auto dispatch_bytes = static_cast<double>(last.dispatch.dispatch_recv_bytes);
  const auto combine_bytes = static_cast<double>(last.dispatch.combine_recv_bytes);
  const auto rows = static_cast<double>(last.dispatch.expert_rows);

  // Whole-batch load of each expert (kept slots) and the dropped slots.
  const moe::SlotTable& slots = s.layer->routing().slots;
  std::vector<double> load(static_cast<size_t>(s.problem.experts) + 1, 0.0);
  for (int64_t i = 0; i < slots.slots(); ++i) load[slots.kept[i] ? slots.expert[i] : s.problem.experts] += 1;
  host.all_reduce(load.data(), load.data(), load.size(), DType::f64, ReduceOp::sum);
  const double dropped = load.back();
  load.pop_back();
  const double load_max = *std::max_element(load.begin(), load.end());
  double load_sum = 0;
  for (double v : load) load_sum += v;

  const double dispatch_rate_sum = host.all_reduce_value(ratio(dispatch_bytes, dispatch_s) / 1e9, ReduceOp::sum);
  const double combine_rate_sum = host.all_reduce_value(ratio(combine_bytes, combine_s) / 1e9, ReduceOp::sum);
  const double bytes_sum = host.all_reduce_value(dispatch_bytes, ReduceOp::sum);
  const double dispatch_max_s = host.all_reduce_value(dispatch_s, ReduceOp::max);
  const double rows_max = host.all_reduce_value(rows, ReduceOp::max);
  const double rows_sum = host.all_reduce_value(rows, ReduceOp::sum);
  const double flops_sum = host.all_reduce_value(last.expert_flops, ReduceOp::sum);
  const double share_sum = host.all_reduce_value(share, ReduceOp::sum);

  Metrics m;
  m.add(kDispatchGBps, dispatch_rate_sum / ranks);
  m.add(kCombineGBps, combine_rate_sum / ranks);
  m.add(kDispatchGBpsAggregate, ratio(bytes_sum, dispatch_max_s) / 1e9);
  m.add(kImbalanceExpert, ratio(load_max, load_sum / s.problem.experts));
  m.add(kImbalanceRank, ratio(rows_max, rows_sum / ranks));
  m.add(kDroppedTokens, dropped);
  m.add(kTokensPerS, ratio(static_cast<double>(s.problem.tokens), t.median));
  m.add(kExpertTflops, ratio(flops_sum / ranks, t.median) / 1e12);
  m.add(kA2aShare, share_sum / ranks);
  m.add(kDispatchShare, host.all_reduce_value(dispatch_share, ReduceOp::sum) / ranks);
  m.add(kPeerMemory, host.all_reduce_value(last.dispatch.peer_memory ? 1 : 0, ReduceOp::min));
  m.add(kDispatchTimeS, dispatch_max_s);
  m.add(kCombineTimeS, host.all_reduce_value(combine_s, ReduceOp::max));
  m.add_json(kExpertLoad, load);
  // Where rank 0's layer time goes (medians, seconds).
  auto part = [&](auto fn) { return median_of(s.history, t.iters, fn); };
  m.add_json(kTimeSplit, {{"forward", part([](const moe::MoeTimes& x) { return x.forward_s; })},
                          {"backward", part([](const moe::MoeTimes& x) { return x.backward_s; })},
                          {"router", part([](const moe::MoeTimes& x) { return x.router_s; })},
                          {"experts", part([](const moe::MoeTimes& x) { return x.experts_s; })},
                          {"token_comm", part([](const moe::MoeTimes& x) { return x.dispatch.comm_s; })},
                          {"grad_reduce", part([](const moe::MoeTimes& x) { return x.grad_reduce_s; })}});
  return m;
}

}  // namespace sextant::moe_suite
