// Conformance (docs/CONFORMANCE.md): out, lse, dq, dk, dv of the distributed run against
// the float64 whole-sequence reference, with the same kernel at cp = 1 (the
// baseline) setting the bound. For sizes past the full reference, a spot check
// on sampled query rows covers out, lse and dq. Packed sequences are checked
// on their tokens: padding rows are dropped before every comparison.
#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>

#include "harness/assemble.h"
#include "harness/memo.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/attention_block.h"
#include "reference/attention.h"
#include "reference/packed_attention.h"
#include "suites/attention/attention.h"

namespace sextant::attention {

namespace {

struct Results {
  Tensor out, lse, dq, dk, dv;
};

// The results in host memory, where the checker compares them.
Results on_host(const Results& r) {
  auto host = [](const Tensor& t) { return !t.defined() || t.is_host() ? t : t.to(Device::host); };
  return {host(r.out), host(r.lse), host(r.dq), host(r.dk), host(r.dv)};
}

// The token rows of stream results (padding dropped).
Results tokens_of(const Problem& p, const Results& r) {
  auto rows = [&](const Tensor& t, int dim) { return t.defined() ? token_rows(p, t, dim) : t; };
  return {rows(r.out, 1), rows(r.lse, 2), rows(r.dq, 1), rows(r.dk, 1), rows(r.dv, 1)};
}

// This rank's piece of a [b, s, h, d] tensor (or [b, h, s] for a per-row
// statistic) as blocks of the global tensor, one per sequence chunk.
std::vector<Block> blocks_of(const Tensor& local, const Shard& s, bool kv, bool stat) {
  const int64_t h0 = kv ? s.kv_head0 : s.head0;
  std::vector<Block> blocks;
  int64_t at = 0;
  for (const cp::Chunk& c : s.chunks) {
    if (stat) blocks.push_back({narrow(local, 2, at, c.length), {s.batch0, h0, c.start}});
    else blocks.push_back({narrow(local, 1, at, c.length), {s.batch0, c.start, h0, 0}});
    at += c.length;
  }
  return blocks;
}

// Collective: the global tensor on the group's root.
Tensor gather(State& s, Checker& checker, const std::string& name, const Tensor& local, bool kv, bool stat) {
  const Problem& p = s.problem;
  const int64_t heads = kv ? p.kv_heads : p.heads;
  // out, dout, dv hold v's head dim (MLA: other than q's): the local tensor's own.
  const Shape global = stat ? Shape{p.batch, heads, p.rows()} : Shape{p.batch, p.rows(), heads, local.dim(3)};
  Assembled a = assemble(*s.host, blocks_of(local, s.shard, kv, stat), global, local.dtype());
  if (checker.is_root() && (a.uncovered || a.mismatched))
    checker.fail(cat(name, ": ", a.uncovered, " elements uncovered, ", a.mismatched, " replicas disagree"));
  return a.tensor;
}

Results run_distributed(State& s) {
  s.fwd = cp::cp_attention_forward(s.comms, s.options, s.in.q, s.in.k, s.in.v);
  s.grads = cp::cp_attention_backward(s.comms, s.options, s.in.q, s.in.k, s.in.v, s.fwd.out, s.fwd.lse, s.in.dout);
  for (Communicator* sub : {s.a2a_owned.get(), s.kv_owned.get()})
    if (sub) sub->reset_stats();  // the timed regions count their own traffic
  return {s.fwd.out, s.fwd.lse, s.grads.dq, s.grads.dk, s.grads.dv};
}

// The same kernel at cp = 1 through the one-rank communicator, unfaulted, on
// the device the case runs on.
Results baseline(State& s, const Inputs& host_inputs) {
  const cp::Comms comms{s.variant->a2a ? s.self : nullptr, s.variant->kv ? s.self : nullptr};
  cp::Options o = s.options;
  o.fault = cp::Fault::none;
  const Inputs in = to_device(host_inputs, s.device);
  cp::Forward f = cp::cp_attention_forward(comms, o, in.q, in.k, in.v);
  cp::Grads g = cp::cp_attention_backward(comms, o, in.q, in.k, in.v, f.out, f.lse, in.dout);
  return tokens_of(s.problem, on_host({f.out, f.lse, g.dq, g.dk, g.dv}));
}

struct Reference {
  ref::AttentionResult fwd;
  ref::AttentionGradients grads;
};

// The problem's window as the reference takes it (kNoWindow is its -1).
ref::Window reference_window(const Problem& p) { return {p.window.left, p.window.right}; }

// What the float64 reference depends on: the problem and its rounded
// inputs, not the variant or layout (the sweep repeats problems).
struct ReferenceKey {
  int64_t batch, seq, heads, kv_heads, head_dim, v_head_dim;
  bool causal;
  ops::Window window;
  std::vector<int64_t> seq_lens;
  DType dtype;
  uint64_t seed;
  bool operator==(const ReferenceKey&) const = default;
};

const Reference& full_reference(const Problem& p, DType dtype, uint64_t seed, const Inputs& in) {
  static Memo<ReferenceKey, Reference> memo(8);
  const ReferenceKey key{p.batch,  p.seq,    p.heads,    p.kv_heads, p.head_dim, p.v_head_dim,
                         p.causal, p.window, p.seq_lens, dtype,      seed};
  return memo.get(key, [&] {
    if (p.packed())
      return Reference{ref::packed_attention_forward(in.q, in.k, in.v, p.seq_lens, p.window.left),
                       ref::packed_attention_backward(in.q, in.k, in.v, in.dout, p.seq_lens, p.window.left)};
    return Reference{ref::attention_forward(in.q, in.k, in.v, p.causal, reference_window(p)),
                     ref::attention_backward(in.q, in.k, in.v, in.dout, p.causal, reference_window(p))};
  });
}

// Sampled query positions, always with the first and last row (the one that
// sees a single key under the causal mask, and the one that sees them all).
std::vector<int64_t> sample_rows(int64_t seq, uint64_t seed) {
  std::vector<int64_t> rows = {0, seq - 1};
  for (uint64_t i = 0; i < 30; ++i) {
    const uint64_t bits = random_bits(seed, tensor_id("attention.rows"), i);
    rows.push_back(static_cast<int64_t>(bits % static_cast<uint64_t>(seq)));
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

Tensor select_rows(const Tensor& t, int dim, const std::vector<int64_t>& rows) {
  std::vector<Tensor> parts;
  for (int64_t r : rows) parts.push_back(narrow(t, dim, r, 1));
  return concat(parts, dim);
}

// The stream row of every sampled token, and the block mask of those rows
// against the whole stream (padding rows see nothing).
struct SpotRows {
  std::vector<int64_t> rows;
  ops::AttentionMask mask;
};
SpotRows spot_rows(const Problem& p, const std::vector<int64_t>& tokens) {
  std::vector<int64_t> keys(static_cast<size_t>(p.rows()));
  std::iota(keys.begin(), keys.end(), 0);
  if (!p.packed())
    return {tokens, p.causal         ? ops::AttentionMask::causal_positions(tokens, keys).with_window(p.window)
                    : p.window.any() ? ops::AttentionMask::positions(tokens, keys).with_window(p.window)
                                     : ops::AttentionMask::none()};
  const std::vector<int64_t> token0 = p.packing.cu_seqlens(), row0 = p.packing.cu_seqlens_padded();
  std::vector<int64_t> rows;
  for (int64_t t : tokens) {
    size_t i = 0;
    while (t >= token0[i + 1]) ++i;
    rows.push_back(row0[i] + t - token0[i]);
  }
  return {rows, ops::AttentionMask::causal_packed(rows, cp::sequence_of_rows(p.packing, rows), keys,
                                                  cp::sequence_of_rows(p.packing, keys))
                    .with_window(p.window)};
}

// The block kernel at cp = 1 on the sampled query rows against every key of the stream.
Results spot_baseline(const Inputs& host_inputs, const SpotRows& spot, DType dtype, Device device,
                      ops::AttentionImpl impl) {
  const Inputs in = to_device(host_inputs, device);
  const Tensor q = select_rows(in.q, 1, spot.rows), dout = select_rows(in.dout, 1, spot.rows);
  ops::AttentionOut f = ops::attention_block_forward(q, in.k, in.v, spot.mask, dtype, impl);
  Tensor dq = Tensor::zeros(q.shape(), DType::f32, device);
  Tensor dk = Tensor::zeros(in.k.shape(), DType::f32, device), dv = Tensor::zeros(in.v.shape(), DType::f32, device);
  ops::attention_block_backward_accumulate(q, in.k, in.v, f.out, dout, f.lse, ops::attention_delta(f.out, dout),
                                           spot.mask, dq, dk, dv, impl);
  return on_host({f.out, f.lse, dq.to(dtype), {}, {}});
}

// dist: token rows; stream: the whole stream's inputs (the baseline's).
void check_full(State& s, Checker& checker, const Results& dist, const Inputs& stream) {
  const Problem& p = s.problem;
  const Inputs in{token_rows(p, stream.q, 1), token_rows(p, stream.k, 1), token_rows(p, stream.v, 1),
                  token_rows(p, stream.dout, 1)};
  for (auto [name, t] : {std::pair{"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"dout", &in.dout}})
    checker.input(name, *t);  // what the reference reads: every token row, padding dropped
  const Reference& ref = full_reference(p, s.config.dtype, s.seed, in);
  const Results base = baseline(s, stream);
  checker.compare("out", OpClass::attention, dist.out, base.out, ref.fwd.out);
  checker.compare("lse", OpClass::row_stat, dist.lse, base.lse, ref.fwd.lse);
  checker.compare("dq", OpClass::attention, dist.dq, base.dq, ref.grads.dq);
  checker.compare("dk", OpClass::attention, dist.dk, base.dk, ref.grads.dk);
  checker.compare("dv", OpClass::attention, dist.dv, base.dv, ref.grads.dv);
  checker.note("reference", "full");
}

void check_spot(State& s, Checker& checker, const Results& dist, const Inputs& stream) {
  const Problem& p = s.problem;
  const std::vector<int64_t> tokens = sample_rows(p.seq, s.seed);
  const Inputs in{token_rows(p, stream.q, 1), token_rows(p, stream.k, 1), token_rows(p, stream.v, 1),
                  token_rows(p, stream.dout, 1)};
  for (auto [name, t] : {std::pair{"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"dout", &in.dout}})
    checker.input(name, *t);  // what the reference reads: every token row, padding dropped
  // ... and which of those rows were sampled (token indices, in the order checked).
  checker.input("query_rows", Tensor::from_values({static_cast<int64_t>(tokens.size())},
                                                  std::vector<double>(tokens.begin(), tokens.end()), DType::f64));
  const ref::AttentionRows ref =
      p.packed() ? ref::packed_attention_rows(in.q, in.k, in.v, in.dout, p.seq_lens, tokens, p.window.left)
                 : ref::attention_rows(in.q, in.k, in.v, in.dout, p.causal, tokens, reference_window(p));
  const Results base = spot_baseline(stream, spot_rows(p, tokens), s.config.dtype, s.device, p.attention_impl);
  checker.compare("out", OpClass::attention, select_rows(dist.out, 1, tokens), base.out, ref.out);
  checker.compare("lse", OpClass::row_stat, select_rows(dist.lse, 2, tokens), base.lse, ref.lse);
  checker.compare("dq", OpClass::attention, select_rows(dist.dq, 1, tokens), base.dq, ref.dq);
  checker.note("reference",
               cat("spot: ", tokens.size(), " sampled query rows; dk and dv need every row and are not checked"));
}

// dist: the gathered stream rows, padding included.
void check_stream_padding(const Problem& p, const Results& dist, Checker& checker) {
  std::vector<int64_t> padding;
  for (int64_t row = 0; row < p.rows(); ++row)
    if (cp::token_of_row(p.packing, row) < 0) padding.push_back(row);
  check_padding_rows(checker, "", padding, dist.out, dist.lse, dist.dq, dist.dk, dist.dv);
}

}  // namespace

void check_padding_rows(Checker& checker, const std::string& what, const std::vector<int64_t>& rows, const Tensor& out,
                        const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  if (rows.empty()) return;
  auto count = [&](const char* name, const Tensor& t, int dim, bool stat) {
    if (!t.defined()) return;
    const Tensor picked = select_rows(t.is_host() ? t : t.to(Device::host), dim, rows).to(DType::f64);
    int64_t wrong = 0;
    for (double x : picked.to_vector()) wrong += stat ? !(std::isinf(x) && x < 0) : x != 0.0;
    checker.exact(cat(what, name, " of ", rows.size(), " padding rows (", stat ? "-inf" : "exactly 0", ")"), wrong,
                  picked.numel());
  };
  count("out", out, 1, false);
  count("lse", lse, 2, true);
  count("dq", dq, 1, false);
  count("dk", dk, 1, false);
  count("dv", dv, 1, false);
}

void check(State& s, Checker& checker) {
  const Results local = run_distributed(s);
  Results dist{gather(s, checker, "out", local.out, false, false), gather(s, checker, "lse", local.lse, false, true),
               gather(s, checker, "dq", local.dq, false, false), gather(s, checker, "dk", local.dk, true, false),
               gather(s, checker, "dv", local.dv, true, false)};
  if (!checker.is_root()) return;
  if (s.problem.packed()) check_stream_padding(s.problem, dist, checker);
  dist = tokens_of(s.problem, dist);
  const Inputs stream = make_inputs(s.problem, whole(s.problem), s.config.dtype, s.seed);
  if (s.problem.packed()) checker.note("padding_rows", s.problem.packing.padding());
  if (s.problem.reference == ReferenceRows::spot) check_spot(s, checker, dist, stream);
  else check_full(s, checker, dist, stream);
}

}  // namespace sextant::attention
