// The attention block op (kernels/ops/attention_block.h) on one device,
// forward and backward, against reference/attention.h: one-row inputs, odd
// head counts and dimensions, GQA ratios, tiles that the causal diagonal
// crosses, query blocks at an offset in the sequence (a CP shard: the
// queries see every earlier key), sliding windows causal and two-sided, and the value head
// dim of multi-head latent attention (MLA) other than the query/key head dim,
// and a zigzag CP shard (param zigzag_cp: N): the queries are rank 0's two
// chunks of 2N, the keys every chunk in rank order as an all-gather holds
// them, so the mask has several position runs on both sides (the runs the
// piece driver of cuDNN's path cuts). Offset and zigzag blocks are checked row by row
// (out, lse, dq); whole blocks also dk and dv. On a GPU with
// attention_impl=cudnn, our own kernels' result is the baseline that cuDNN's
// is bounded by, besides the absolute gate against float64.
#include <algorithm>
#include <numeric>

#include "kernels/ops/attention_block.h"
#include "kernels/ops/attention_pieces.h"
#include "reference/attention.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct Shape4 {
  int64_t b, sq, sk, hq, hk, d, q_start;
  bool causal;
  ops::Window window;     // sliding window (params "window", "window_right")
  int64_t dv = 0;         // head dim of v, out, dout (param "v_head_dim"; absent: d)
  int64_t zigzag_cp = 0;  // > 0: a zigzag shard of that CP size (sq = sk / zigzag_cp)
};

struct State {
  Shape4 p{};
  Tensor q_all, k_all, v_all, dout_all;  // host inputs over the whole sequence: [b, sk, hq | hk, d | dv]
  Tensor q, dout;                        // the query block: rows [q_start, q_start + sq), or rank 0's zigzag chunks
  Tensor k, v;                           // the keys as the kernel holds them: k_all, or its chunks in rank order
  std::vector<int64_t> q_pos;            // the query rows' positions in the sequence
  Tensor qd, kd, vd, doutd;              // on the device
  ops::AttentionMask mask;
  ops::AttentionImpl impl = ops::AttentionImpl::own;
  ops::AttentionOut fwd;
  ops::AttentionGrads grads;
};

nlohmann::json shape(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hk, int64_t d, bool causal,
                     ops::Window window = {}, int64_t dv = 0, int64_t zigzag_cp = 0) {
  nlohmann::json j = {{"batch", b},     {"sq", sq},      {"sk", sk},        {"heads", hq},
                      {"kv_heads", hk}, {"head_dim", d}, {"causal", causal}};
  if (window.left != ops::kNoWindow) j["window"] = window.left;
  if (window.right != ops::kNoWindow) j["window_right"] = window.right;
  if (dv != 0) j["v_head_dim"] = dv;
  if (zigzag_cp != 0) j["zigzag_cp"] = zigzag_cp;
  return j;
}
constexpr ops::Window kNoWindow = {};

std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {
      shape(1, 1, 1, 1, 1, 1, false),     // one row, one key, d = 1
      shape(1, 1, 1, 1, 1, 8, true),      // the first causal row sees only itself
      shape(2, 13, 13, 6, 2, 20, true),   // GQA 3, odd sizes
      shape(1, 67, 67, 3, 3, 24, false),  // three heads, MHA
      shape(1, 19, 300, 2, 1, 32, true),  // a block at offset 281: every earlier key, crossing key tiles
      // A window of 1: each query sees itself and the key before it (with 0 a query's one weight is exactly 1,
      // so dq and dk vanish in exact arithmetic and are all rounding).
      shape(1, 70, 70, 2, 1, 16, true, {1}),
      shape(1, 150, 150, 4, 2, 16, true, {40}),           // a window narrower than a tile, its edge across tiles
      shape(1, 19, 300, 2, 1, 32, true, {100}),           // an offset block: the keys before its windows are skipped
      shape(1, 150, 150, 4, 2, 16, false, {40, 17}),      // two-sided, both edges across tiles
      shape(1, 10, 10, 1, 1, 8, false, {8, 8}),           // two-sided, wider than the block: rows see the same keys
      shape(1, 19, 300, 2, 1, 32, false, {100, 3}),       // two-sided offset block: keys on both sides skipped
      shape(2, 90, 90, 4, 4, 24, true, kNoWindow, 16),    // MLA: q/k head dim 3/2 of v's (DeepSeek-V3 192/128)
      shape(1, 33, 200, 4, 2, 12, false, kNoWindow, 8),   // MLA, GQA, an offset block without a mask
      shape(1, 16, 48, 2, 1, 16, true, kNoWindow, 0, 3),  // zigzag CP 3: chunks 0 and 5 of 6 against all six
  };
  if (profile == Profile::qualify)
    out.push_back(shape(1, 64, 4096, 16, 16, 192, true, kNoWindow, 128));         // DeepSeek-V3's MLA head dims
  if (profile != Profile::ci) out.push_back(shape(1, 300, 300, 4, 1, 64, true));  // GQA 4, the diagonal across tiles
  if (profile == Profile::qualify) out.push_back(shape(1, 64, 8192, 16, 16, 128, true));
  return out;
}

Shape4 shape_of(const CaseConfig& c) {
  Shape4 p{c.i("batch"),
           c.i("sq"),
           c.i("sk"),
           c.i("heads"),
           c.i("kv_heads"),
           c.i("head_dim"),
           0,
           c.b("causal"),
           {c.params.value("window", ops::kNoWindow), c.params.value("window_right", ops::kNoWindow)},
           c.params.value("v_head_dim", c.i("head_dim")),
           c.params.value("zigzag_cp", int64_t{0})};
  p.q_start = p.sk - p.sq;  // the block ends where the sequence does
  return p;
}

// A zigzag shard of CP size n cuts the sequence into 2n chunks; rank r holds
// chunks r and 2n - 1 - r.
std::vector<int64_t> zigzag_chunks(int64_t n, int64_t rank) { return {rank, 2 * n - 1 - rank}; }
std::vector<int64_t> zigzag_order(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c : zigzag_chunks(n, r)) out.push_back(c);
  return out;
}
// t's rows of those chunks, in that order: [b, chunks x sk / 2n, ...]
Tensor chunks_of(const Tensor& t, const Shape4& p, const std::vector<int64_t>& chunks) {
  const int64_t len = p.sk / (2 * p.zigzag_cp);
  std::vector<Tensor> parts;
  for (int64_t c : chunks) parts.push_back(narrow(t, 1, c * len, len));
  return concat(parts, 1);
}
std::vector<int64_t> positions_of(const Shape4& p, const std::vector<int64_t>& chunks) {
  const int64_t len = p.sk / (2 * p.zigzag_cp);
  std::vector<int64_t> out;
  for (int64_t c : chunks)
    for (int64_t i = 0; i < len; ++i) out.push_back(c * len + i);
  return out;
}

State setup(CaseContext& ctx) {
  State s;
  s.p = shape_of(ctx.config);
  const Shape4& p = s.p;
  const DType dtype = ctx.config.dtype;
  // Scales as the attention suite's: q.k / sqrt(d) has a standard deviation of about 1.
  s.q_all = input({p.b, p.sk, p.hq, p.d}, dtype, "attention.q", ctx.seed, 2.0);
  s.k_all = input({p.b, p.sk, p.hk, p.d}, dtype, "attention.k", ctx.seed, 1.5);
  s.v_all = input({p.b, p.sk, p.hk, p.dv}, dtype, "attention.v", ctx.seed);
  s.dout_all = input({p.b, p.sk, p.hq, p.dv}, dtype, "attention.dout", ctx.seed);
  if (p.zigzag_cp > 0) {
    const std::vector<int64_t> q_chunks = zigzag_chunks(p.zigzag_cp, 0), k_chunks = zigzag_order(p.zigzag_cp);
    s.q = chunks_of(s.q_all, p, q_chunks), s.dout = chunks_of(s.dout_all, p, q_chunks);
    s.k = chunks_of(s.k_all, p, k_chunks), s.v = chunks_of(s.v_all, p, k_chunks);
    s.q_pos = positions_of(p, q_chunks);
    s.mask = ops::AttentionMask::causal_positions(s.q_pos, positions_of(p, k_chunks));
  } else {
    s.q = narrow(s.q_all, 1, p.q_start, p.sq), s.dout = narrow(s.dout_all, 1, p.q_start, p.sq);
    s.k = s.k_all, s.v = s.v_all;
    s.q_pos.resize(static_cast<size_t>(p.sq));
    std::iota(s.q_pos.begin(), s.q_pos.end(), p.q_start);
    s.mask = ops::AttentionMask::causal_blocks(p.q_start, p.sq, 0, p.sk).with_window(p.window);
    s.mask.causal = p.causal;
    if (!s.mask.positional()) s.mask = ops::AttentionMask::none();
  }
  s.qd = on_device(s.q, ctx.device), s.kd = on_device(s.k, ctx.device), s.vd = on_device(s.v, ctx.device);
  s.doutd = on_device(s.dout, ctx.device);
  s.impl = ops::attention_impl_of(ctx.config.params);
  return s;
}

// out, lse, dq, dk, dv on the host, in the storage dtype (lse f32).
struct Results {
  Tensor out, lse, dq, dk, dv;
};

void compute(const State& s, ops::AttentionImpl impl, ops::AttentionOut& fwd, ops::AttentionGrads& grads) {
  fwd = ops::attention_block_forward(s.qd, s.kd, s.vd, s.mask, s.qd.dtype(), impl);
  grads = ops::attention_block_backward(s.qd, s.kd, s.vd, fwd.out, fwd.lse, s.doutd, s.mask, impl);
}

void run(State& s) { compute(s, s.impl, s.fwd, s.grads); }

Results computed(const State& s, ops::AttentionImpl impl) {
  ops::AttentionOut fwd;
  ops::AttentionGrads grads;
  compute(s, impl, fwd, grads);
  return {on_host(fwd.out), on_host(fwd.lse), on_host(grads.dq).to(s.q.dtype()), on_host(grads.dk).to(s.k.dtype()),
          on_host(grads.dv).to(s.k.dtype())};
}

// The same block through the piece driver cuDNN's path runs
// (kernels/ops/attention_pieces.h), with our host kernels for each piece:
// the pieces, their merge by LSE and the gradient accumulation, checked on
// the host whatever device the case runs on.
Results by_pieces(const State& s, const Results& whole) {
  const Tensor& q = s.q;
  const ops::PieceKernels kernels = ops::own_piece_kernels(q, s.k, s.v, whole.out, s.dout);
  Tensor out, lse;
  ops::forward_by_pieces(q, s.k, s.v, s.mask, kernels, out, lse);
  Tensor dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(s.k.shape(), DType::f32),
         dv = Tensor::zeros(s.v.shape(), DType::f32);
  ops::backward_by_pieces(q, s.k, whole.lse, s.mask, kernels, dq, dk, dv);
  return {out.to(q.dtype()), lse, dq.to(q.dtype()), dk.to(s.k.dtype()), dv.to(s.k.dtype())};
}

void check(State& s, Checker& checker) {
  const Results r = computed(s, s.impl);
  // The baseline: our own kernels where cuDNN's ran, else the result itself.
  const Results base = s.impl == ops::AttentionImpl::own ? r : computed(s, ops::AttentionImpl::own);
  const Shape4& p = s.p;
  for (auto [name, t] : {std::pair{"q", &s.q}, {"k", &s.k}, {"v", &s.v}, {"dout", &s.dout}}) checker.input(name, *t);
  const Tensor &out = r.out, &lse = r.lse, &dq = r.dq;
  if (p.sq == p.sk && p.zigzag_cp == 0) {
    const ref::AttentionResult f = ref::attention_forward(s.q, s.k, s.v, p.causal, {p.window.left, p.window.right});
    const ref::AttentionGradients g =
        ref::attention_backward(s.q, s.k, s.v, s.dout, p.causal, {p.window.left, p.window.right});
    checker.compare("out", OpClass::attention, out, base.out, f.out);
    checker.compare("lse", OpClass::row_stat, lse, base.lse, f.lse);
    checker.compare("dq", OpClass::attention, dq, base.dq, g.dq);
    checker.compare("dk", OpClass::attention, r.dk, base.dk, g.dk);
    checker.compare("dv", OpClass::attention, r.dv, base.dv, g.dv);
    const Results pieces = by_pieces(s, base);  // against the whole block as its baseline
    checker.compare("out_by_pieces", OpClass::attention, pieces.out, base.out, f.out);
    checker.compare("lse_by_pieces", OpClass::row_stat, pieces.lse, base.lse, f.lse);
    checker.compare("dq_by_pieces", OpClass::attention, pieces.dq, base.dq, g.dq);
    checker.compare("dk_by_pieces", OpClass::attention, pieces.dk, base.dk, g.dk);
    checker.compare("dv_by_pieces", OpClass::attention, pieces.dv, base.dv, g.dv);
    return;
  }
  // An offset or zigzag block: its rows of the whole-sequence reference (q
  // and dout are rows q_pos of these).
  checker.input("q_all", s.q_all);
  checker.input("k_all", s.k_all);
  checker.input("v_all", s.v_all);
  checker.input("dout_all", s.dout_all);
  const ref::AttentionRows rows =
      ref::attention_rows(s.q_all, s.k_all, s.v_all, s.dout_all, p.causal, s.q_pos, {p.window.left, p.window.right});
  checker.compare("out", OpClass::attention, out, base.out, rows.out);
  checker.compare("lse", OpClass::row_stat, lse, base.lse, rows.lse);
  checker.compare("dq", OpClass::attention, dq, base.dq, rows.dq);
  const Results pieces = by_pieces(s, base);
  checker.compare("out_by_pieces", OpClass::attention, pieces.out, base.out, rows.out);
  checker.compare("lse_by_pieces", OpClass::row_stat, pieces.lse, base.lse, rows.lse);
  checker.compare("dq_by_pieces", OpClass::attention, pieces.dq, base.dq, rows.dq);
  checker.note("reference", "rows of the whole sequence: dk and dv need every query row and are not checked");
}

double forward_flops(const State& s) {
  const Shape4& p = s.p;
  const double pairs = static_cast<double>(ops::visible_pairs(s.mask, p.sq, p.sk));
  return 2.0 * p.b * p.hq * (p.d + p.dv) * pairs;  // Q K^T and P V
}

CaseDef attention_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "attention",
      .summary = "attention block forward (out, LSE) and backward (dq, dk, dv): GQA, causal offsets, odd shapes",
      .options = {ops::attention_impl_option()},
      .kernel_faults = {KernelFault::attention_forward_scale, KernelFault::attention_backward_softmax_grad,
                        KernelFault::causal_mask_diagonal, KernelFault::attention_pieces_drop_last,
                        KernelFault::attention_window_off_by_one, KernelFault::attention_scale_from_v_dim},
      .table_metrics = {"gflops"},
      .configs =
          [](const SweepRequest& req) {
            std::vector<CaseConfig> configs = op_configs(req, shapes(req.profile), {DType::f32, DType::bf16});
            for (CaseConfig& c : configs) ops::record_attention_impl(req, c.params);
            return configs;
          },
      .validate =
          [](const CaseConfig& c) {
            ops::require_attention_impl_runs(ops::attention_impl_of(c.params), c.device);
            const Shape4 p = shape_of(c);
            if (p.zigzag_cp == 0) return;
            require(p.causal && p.window.left == ops::kNoWindow && p.window.right == ops::kNoWindow,
                    "zigzag_cp: a zigzag shard is causal, without a window");
            require(p.sk % (2 * p.zigzag_cp) == 0 && p.sq * p.zigzag_cp == p.sk,
                    cat("zigzag_cp ", p.zigzag_cp, ": sk (", p.sk, ") must split into ", 2 * p.zigzag_cp,
                        " chunks and sq (", p.sq, ") be two of them"));
          },
      .memory =
          [](const CaseConfig& c) {
            const Shape4 p = shape_of(c);
            return op_memory(c, 8.0 * p.b * p.sk * p.hq * std::max(p.d, p.dv));
          },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            return rates(3.5 * forward_flops(s), 0, times.at("fwd_bwd"));  // backward 2.5x forward
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 70, attention_case);

}  // namespace
}  // namespace sextant::ops_suite
