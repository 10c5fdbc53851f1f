// The cost model: attention TFLOP/s per rank, per-rank compute balance,
// the variant's traffic formula (next to the harness's measured
// bytes_sent_per_rank) and overlap efficiency. Packed sequences: FLOPs of
// the real tokens only, the padding, and the causal work balance of the
// three ways to split a pack over CP (per-sequence zigzag, the stream
// zigzagged as one sequence, contiguous).
#include <algorithm>

#include "suites/attention/attention.h"

namespace sextant::attention {

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
  m.add("padding_rows", static_cast<double>(p.packing.padding()), "rows");
  m.add("padding_fraction", static_cast<double>(p.packing.padding()) / static_cast<double>(p.rows()), "ratio");
  m.add("work_balance_zigzag_per_sequence", pair_balance(p, cp, [&](int r) {
          return cp::shard_chunks(cp::Layout::zigzag, p.packing, cp, r);
        }), "max/min");
  m.add("work_balance_contiguous", pair_balance(p, cp, [&](int r) {
          return cp::shard_chunks(cp::Layout::contiguous, p.packing, cp, r);
        }), "max/min");
  if (p.rows() % (2 * cp) == 0)
    m.add("work_balance_zigzag_stream", pair_balance(p, cp, [&](int r) {
            return cp::shard_chunks(cp::Layout::zigzag, p.rows(), cp, r);
          }), "max/min");
}

}  // namespace

// Bytes a rank sends per iteration under the harness's convention (ring
// all-to-all / all-gather / reduce-scatter send (n-1)/n of the whole buffer,
// isend the message). A = a2a group, P = kv group, n local rows:
//   forward  Ulysses (A-1)/A [q + k + v out; out + lse back]; K, V: (P-1) blocks each
//   backward Ulysses (A-1)/A [q + k + v + dout + lse + D out; dq + dk + dv back];
//            K, V: (P-1) blocks each; dK, dV (f32): ring P hops each, all-gather
//            a reduce-scatter, (P-1) blocks each.
double bytes_formula(const State& s, bool backward_too) {
  const Shard& sh = s.shard;
  const double es = static_cast<double>(dtype_size(s.config.dtype));
  const double rows = static_cast<double>(sh.batch * sh.rows), d = static_cast<double>(s.problem.head_dim);
  const double q = rows * sh.heads * d * es, kv = rows * sh.kv_heads * d * es, kv32 = kv / es * 4;
  const double stat = rows * sh.heads * 4;
  const double a = s.comms.a2a ? s.comms.a2a->size() : 1, p = s.comms.kv ? s.comms.kv->size() : 1;
  const double a2a = (a - 1) / a;
  const double fwd = a2a * (q + 2 * kv) + a2a * (q + stat) + (p - 1) * 2 * kv;
  if (!backward_too) return fwd;
  double bwd = a2a * (2 * q + 2 * kv + 2 * stat) + a2a * (q + 2 * kv) + (p - 1) * 2 * kv;
  if (p > 1) bwd += (s.variant->kv_exchange == cp::KvExchange::ring ? p : p - 1) * 2 * kv32;
  return fwd + bwd;
}

Metrics metrics(State& s, const RegionTimes& times) {
  const double ranks = s.config.ranks, fwd = s.problem.flops_forward(), fwd_bwd = 3.5 * fwd;
  auto tflops = [&](double flops, const std::string& region) {
    const double t = times.at(region).median;
    return t > 0 ? flops / (t * ranks) / 1e12 : 0.0;
  };
  Metrics m;
  m.add("tflops_per_rank", tflops(fwd_bwd, "fwd_bwd"), "TFLOP/s");
  m.add("tflops_per_rank_fwd", tflops(fwd, "fwd"), "TFLOP/s");
  m.add_json("flops_formula", s.problem.packed()
                                  ? "forward sum over packed sequences of 4*b*L^2*h*d x0.5 (real tokens only), fwd_bwd "
                                    "3.5x forward; per rank: / (time * ranks)"
                                  : "forward 4*b*s^2*h*d (x0.5 causal), fwd_bwd 3.5x forward; per rank: / (time * ranks)");

  const RegionStats& r = s.regions.at("fwd_bwd");
  const std::vector<double> compute = per_rank(*s.host, r.kernel.compute_s / std::max(r.runs, 1));
  const std::vector<double> work = per_rank(*s.host, static_cast<double>(r.kernel.pairs) / std::max(r.runs, 1));
  m.add("load_balance", ratio(compute), "max/min");
  m.add("compute_time_max_s", *std::max_element(compute.begin(), compute.end()), "s");
  m.add("compute_time_min_s", *std::min_element(compute.begin(), compute.end()), "s");
  m.add_json("compute_time_per_rank", {{"seconds", compute}});
  // Visible (query, key) pairs per rank: the balance the layout promises, free of timing noise.
  m.add("work_balance", ratio(work), "max/min");
  if (s.problem.packed()) add_packed_metrics(s.problem, s.config.parallel.cp, m);

  m.add("bytes_sent_formula", bytes_formula(s, false), "B");
  m.add("bytes_sent_formula_fwd_bwd", bytes_formula(s, true), "B");
  const double total = times.at("fwd_bwd").median;
  m.add("overlap_efficiency", total > 0 ? times.at("compute_only").median / total : 0.0, "ratio");
  return m;
}

}  // namespace sextant::attention
