// attention/dynamic_cp: sizes, bad-input rules, the bins this rank runs and
// their inputs, and the case table. check and metrics: dynamic_cp_check.cc.
#include "suites/attention/dynamic_cp.h"

#include <algorithm>
#include <numeric>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/attention/packing.h"
#include "kernels/ops/attention_block.h"
#include "kernels/ops/random.h"
#include "suites/attention/attention.h"

namespace sextant::attention::dynamic {

cp::FaultSite ring_site(int64_t window) {
  return cp::fault_site(cp::variant_info(cp::Variant::p2p), 2, true, cp::Layout::zigzag, 2,
                        ops::Window::causal(window));
}

namespace {

struct Sizes {
  int64_t seq, microbatches, heads, head_dim;
};
Sizes default_sizes(Profile profile) {
  if (profile == Profile::ci) return {128, 4, 4, 16};
  if (profile == Profile::qualify) return {4096, 16, 16, 64};
  return {512, 8, 8, 32};
}

// The lengths of microbatch m: an explicit list is the same for every
// microbatch; zipf:N draws each from its own seed.
std::vector<int64_t> lengths_of(const std::string& spec, int64_t seq, uint64_t seed, int64_t m) {
  return cp::parse_seq_lens(spec, seq, random_bits(seed, tensor_id("dynamic_cp.microbatch"), static_cast<uint64_t>(m)));
}

std::string text_option(const SweepRequest& req, const std::string& key) {
  const nlohmann::json& v = req.options.at(key);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool power_of_two(int n) { return n >= 1 && (n & (n - 1)) == 0; }

// The scheduler's default cost of one ring step in causal pairs: about one
// message latency (~20 us between MPI ranks on a CPU node) at ~20 ns per
// pair (f32, head_dim 32). --set ring_step models another machine.
constexpr double kRingStepPairs = 1000;

// The CUDA kernels take a block's mask as at most ops::kCudaMaskRuns runs of
// positions; a rank's rows of a bin hold up to three per sequence (its two
// zigzag chunks, one split by padding), one per sequence in a group of one.
void require_cuda_mask_runs(const Problem& p) {
  const std::vector<int64_t> all = p.all_lengths();
  for (const cp::Schedule& s : {cp::static_schedule(p.microbatch_sequences(), all, p.cp, p.dp),
                                cp::dynamic_schedule(all, p.capacity(), p.ranks())})
    for (const cp::Bin& b : s.bins) {
      const int64_t runs = static_cast<int64_t>(b.sequences.size()) * (b.group > 1 ? 3 : 1);
      require(runs <= ops::kCudaMaskRuns,
              cat("--set seq_lens=", p.seq_lens, ": a bin of ", b.sequences.size(), " sequences on ", b.group,
                  " ranks may form ", runs, " runs of positions, more than the ", ops::kCudaMaskRuns,
                  " the CUDA attention mask holds"));
    }
}

}  // namespace

std::vector<int64_t> Problem::all_lengths() const {
  std::vector<int64_t> all;
  for (const std::vector<int64_t>& mb : lengths) all.insert(all.end(), mb.begin(), mb.end());
  return all;
}

std::vector<std::vector<int>> Problem::microbatch_sequences() const {
  std::vector<std::vector<int>> out;
  int next = 0;
  for (const std::vector<int64_t>& mb : lengths) {
    out.emplace_back();
    for (size_t i = 0; i < mb.size(); ++i) out.back().push_back(next++);
  }
  return out;
}

Problem Problem::of(const CaseConfig& c) {
  Problem p;
  p.seq = c.i("seq"), p.microbatches = c.i("microbatches"), p.seq_lens = c.s("seq_lens_spec");
  p.heads = c.i("heads"), p.head_dim = c.i("head_dim");
  p.v_head_dim = c.params.value("v_head_dim", p.head_dim);
  p.window = c.params.value("window", ops::AttentionMask::kNoWindow);
  p.cp = c.parallel.cp, p.dp = c.parallel.dp;
  p.ring_step = c.f("ring_step");
  p.attention_impl = ops::attention_impl_of(c.params);
  p.lengths = c.params.at("lengths").get<std::vector<std::vector<int64_t>>>();
  return p;
}

// Long-tailed lengths (zipf:N) next to full-length sequences (no gain to
// expect), on a static CP group spanning the rank count. The long-tailed
// lengths also run MLA's head dims (q/k 3/2 of v's) unless --set v_head_dim
// names one for every instance, and a sliding window of seq/8 unless --set
// window names one for every instance.
std::vector<CaseConfig> sweep(const SweepRequest& req) {
  const Sizes d = default_sizes(req.profile);
  const int64_t seq = req.get<int64_t>("seq", d.seq), microbatches = req.get<int64_t>("microbatches", d.microbatches);
  std::vector<std::string> specs = {cat("zipf:", std::clamp<int64_t>(seq / 16, 1, 32)), cat(seq)};
  // The attention suite's stream: a sequence of one token and one of none among longer ones.
  if (const std::string spec = padded_stream_spec(seq); !spec.empty()) specs.push_back(spec);
  if (req.options.contains("seq_lens")) specs = {text_option(req, "seq_lens")};
  const ParallelConfig parallel = req.parallel ? *req.parallel : ParallelConfig{1, req.ranks, 1, 1};
  const int64_t head_dim = req.get<int64_t>("head_dim", d.head_dim);
  // Its sequences attend causally: a window with keys after the query (RIGHT 1 or more) runs nothing here.
  const std::optional<ops::Window> user_window = window_option(req);
  if (user_window && user_window->right >= 1) return {};
  const bool user_dv = req.options.contains("v_head_dim");
  const int64_t none = ops::AttentionMask::kNoWindow;
  std::vector<CaseConfig> out;
  for (const std::string& spec : specs) {
    struct Shape {
      int64_t dqk, dv, window;
    };
    const int64_t window = user_window ? user_window->left : none;
    std::vector<std::vector<int64_t>> lengths;
    for (int64_t m = 0; m < microbatches; ++m) lengths.push_back(lengths_of(spec, seq, req.seed, m));
    std::vector<Shape> shapes = {{head_dim, req.get<int64_t>("v_head_dim", head_dim), window}};
    if (!user_dv && spec == specs.front() && mla_qk_head_dim(head_dim) > 0)
      shapes.push_back({mla_qk_head_dim(head_dim), head_dim, window});
    if (!user_window && spec == specs.front() && seq >= 8) shapes.push_back({head_dim, head_dim, seq / 8});
    for (auto [dqk, dv, w] : shapes) {
      if (!cp::faults().shows(cp::faults().parse(req.fault), ring_site(w))) continue;  // a fault runs where it shows
      for (DType dtype : req.dtypes_or({DType::f32})) {
        CaseConfig c;
        c.params = {{"variant", "dynamic_cp"},
                    {"layout", "zigzag"},
                    {"causal", true},
                    {"seq", seq},
                    {"microbatches", microbatches},
                    {"seq_lens_spec", spec},
                    {"heads", req.get<int64_t>("heads", d.heads)},
                    {"kv_heads", req.get<int64_t>("heads", d.heads)},
                    {"head_dim", dqk},
                    {"capacity", parallel.cp > 0 ? seq / parallel.cp : 0},
                    {"ring_step", req.get<double>("ring_step", kRingStepPairs)},
                    {"lengths", lengths}};
        if (dv != dqk || user_dv) c.params["v_head_dim"] = dv;
        if (w != none) c.params["window"] = w;
        ops::record_attention_impl(req, c.params);
        c.parallel = parallel;
        c.ranks = req.ranks;
        c.dtype = dtype;
        out.push_back(c);
      }
    }
  }
  return out;
}

void validate(const CaseConfig& c) {
  const ParallelConfig& par = c.parallel;
  const Problem p = Problem::of(c);
  require(par.tp == 1 && par.pp == 1 && par.ep == 1,
          cat("attention/dynamic_cp runs dp x cp ranks: --tp ", par.tp, " and --pp ", par.pp, " must be 1"));
  require(power_of_two(p.ranks()), cat("attention/dynamic_cp: the pool of dp x cp = ", p.ranks(),
                                       " ranks must be a power of two (groups are aligned power-of-two blocks)"));
  require_positive("--seq", p.seq);
  require_positive("--set microbatches", p.microbatches);
  require_positive("--heads", p.heads);
  require_positive("--head-dim", p.head_dim);
  require_positive("--set v_head_dim", p.v_head_dim);
  require(p.seq % (2 * p.cp) == 0, cat("--seq ", p.seq, " must be divisible by 2*cp = ", 2 * p.cp,
                                       " (a group's capacity must split into its zigzag chunks)"));
  require(p.ring_step >= 0, cat("--set ring_step=", p.ring_step, " must not be negative"));
  ops::require_attention_impl_runs(p.attention_impl, c.device);
  for (const std::vector<int64_t>& mb : p.lengths) cp::require_packed_lengths("--set seq_lens", mb, p.seq);
  cp::faults().parse(c.fault);
  if (c.device == Device::cuda) require_cuda_mask_runs(p);
}

namespace {

// The global token held by each row of `chunks` of a bin's packed stream
// (-1 for padding); start: the first global token of every sequence.
std::vector<int64_t> tokens_of(const cp::Bin& bin, const cp::Packing& packing, const std::vector<cp::Chunk>& chunks,
                               const std::vector<int64_t>& start) {
  const std::vector<int64_t> cu = packing.cu_seqlens();
  std::vector<int64_t> tokens;
  for (const cp::Chunk& c : chunks)
    for (int64_t row = c.start; row < c.start + c.length; ++row) {
      const int64_t t = cp::token_of_row(packing, row);  // token of the bin's stream
      if (t < 0) {
        tokens.push_back(-1);
        continue;
      }
      size_t k = 0;
      while (t >= cu[k + 1]) ++k;
      tokens.push_back(start[static_cast<size_t>(bin.sequences[k])] + t - cu[k]);
    }
  return tokens;
}

// Rows of a global [1, T, h, dim] tensor at these tokens (zeros for -1), as
// consecutive pieces.
Tensor gather_tokens(const Problem& p, const std::vector<int64_t>& tokens, int64_t dim, const char* name, double scale,
                     DType dtype, uint64_t seed, Device device) {
  const RandomSpec spec{seed, tensor_id(name), scale};
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tokens.size();) {
    size_t j = i + 1;
    while (j < tokens.size() && (tokens[i] < 0 ? tokens[j] < 0 : tokens[j] == tokens[j - 1] + 1)) ++j;
    const int64_t n = static_cast<int64_t>(j - i);
    parts.push_back(tokens[i] < 0 ? Tensor::zeros({1, n, p.heads, dim}, dtype, device)
                                  : ops::random_block({1, p.tokens(), p.heads, dim}, {0, tokens[i], 0, 0},
                                                      {1, n, p.heads, dim}, dtype, spec, device));
    i = j;
  }
  return concat(parts, 1);
}

std::vector<BinRun> runs_of(State& s, const cp::Schedule& schedule, int rank) {
  const std::vector<int64_t> all = s.problem.all_lengths();
  std::vector<int64_t> start(all.size() + 1, 0);
  std::partial_sum(all.begin(), all.end(), start.begin() + 1);
  std::vector<BinRun> runs;
  for (const cp::Placement& placement : schedule.placements_of(rank)) {
    const cp::Bin& bin = schedule.bins[static_cast<size_t>(placement.bin)];
    if (bin.tokens == 0) continue;  // sequences of no tokens alone: nothing to attend
    const int g = bin.group;
    BinRun r;
    r.placement = placement;
    r.member = rank - placement.first_rank;
    r.group = g > 1 ? s.blocks.at(g).get() : nullptr;
    std::vector<int64_t> lengths;
    for (int i : bin.sequences) lengths.push_back(all[static_cast<size_t>(i)]);
    // A group of one needs no zigzag and no padding.
    r.options.causal = true;
    r.options.layout = g > 1 ? cp::Layout::zigzag : cp::Layout::contiguous;
    r.options.packing = cp::pack_sequences(lengths, g > 1 ? 2 * g : 1);
    r.options.seq = r.options.packing.rows();
    r.options.window = ops::Window::causal(s.problem.window);
    r.options.fault = s.fault;
    r.options.fault_magnitude = s.config.fault_magnitude;
    r.options.attention_impl = s.problem.attention_impl;
    r.chunks = cp::shard_chunks(r.options.layout, r.options.packing, g, r.member);
    r.tokens = tokens_of(bin, r.options.packing, r.chunks, start);
    const DType dt = s.config.dtype;
    // The attention suite's scales (inputs.cc): q.k / sqrt(d) of standard deviation 1.
    const int64_t d = s.problem.head_dim, dv = s.problem.v_head_dim;
    r.q = gather_tokens(s.problem, r.tokens, d, "attention.q", 2.0, dt, s.seed, s.device);
    r.k = gather_tokens(s.problem, r.tokens, d, "attention.k", 1.5, dt, s.seed, s.device);
    r.v = gather_tokens(s.problem, r.tokens, dv, "attention.v", 1.0, dt, s.seed, s.device);
    r.dout = gather_tokens(s.problem, r.tokens, dv, "attention.dout", 1.0, dt, s.seed, s.device);
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace

State setup(CaseContext& ctx) {
  State s;
  s.config = ctx.config;
  s.problem = Problem::of(ctx.config);
  s.seed = ctx.seed;
  s.device = ctx.device;
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.fault = cp::faults().parse(ctx.config.fault);
  const Problem& p = s.problem;
  const std::vector<int64_t> all = p.all_lengths();
  const cp::CostModel cost{p.ring_step};
  s.fixed = cp::static_schedule(p.microbatch_sequences(), all, p.cp, p.dp, cost);
  s.dynamic = cp::dynamic_schedule(all, p.capacity(), p.ranks(), cost);
  const int rank = ctx.comm.rank();
  for (int g = 2; g <= p.ranks(); g *= 2) s.blocks[g] = ctx.comm.split(rank / g, rank % g);
  s.fixed_runs = runs_of(s, s.fixed, rank);
  s.dynamic_runs = runs_of(s, s.dynamic, rank);
  return s;
}

void run(std::vector<BinRun>& bins, cp::Stats* stats) {
  for (BinRun& b : bins) {
    const cp::Comms comms{nullptr, b.group};
    b.fwd = cp::cp_attention_forward(comms, b.options, b.q, b.k, b.v, stats);
    b.grads = cp::cp_attention_backward(comms, b.options, b.q, b.k, b.v, b.fwd.out, b.fwd.lse, b.dout, stats);
  }
}

}  // namespace sextant::attention::dynamic

namespace sextant::attention {

CaseDef dynamic_cp_case() {
  using dynamic::State;
  return make_case(CaseTable<State>{
      .suite = "attention",
      .name = "dynamic_cp",
      .summary = "packed microbatches on CP groups sized per bin (dynamic CP) vs the full static group",
      .options = {OptionSpec::size("seq", "tokens per static microbatch"),
                  OptionSpec::integer("microbatches", 1, 4096, "packed microbatches of the global batch"),
                  OptionSpec::size("heads", "attention heads"),
                  OptionSpec::size("head_dim", "head dimension of q and k"),
                  OptionSpec::size("v_head_dim",
                                   "head dimension of v and the output (MLA; default: head_dim, and "
                                   "the long-tailed lengths also run head_dim 3/2 of it)"),
                  OptionSpec::text("seq_lens", "lengths per microbatch: a,b,c summing to --seq, or zipf:N"),
                  OptionSpec::text("window",
                                   "causal sliding window LEFT[,0] within each sequence (TransformerEngine's "
                                   "window_size (LEFT, 0); a RIGHT of 1 or more runs no case here); default: the "
                                   "long-tailed lengths also run seq/8"),
                  OptionSpec::number("ring_step", 0, 1e12, "the scheduler's cost of one ring step, in causal pairs"),
                  ops::attention_impl_option()},
      // Its groups run the p2p ring on zigzagged packed sequences.
      .faults = cp::faults().docs_where({dynamic::ring_site(ops::AttentionMask::kNoWindow), dynamic::ring_site(1)}),
      .kernel_faults = {KernelFault::attention_forward_scale, KernelFault::attention_backward_softmax_grad,
                        KernelFault::causal_mask_diagonal, KernelFault::attention_scale_from_v_dim,
                        KernelFault::attention_window_off_by_one},
      .table_metrics = {"speedup_vs_static", "busy_fraction_dynamic", "busy_fraction_static"},
      .configs = dynamic::sweep,
      .validate = dynamic::validate,
      .memory =
          [](const CaseConfig& c) {
            // Every microbatch's q, k, v, dout, out and gradients on its group, twice (static and dynamic), and the
            // float64 reference of each sequence on rank 0.
            const double tokens = static_cast<double>(c.i("seq")) * c.i("microbatches") * c.i("heads") *
                                  std::max(c.i("head_dim"), c.params.value("v_head_dim", c.i("head_dim")));
            const double shard = 2.0 * 12 * 4 * tokens / c.ranks, reference = 10.0 * 8 * tokens;
            return MemoryEstimate{c.device == Device::host ? shard + reference : reference,
                                  c.device == Device::host ? 0 : shard};
          },
      .setup = dynamic::setup,
      .timed = {{"dynamic",
                 [](State& s) {
                   dynamic::run(s.dynamic_runs, &s.stats["dynamic"]);
                   ++s.runs["dynamic"];
                 }},
                {"static",
                 [](State& s) {
                   dynamic::run(s.fixed_runs, &s.stats["static"]);
                   ++s.runs["static"];
                 }}},
      .check = dynamic::check,
      .metrics = dynamic::metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 50, dynamic_cp_case);

}  // namespace sextant::attention
