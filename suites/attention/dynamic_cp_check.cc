// attention/dynamic_cp: conformance of both groupings against the float64
// reference of every sequence on its own, and the metrics that compare them.
#include <algorithm>
#include <numeric>

#include "harness/assemble.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/random.h"
#include "reference/packed_attention.h"
#include "suites/attention/attention.h"
#include "suites/attention/dynamic_cp.h"

namespace sextant::attention::dynamic {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kSpeedupVsStatic =
    define_metric({"attention", "speedup_vs_static", "x", Better::higher,
                   "static CP time / dynamic CP time for the same packed microbatches (measured)", "dynamic_cp"});
const MetricDef& kSpeedupVsStaticModel = define_metric({"attention", "speedup_vs_static_model", "x", Better::neither,
                                                        "the same from the scheduler's cost model", "dynamic_cp"});
const MetricDef& kTimeStaticS = define_metric(
    {"attention", "time_static_s", "s", Better::lower, "all microbatches on the full static CP group", "dynamic_cp"});
const MetricDef& kTimeDynamicS = define_metric(
    {"attention", "time_dynamic_s", "s", Better::lower, "all microbatches on CP groups sized per bin", "dynamic_cp"});
const MetricDef& kTflopsPerRank =
    define_metric({"attention", "tflops_per_rank", "TFLOP/s", Better::higher,
                   "attention FLOP/s of the dynamic run per rank, real tokens only", "dynamic_cp"});
const MetricDef& kFlopsFormula = define_metric({"attention", "flops_formula", "json", Better::neither,
                                                "the FLOP count the TFLOP/s figure uses, as text", "dynamic_cp"});
const MetricDef& kLoadBalance =
    define_metric({"attention", "load_balance", "max/min", Better::lower,
                   "max / min over ranks of the attention compute time of the dynamic run", "dynamic_cp"});
const MetricDef& kBusyFractionDynamicModel =
    define_metric({"attention", "busy_fraction_dynamic_model", "ratio", Better::neither,
                   "the scheduler's mean busy fraction of the dynamic grouping", "dynamic_cp"});
const MetricDef& kBusyFractionStaticModel =
    define_metric({"attention", "busy_fraction_static_model", "ratio", Better::neither,
                   "the scheduler's mean busy fraction of the static grouping", "dynamic_cp"});
const MetricDef& kPaddingRowsStatic =
    define_metric({"attention", "padding_rows_static", "rows", Better::neither,
                   "rows padded so every sequence splits into 2 cp chunks, static grouping", "dynamic_cp"});
const MetricDef& kPaddingRowsDynamic = define_metric(
    {"attention", "padding_rows_dynamic", "rows", Better::neither, "the same, dynamic grouping", "dynamic_cp"});
const MetricDef& kBinsPerGroupDynamic =
    define_metric({"attention", "bins_per_group_dynamic", "json", Better::neither,
                   "packed bins per CP group size in the dynamic grouping", "dynamic_cp"});
const MetricDef& kLongestSequence = define_metric(
    {"attention", "longest_sequence", "json", Better::neither, "the longest packed sequence (tokens)", "dynamic_cp"});
// Busy fraction of one region: a rank's attention compute seconds per run over the region's time.
struct BusyMetrics {
  const char* region;
  const MetricDef& mean;
  const MetricDef& min;
  const MetricDef& per_rank;
};
const BusyMetrics kBusyDynamic{
    "dynamic",
    define_metric({"attention", "busy_fraction_dynamic", "ratio", Better::higher,
                   "attention compute / region time, mean over ranks, dynamic grouping", "dynamic_cp"}),
    define_metric({"attention", "busy_fraction_dynamic_min", "ratio", Better::neither,
                   "the least busy rank's fraction, dynamic grouping", "dynamic_cp"}),
    define_metric({"attention", "busy_fraction_dynamic_per_rank", "json", Better::neither,
                   "busy fraction per rank, dynamic grouping", "dynamic_cp"})};
const BusyMetrics kBusyStatic{
    "static",
    define_metric({"attention", "busy_fraction_static", "ratio", Better::neither,
                   "attention compute / region time, mean over ranks, static grouping", "dynamic_cp"}),
    define_metric({"attention", "busy_fraction_static_min", "ratio", Better::neither,
                   "the least busy rank's fraction, static grouping", "dynamic_cp"}),
    define_metric({"attention", "busy_fraction_static_per_rank", "json", Better::neither,
                   "busy fraction per rank, static grouping", "dynamic_cp"})};
}  // namespace

namespace {

struct Results {
  Tensor out, lse, dq, dk, dv;
};

// Rows [row, row + length) of a bin's shard that hold the global tokens
// [token, token + length).
struct Piece {
  int64_t row = 0, token = 0, length = 0;
};
std::vector<Piece> pieces_of(const BinRun& b) {
  std::vector<Piece> out;
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    const int64_t t = b.tokens[i];
    if (t < 0) continue;
    if (!out.empty() && out.back().row + out.back().length == static_cast<int64_t>(i) &&
        out.back().token + out.back().length == t)
      ++out.back().length;
    else out.push_back({static_cast<int64_t>(i), t, 1});
  }
  return out;
}

// Collective over the pool: one result of every bin, as the global token tensor on the root.
// dim: the head dim of the tensor (q, k: head_dim; v, out: v_head_dim); stat: a [1, h, T] statistic.
Tensor gather(State& s, Checker& checker, const std::string& name, const std::vector<BinRun>& bins,
              Tensor (*pick)(const BinRun&), bool stat, int64_t dim = 0) {
  const Problem& p = s.problem;
  std::vector<Block> blocks;
  DType dtype = s.config.dtype;
  for (const BinRun& b : bins) {
    Tensor t = pick(b);
    if (!t.is_host()) t = t.to(Device::host);
    dtype = t.dtype();
    for (const Piece& piece : pieces_of(b))
      blocks.push_back(stat ? Block{narrow(t, 2, piece.row, piece.length), {0, 0, piece.token}}
                            : Block{narrow(t, 1, piece.row, piece.length), {0, piece.token, 0, 0}});
  }
  if (stat) dtype = DType::f32;
  const Shape global = stat ? Shape{1, p.heads, p.tokens()} : Shape{1, p.tokens(), p.heads, dim};
  Assembled a = assemble(*s.host, blocks, global, dtype);
  if (checker.is_root() && (a.uncovered || a.mismatched))
    checker.fail(cat(name, ": ", a.uncovered, " elements uncovered, ", a.mismatched, " replicas disagree"));
  return a.tensor;
}

Results gather_all(State& s, Checker& checker, const std::string& grouping, const std::vector<BinRun>& bins) {
  const int64_t d = s.problem.head_dim, dv = s.problem.v_head_dim;
  return {gather(
              s, checker, grouping + ".out", bins, [](const BinRun& b) { return b.fwd.out; }, false, dv),
          gather(
              s, checker, grouping + ".lse", bins, [](const BinRun& b) { return b.fwd.lse; }, true),
          gather(
              s, checker, grouping + ".dq", bins, [](const BinRun& b) { return b.grads.dq; }, false, d),
          gather(
              s, checker, grouping + ".dk", bins, [](const BinRun& b) { return b.grads.dk; }, false, d),
          gather(
              s, checker, grouping + ".dv", bins, [](const BinRun& b) { return b.grads.dv; }, false, dv)};
}

struct Inputs {
  Tensor q, k, v, dout;  // [1, T, h, d] (v, dout: d_v): every token of the global batch
};
Inputs whole_inputs(const State& s, Device device) {
  const Problem& p = s.problem;
  auto make = [&](const char* name, double scale, int64_t dim) {
    const Shape shape{1, p.tokens(), p.heads, dim};
    return ops::random_block(shape, {0, 0, 0, 0}, shape, s.config.dtype, {s.seed, tensor_id(name), scale}, device);
  };
  return {make("attention.q", 2.0, p.head_dim), make("attention.k", 1.5, p.head_dim),
          make("attention.v", 1.0, p.v_head_dim), make("attention.dout", 1.0, p.v_head_dim)};
}

// The same kernel on one rank over the whole batch packed without padding, unfaulted.
Results baseline(State& s) {
  const Inputs in = whole_inputs(s, s.device);
  cp::Options o;
  o.causal = true;
  o.layout = cp::Layout::contiguous;
  o.packing = cp::pack_sequences(s.problem.all_lengths(), 1);
  o.seq = o.packing.rows();
  o.window = ops::Window::causal(s.problem.window);
  o.attention_impl = s.problem.attention_impl;
  const cp::Comms comms{nullptr, s.self};
  cp::Forward f = cp::cp_attention_forward(comms, o, in.q, in.k, in.v);
  cp::Grads g = cp::cp_attention_backward(comms, o, in.q, in.k, in.v, f.out, f.lse, in.dout);
  auto host = [](const Tensor& t) { return t.is_host() ? t : t.to(Device::host); };
  return {host(f.out), host(f.lse), host(g.dq), host(g.dk), host(g.dv)};
}

void compare(Checker& checker, const std::string& grouping, const Results& dist, const Results& base,
             const ref::AttentionResult& fwd, const ref::AttentionGradients& grads) {
  checker.compare(grouping + ".out", OpClass::attention, dist.out, base.out, fwd.out);
  checker.compare(grouping + ".lse", OpClass::row_stat, dist.lse, base.lse, fwd.lse);
  checker.compare(grouping + ".dq", OpClass::attention, dist.dq, base.dq, grads.dq);
  checker.compare(grouping + ".dk", OpClass::attention, dist.dk, base.dk, grads.dk);
  checker.compare(grouping + ".dv", OpClass::attention, dist.dv, base.dv, grads.dv);
}

}  // namespace

void check(State& s, Checker& checker) {
  run(s.fixed_runs, nullptr);
  run(s.dynamic_runs, nullptr);
  for (const auto& [grouping, bins] : {std::pair{"static.", &s.fixed_runs}, {"dynamic.", &s.dynamic_runs}})
    for (const BinRun& b : *bins) {
      std::vector<int64_t> padding;  // this rank's padding rows of the bin
      for (size_t i = 0; i < b.tokens.size(); ++i)
        if (b.tokens[i] < 0) padding.push_back(static_cast<int64_t>(i));
      check_padding_rows(checker, grouping, padding, b.fwd.out, b.fwd.lse, b.grads.dq, b.grads.dk, b.grads.dv);
    }
  const Results fixed = gather_all(s, checker, "static", s.fixed_runs);
  const Results dynamic = gather_all(s, checker, "dynamic", s.dynamic_runs);
  if (!checker.is_root()) return;
  const Inputs in = whole_inputs(s, Device::host);
  const std::vector<int64_t> lengths = s.problem.all_lengths();
  // What the reference reads: every sequence of every microbatch laid end to end.
  for (auto [name, t] : {std::pair{"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"dout", &in.dout}})
    checker.input(name, *t);
  checker.input("seq_lens", Tensor::from_values({static_cast<int64_t>(lengths.size())},
                                                std::vector<double>(lengths.begin(), lengths.end()), DType::f64));
  const int64_t window = s.problem.window;
  const ref::AttentionResult fwd = ref::packed_attention_forward(in.q, in.k, in.v, lengths, window);
  const ref::AttentionGradients grads = ref::packed_attention_backward(in.q, in.k, in.v, in.dout, lengths, window);
  const Results base = baseline(s);
  compare(checker, "static", fixed, base, fwd, grads);
  compare(checker, "dynamic", dynamic, base, fwd, grads);
  checker.note("reference", cat("every one of the ", lengths.size(), " sequences on its own"));
}

namespace {

std::vector<double> per_rank(Communicator& host, double mine) {
  Tensor all = Tensor::empty({host.size()}, DType::f64);
  host.all_gather(Tensor::from_values({1}, {mine}, DType::f64), all);
  return all.to_vector();
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / std::max<size_t>(v.size(), 1);
}

// Rows of padding in a schedule's bins (zigzag pads each sequence to 2g rows).
int64_t padding_rows(const cp::Schedule& schedule, const std::vector<int64_t>& lengths) {
  int64_t rows = 0;
  for (const cp::Bin& b : schedule.bins) {
    if (b.group == 1) continue;
    for (int i : b.sequences) {
      const int64_t n = lengths[static_cast<size_t>(i)], m = 2 * b.group;
      rows += (n + m - 1) / m * m - n;
    }
  }
  return rows;
}

nlohmann::json bins_per_group(const cp::Schedule& schedule) {
  std::map<int, int> count;
  for (const cp::Bin& b : schedule.bins) ++count[b.group];
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [g, n] : count) out[std::to_string(g)] = n;
  return out;
}

}  // namespace

Metrics metrics(State& s, const RegionTimes& times) {
  const Problem& p = s.problem;
  const std::vector<int64_t> lengths = p.all_lengths();
  double squares = 0;
  for (int64_t n : lengths) squares += static_cast<double>(n) * n;
  // real tokens only: 2 (d + d_v) per visible pair (Q K^T and P V)
  const double fwd_bwd_flops = 3.5 * 2.0 * squares * p.heads * (p.head_dim + p.v_head_dim) * 0.5;
  const double t_dynamic = times.at("dynamic").median, t_static = times.at("static").median;
  Metrics m;
  m.add(kSpeedupVsStatic, t_dynamic > 0 ? t_static / t_dynamic : 0.0);
  m.add(kSpeedupVsStaticModel, s.dynamic.makespan > 0 ? s.fixed.makespan / s.dynamic.makespan : 0.0);
  m.add(kTimeStaticS, t_static);
  m.add(kTimeDynamicS, t_dynamic);
  m.add(kTflopsPerRank, t_dynamic > 0 ? fwd_bwd_flops / (t_dynamic * s.config.ranks) / 1e12 : 0.0);
  m.add_json(kFlopsFormula,
             "sum over sequences of 4*L^2*h*d x0.5 (causal, real tokens), fwd_bwd 3.5x; per rank: "
             "/ (dynamic time * ranks)");
  // Busy fraction: a rank's attention compute seconds per run over the region's time.
  for (const BusyMetrics& defs : {kBusyDynamic, kBusyStatic}) {
    const std::string region = defs.region;
    const cp::Stats& st = s.stats[region];
    const double runs = std::max(s.runs[region], 1);
    const double t = times.at(region).median;
    const std::vector<double> busy = per_rank(*s.host, t > 0 ? st.compute_s / runs / t : 0.0);
    m.add(defs.mean, mean(busy));
    m.add(defs.min, *std::min_element(busy.begin(), busy.end()));
    m.add_json(defs.per_rank, busy);
    if (region == "dynamic") {
      const std::vector<double> compute = per_rank(*s.host, st.compute_s / runs);
      const double lo = *std::min_element(compute.begin(), compute.end());
      m.add(kLoadBalance, lo > 0 ? *std::max_element(compute.begin(), compute.end()) / lo : 0.0);
    }
  }
  m.add(kBusyFractionDynamicModel, mean(s.dynamic.busy_fraction()));
  m.add(kBusyFractionStaticModel, mean(s.fixed.busy_fraction()));
  m.add(kPaddingRowsStatic, static_cast<double>(padding_rows(s.fixed, lengths)));
  m.add(kPaddingRowsDynamic, static_cast<double>(padding_rows(s.dynamic, lengths)));
  m.add_json(kBinsPerGroupDynamic, bins_per_group(s.dynamic));
  m.add_json(kLongestSequence, *std::max_element(lengths.begin(), lengths.end()));
  return m;
}

}  // namespace sextant::attention::dynamic
