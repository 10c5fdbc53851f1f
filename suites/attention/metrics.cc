// The cost model: attention TFLOP/s per rank, per-rank compute balance,
// the variant's traffic formula (next to the harness's measured
// bytes_sent_per_rank) and overlap efficiency. Packed sequences: FLOPs of
// the real tokens only, the padding, and the causal work balance of the
// three ways to split a pack over CP (per-sequence zigzag, the stream
// zigzagged as one sequence, contiguous).
#include <algorithm>
#include <numeric>

#include "kernels/attention/ulysses.h"
#include "suites/attention/attention.h"

namespace sextant::attention {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kTflopsPerRank =
    define_metric({"attention", "tflops_per_rank", "TFLOP/s", Better::higher,
                   "attention FLOP/s of fwd_bwd per rank: 3.5 x 2 b s^2 h (d + d_v) (x0.5 causal) / (time x ranks)"});
const MetricDef& kTflopsPerRankFwd =
    define_metric({"attention", "tflops_per_rank_fwd", "TFLOP/s", Better::higher,
                   "attention FLOP/s of the forward per rank: 2 b s^2 h (d + d_v) (x0.5 causal) / (time x ranks)"});
const MetricDef& kFlopsFormula = define_metric(
    {"attention", "flops_formula", "json", Better::neither, "the FLOP count the TFLOP/s figures use, as text"});
const MetricDef& kLoadBalance =
    define_metric({"attention", "load_balance", "max/min", Better::lower,
                   "max / min over ranks of the attention compute time in fwd_bwd (1 = balanced)"});
const MetricDef& kComputeTimeMaxS = define_metric(
    {"attention", "compute_time_max_s", "s", Better::lower, "attention compute time of fwd_bwd on the slowest rank"});
const MetricDef& kComputeTimeMinS = define_metric(
    {"attention", "compute_time_min_s", "s", Better::neither, "attention compute time of fwd_bwd on the fastest rank"});
const MetricDef& kComputeTimePerRank = define_metric({"attention", "compute_time_per_rank", "json", Better::neither,
                                                      "{seconds: [attention compute time of fwd_bwd, one per rank]}"});
const MetricDef& kWorkBalance =
    define_metric({"attention", "work_balance", "max/min", Better::neither,
                   "max / min over ranks of the visible (query, key) pairs: the balance the layout promises (0 when "
                   "a rank holds none, as one holding padding alone)"});
const MetricDef& kBytesSentFormula = define_metric(
    {"attention", "bytes_sent_formula", "B", Better::neither,
     "bytes per rank of the forward from the variant's traffic formula (beside the measured bytes_sent_per_rank)"});
const MetricDef& kBytesSentFormulaFwdBwd =
    define_metric({"attention", "bytes_sent_formula_fwd_bwd", "B", Better::neither,
                   "bytes per rank of forward and backward from the variant's traffic formula"});
const MetricDef& kPaddingRows = define_metric(
    {"attention", "padding_rows", "rows", Better::neither,
     "packed inputs: rows added so every sequence splits into 2 cp chunks (masked, excluded from checks and FLOPs)"});
const MetricDef& kPaddingFraction = define_metric(
    {"attention", "padding_fraction", "ratio", Better::neither, "packed inputs: padding rows / all rows"});
const MetricDef& kWorkBalanceZigzagPerSequence =
    define_metric({"attention", "work_balance_zigzag_per_sequence", "max/min", Better::neither,
                   "packed inputs: causal pairs max / min over ranks with each sequence zigzagged alone"});
const MetricDef& kWorkBalanceContiguous =
    define_metric({"attention", "work_balance_contiguous", "max/min", Better::neither,
                   "packed inputs: the same with the packed rows cut contiguously"});
const MetricDef& kWorkBalanceZigzagStream =
    define_metric({"attention", "work_balance_zigzag_stream", "max/min", Better::neither,
                   "packed inputs: the same with the whole pack zigzagged as one sequence"});
const MetricDef& kRingStepsSkipped =
    define_metric({"attention", "ring_steps_skipped", "steps", Better::neither,
                   "ring steps of fwd_bwd (forward and backward) whose block the mask hides wholly, summed over the "
                   "ranks (causal: the later blocks; a sliding window also the blocks outside every query's window)"});
const MetricDef& kRingSteps = define_metric({"attention", "ring_steps", "steps", Better::neither,
                                             "ring steps of fwd_bwd (forward and backward), summed over the ranks"});
const MetricDef& kSkippedComputeS =
    define_metric({"attention", "skipped_steps_compute_s", "s", Better::neither,
                   "estimated compute time the skipped ring steps save, summed over the ranks: each rank's skipped "
                   "steps x its mean compute time per computed step (fwd_bwd)"});
const MetricDef& kOverlapEfficiency =
    define_metric({"attention", "overlap_efficiency", "ratio", Better::higher,
                   "compute_only time / fwd_bwd time: 1 when communication hides fully under compute"});
}  // namespace

namespace {

// Every rank's value, on every rank (collective over the host communicator).
std::vector<double> per_rank(Communicator& host, double mine) {
  Tensor all = Tensor::empty({host.size()}, DType::f64);
  host.all_gather(Tensor::from_values({1}, {mine}, DType::f64), all);
  return all.to_vector();
}

double ratio(const std::vector<double>& v) {
  const double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  return lo > 0 ? hi / lo : 0;
}

// Packed: max/min over the CP ranks of the causal pairs their rows compute
// when the pack is split by `chunks_of(cp rank)`.
template <class ChunksOf>
double pair_balance(const Problem& p, int cp, ChunksOf chunks_of) {
  std::vector<double> pairs;
  for (int r = 0; r < cp; ++r)
    pairs.push_back(static_cast<double>(cp::causal_pairs_of_rows(p.packing, cp::positions_of(chunks_of(r)))));
  return ratio(pairs);
}

void add_packed_metrics(const Problem& p, int cp, Metrics& m) {
  m.add(kPaddingRows, static_cast<double>(p.packing.padding()));
  m.add(kPaddingFraction, static_cast<double>(p.packing.padding()) / static_cast<double>(p.rows()));
  m.add(kWorkBalanceZigzagPerSequence,
        pair_balance(p, cp, [&](int r) { return cp::shard_chunks(cp::Layout::zigzag, p.packing, cp, r); }));
  m.add(kWorkBalanceContiguous,
        pair_balance(p, cp, [&](int r) { return cp::shard_chunks(cp::Layout::contiguous, p.packing, cp, r); }));
  if (p.rows() % (2 * cp) == 0)
    m.add(kWorkBalanceZigzagStream,
          pair_balance(p, cp, [&](int r) { return cp::shard_chunks(cp::Layout::zigzag, p.rows(), cp, r); }));
}

}  // namespace

// Bytes a rank sends per iteration under the harness's convention (ring
// all-to-all / all-gather / reduce-scatter send (n-1)/n of the whole buffer,
// isend the message). A = a2a group, P = kv group, n local rows:
//   forward  Ulysses (A-1)/A [q + k + v out; out + lse back]; K, V: (P-1) blocks each
//   backward Ulysses (A-1)/A [q + k + v + dout + lse + D out; dq + dk + dv back];
//            K, V: (P-1) blocks each; dK, dV (f32): ring P hops each, all-gather
//            a reduce-scatter, (P-1) blocks each.
// KV heads fewer than A travel as R = A / kv copies each (k, v and their
// blocks R times the bytes), and their dK, dV come back in f32 to be summed.
double bytes_formula(const State& s, bool backward_too) {
  const Shard& sh = s.shard;
  const double es = static_cast<double>(dtype_size(s.config.dtype));
  const double rows = static_cast<double>(sh.batch * sh.rows), d = static_cast<double>(s.problem.head_dim);
  const double dv = static_cast<double>(s.problem.v_head_dim);
  const double a = s.comms.a2a ? s.comms.a2a->size() : 1, p = s.comms.kv ? s.comms.kv->size() : 1;
  const double r = s.comms.a2a ? static_cast<double>(cp::kv_replicas(s.comms.a2a->size(), sh.kv_heads)) : 1;
  // q, dq: d; out, dout: d_v; one K and one V block (k: d, v: d_v), and the same in f32
  const double q = rows * sh.heads * d * es, o = rows * sh.heads * dv * es;
  const double kv = r * rows * sh.kv_heads * (d + dv) * es, kv32 = kv / es * 4;
  const double stat = rows * sh.heads * 4;
  const double a2a = (a - 1) / a;
  const double fwd = a2a * (q + kv) + a2a * (o + stat) + (p - 1) * kv;
  if (!backward_too) return fwd;
  double bwd = a2a * (q + kv + o + 2 * stat) + a2a * (q + (r > 1 ? kv32 : kv)) + (p - 1) * kv;
  if (p > 1) bwd += (s.variant->kv == cp::KvExchange::ring ? p : p - 1) * kv32;
  return fwd + bwd;
}

Metrics metrics(State& s, const RegionTimes& times) {
  const double ranks = s.config.ranks, fwd = s.problem.flops_forward(), fwd_bwd = 3.5 * fwd;
  auto tflops = [&](double flops, const std::string& region) {
    const double t = times.at(region).median;
    return t > 0 ? flops / (t * ranks) / 1e12 : 0.0;
  };
  Metrics m;
  m.add(kTflopsPerRank, tflops(fwd_bwd, "fwd_bwd"));
  m.add(kTflopsPerRankFwd, tflops(fwd, "fwd"));
  m.add_json(kFlopsFormula,
             s.problem.window.any()
                 ? "forward 2*b*h*(d+d_v) x the visible pairs (sum over each sequence's query i of its keys in "
                   "[i - left, i + right], causal: [i - left, i]), "
                   "fwd_bwd 3.5x forward; per rank: / (time * ranks)"
             : s.problem.packed()
                 ? "forward sum over packed sequences of 2*b*L^2*h*(d+d_v) x0.5 (real tokens only), fwd_bwd "
                   "3.5x forward; per rank: / (time * ranks)"
                 : "forward 2*b*s^2*h*(d+d_v) (x0.5 causal), fwd_bwd 3.5x forward; per rank: / (time * ranks)");

  const RegionStats& r = s.regions.at("fwd_bwd");
  const std::vector<double> compute = per_rank(*s.host, r.kernel.compute_s / std::max(r.runs, 1));
  const std::vector<double> work = per_rank(*s.host, static_cast<double>(r.kernel.pairs) / std::max(r.runs, 1));
  m.add(kLoadBalance, ratio(compute));
  m.add(kComputeTimeMaxS, *std::max_element(compute.begin(), compute.end()));
  m.add(kComputeTimeMinS, *std::min_element(compute.begin(), compute.end()));
  m.add_json(kComputeTimePerRank, {{"seconds", compute}});
  // Visible (query, key) pairs per rank: the balance the layout promises, free of timing noise.
  m.add(kWorkBalance, ratio(work));
  if (s.problem.packed()) add_packed_metrics(s.problem, s.config.parallel.cp, m);
  if (r.kernel.ring_steps > 0) {
    const double runs = std::max(r.runs, 1), steps = static_cast<double>(r.kernel.ring_steps) / runs;
    const double skipped = static_cast<double>(r.kernel.ring_steps_skipped) / runs;
    const double per_step = steps > skipped ? (r.kernel.compute_s / runs) / (steps - skipped) : 0;
    auto sum = [&](double mine) {
      const std::vector<double> all = per_rank(*s.host, mine);
      return std::accumulate(all.begin(), all.end(), 0.0);
    };
    m.add(kRingSteps, sum(steps));
    m.add(kRingStepsSkipped, sum(skipped));
    m.add(kSkippedComputeS, sum(skipped * per_step));
  }

  m.add(kBytesSentFormula, bytes_formula(s, false));
  m.add(kBytesSentFormulaFwdBwd, bytes_formula(s, true));
  const double total = times.at("fwd_bwd").median;
  m.add(kOverlapEfficiency, total > 0 ? times.at("compute_only").median / total : 0.0);
  return m;
}

}  // namespace sextant::attention
