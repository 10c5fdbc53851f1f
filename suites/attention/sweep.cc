// Which instances a rank count runs, and the bad-input rules.
#include <algorithm>
#include <optional>

#include "harness/error.h"
#include "harness/options.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/attention/packing.h"
#include "kernels/ops/attention_block.h"
#include "suites/attention/attention.h"

namespace sextant::attention {

namespace {

struct Sizes {
  int64_t batch, seq, heads, head_dim;
};

// Small enough for two shared cores at every rank count; qualify is for GPUs
// and checks by sampled rows.
Sizes default_sizes(Profile profile) {
  if (profile == Profile::ci) return {2, 64, 16, 8};
  if (profile == Profile::qualify) return {1, 8192, 32, 128};
  return {1, 256, 16, 16};
}

// Above this many score entries times head_dim (b h s^2 d) the float64
// reference covers sampled query rows only.
constexpr double kFullReferenceLimit = 1 << 28;

// TP x CP splits of a rank count: all CP, and with 4+ ranks TP 2 (TP 4 too at
// 8 ranks outside ci).
std::vector<ParallelConfig> parallel_configs(const SweepRequest& req) {
  if (req.parallel) return {*req.parallel};
  std::vector<ParallelConfig> out = {ParallelConfig{1, req.ranks, 1, 1}};
  if (req.ranks >= 4) out.push_back(ParallelConfig{2, req.ranks / 2, 1, 1});
  if (req.ranks == 8 && req.profile != Profile::ci) out.push_back(ParallelConfig{4, 2, 1, 1});
  return out;
}

// (a2a_size, p2p_size) for a CP size. a2a+p2p takes the user's split, else
// a2a 2 (a ring over cp/2); under a planted fault of the ring the ring must
// have two members, so a2a is 1 up to cp 2.
std::pair<int, int> split_of(const Variant& v, const SweepRequest& req, int cp) {
  if (!v.a2a) return {1, cp};
  if (!v.kv) return {cp, 1};
  // A fault that needs a ring of two (it shows at ring size 2, not at 1).
  const cp::Fault fault = cp::faults().parse(req.fault);
  const bool ring_fault =
      fault != cp::Fault::none &&
      !cp::faults().shows(fault, cp::fault_site(v, 1, true, cp::Layout::zigzag, 2, ops::Window::causal(1))) &&
      cp::faults().shows(fault, cp::fault_site(v, 2, true, cp::Layout::zigzag, 2, ops::Window::causal(1)));
  const int fallback = cp >= 4 || (cp >= 2 && !ring_fault) ? 2 : 1;
  const int a2a = static_cast<int>(req.get<int64_t>("a2a_size", fallback));
  const int p2p = static_cast<int>(req.get<int64_t>("p2p_size", a2a > 0 ? cp / a2a : 0));
  return {a2a, p2p};
}

// GQA: a quarter of the query heads, but at least one per Ulysses member and
// TP rank so the a2a variants can split them. With `high_ratios` also 8:1
// and (outside ci) 16:1, one KV head per TP rank at least: where a Ulysses
// group is larger than the KV heads per TP rank, they are replicated
// (ulysses.h).
std::vector<int64_t> kv_heads_list(const SweepRequest& req, int64_t heads, int64_t min_kv, int tp, bool high_ratios) {
  if (req.options.contains("kv_heads")) return {req.get<int64_t>("kv_heads", heads)};
  int64_t gqa = std::max<int64_t>(heads / 4, min_kv);
  if (gqa <= 0 || heads % gqa != 0) gqa = heads;
  std::vector<int64_t> out = {heads};
  if (gqa != heads) out.push_back(gqa);
  if (!high_ratios) return out;
  for (int64_t ratio : {int64_t{8}, int64_t{16}}) {
    if (ratio == 16 && req.profile == Profile::ci) continue;
    const int64_t kv = heads / ratio;
    if (heads % ratio == 0 && kv >= tp && kv % tp == 0 && std::find(out.begin(), out.end(), kv) == out.end())
      out.push_back(kv);
  }
  return out;
}

// --set seq_lens as text (a single length arrives as a JSON number).
std::string seq_lens_option(const SweepRequest& req) {
  if (!req.options.contains("seq_lens")) return "";
  const nlohmann::json& v = req.options.at("seq_lens");
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The window an instance runs from the user's: causal, keys up to LEFT
// before the query (RIGHT must be 0); without a causal mask RIGHT after it,
// LEFT when not given (a symmetric band).
ops::Window window_for(ops::Window given, bool causal) {
  if (causal) {
    require(given.right == ops::kNoWindow || given.right == 0,
            cat("--set window: a causal mask sees no key after the query: RIGHT ", given.right, " must be 0"));
    return ops::Window::causal(given.left);
  }
  return {given.left, given.right == ops::kNoWindow ? given.left : given.right};
}

// Keys of [i - left, i + right] within [0, n) over the queries i of one
// sequence of n (causal: right 0).
double window_pairs(int64_t n, bool causal, ops::Window w) {
  double pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = w.left == ops::kNoWindow ? 0 : std::max<int64_t>(0, i - w.left);
    const int64_t last = causal ? i : w.right == ops::kNoWindow ? n - 1 : std::min(n - 1, i + w.right);
    pairs += static_cast<double>(last - first + 1);
  }
  return pairs;
}

// The rules of packed sequences (their lengths were parsed by the sweep; a
// config built elsewhere is checked again here).
void validate_packed(const Problem& p, const CaseConfig& c) {
  const int cp = c.parallel.cp;
  cp::require_packed_lengths("--set seq_lens", p.seq_lens, p.seq);
  require(p.causal, "--set seq_lens: packed sequences attend causally; --set causal=false does not apply");
  if (!p.thd_padding && p.layout == cp::Layout::zigzag)
    for (int64_t n : p.seq_lens)
      require(n % (2 * cp) == 0, cat("--set thd_padding=false: sequence length ", n, " must be divisible by 2*cp = ",
                                     2 * cp, " (each sequence is zigzagged on its own)"));
  if (!p.thd_padding && p.layout == cp::Layout::zigzag)
    require(p.tail_padding % (2 * cp) == 0,
            cat("--set thd_padding=false: tail_padding ", p.tail_padding, " must be divisible by 2*cp = ", 2 * cp));
  if (!p.thd_padding && p.layout == cp::Layout::contiguous)
    require((p.seq + p.tail_padding) % cp == 0, cat("--set thd_padding=false: --seq ", p.seq, " + tail_padding ",
                                                    p.tail_padding, " must be divisible by cp ", cp));
  if (c.device == Device::cuda) {
    // The gathered keys (all-gather, Ulysses) carry every rank's runs: a
    // packed shard has up to four per sequence (two chunks, each with padding).
    const int64_t runs = static_cast<int64_t>(p.packing.lengths.size()) * 4 * cp;
    require(runs <= ops::kCudaMaskRuns,
            cat("--set seq_lens: ", p.seq_lens.size(), " sequences at cp ", cp, " may form ", runs,
                " runs of positions, more than the ", ops::kCudaMaskRuns, " the CUDA attention mask holds"));
  }
}

}  // namespace

std::string padded_stream_spec(int64_t seq) {
  return seq % 8 == 0 && seq >= 16 ? cat("1,0,", seq * 5 / 8 - 1, ",", seq / 8, ",", seq / 4) : "";
}

int64_t mla_qk_head_dim(int64_t v_head_dim) { return v_head_dim % 2 == 0 ? v_head_dim + v_head_dim / 2 : 0; }

std::optional<ops::Window> window_option(const SweepRequest& req) {
  if (!req.options.contains("window")) return std::nullopt;
  const nlohmann::json& v = req.options.at("window");
  const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  const std::vector<std::string> sides = split(text, ',');
  if (sides.empty() || sides.size() > 2) throw UsageError(cat("--set window '", text, "' must be LEFT or LEFT,RIGHT"));
  // Each side is an integer as the option declarations check one.
  const OptionSpec side = OptionSpec::integer("window", 0, kMaxDimension, "");
  const int64_t left = parse_option(side, sides[0], "--set window").get<int64_t>();
  if (sides.size() == 1) return ops::Window{left, ops::kNoWindow};
  return ops::Window{left, parse_option(side, sides[1], "--set window").get<int64_t>()};
}

cp::Packing packing_for(const std::vector<int64_t>& seq_lens, bool thd_padding, int cp, int64_t tail_padding) {
  return cp::pack_sequences(seq_lens, thd_padding ? 2 * cp : 1, tail_padding);
}

namespace {

// A packed stream of the sweep (empty lens: one sequence).
struct Stream {
  std::string spec;
  std::vector<int64_t> lens;
};

// One instance of the sweep, before it becomes a CaseConfig.
struct Instance {
  ParallelConfig parallel;
  int a2a = 1, p2p = 1;
  const Stream* stream = nullptr;
  bool causal = false;
  cp::Layout layout = cp::Layout::contiguous;
  ops::Window window;
  int64_t kv_heads = 0, head_dim = 0, v_head_dim = 0;  // v_head_dim: recorded where it differs or was asked for
  DType dtype = DType::f32;
};

CaseConfig config_of(const Variant& v, const SweepRequest& req, const Instance& in) {
  const int64_t batch = req.get<int64_t>("batch", default_sizes(req.profile).batch);
  const int64_t seq = req.get<int64_t>("seq", default_sizes(req.profile).seq);
  const int64_t heads = req.get<int64_t>("heads", default_sizes(req.profile).heads);
  const double size = static_cast<double>(batch) * heads * seq * seq * std::max(in.head_dim, in.v_head_dim);
  CaseConfig c;
  c.params = {{"variant", v.name},
              {"layout", cp::layout_name(in.layout)},
              {"causal", in.causal},
              {"seq", seq},
              {"batch", batch},
              {"heads", heads},
              {"kv_heads", in.kv_heads},
              {"head_dim", in.head_dim},
              {"a2a_size", in.a2a},
              {"p2p_size", in.p2p},
              {"reference", req.get<std::string>(
                                "reference", reference_rows_name(size > kFullReferenceLimit ? ReferenceRows::spot
                                                                                            : ReferenceRows::full))}};
  if (in.v_head_dim != in.head_dim || req.options.contains("v_head_dim")) c.params["v_head_dim"] = in.v_head_dim;
  ops::record_attention_impl(req, c.params);
  if (in.window.left != ops::kNoWindow) c.params["window"] = in.window.left;
  if (in.window.right != ops::kNoWindow) c.params["window_right"] = in.window.right;
  if (!in.stream->lens.empty()) {
    const bool thd_padding = req.get<bool>("thd_padding", true);
    // The sweep's own stream ends in 2 cp rows of padding; a user's in none unless asked.
    const int64_t tail = req.get<int64_t>("tail_padding", req.options.contains("seq_lens") ? 0 : 2 * in.parallel.cp);
    const cp::Packing packing = packing_for(in.stream->lens, thd_padding, in.parallel.cp, tail);
    c.params["seq_lens"] = in.stream->lens;
    c.params["seq_lens_spec"] = in.stream->spec;
    c.params["thd_padding"] = thd_padding;
    if (tail > 0 || req.options.contains("tail_padding")) c.params["tail_padding"] = tail;
    c.params["padded_seq_lens"] = packing.padded;
    c.params["padding_rows"] = packing.padding();
  }
  c.parallel = in.parallel;
  c.ranks = req.ranks;
  c.dtype = in.dtype;
  return c;
}

}  // namespace

std::vector<CaseConfig> sweep(const Variant& v, const SweepRequest& req) {
  const Sizes d = default_sizes(req.profile);
  const int64_t seq = req.get<int64_t>("seq", d.seq);
  const int64_t heads = req.get<int64_t>("heads", d.heads), head_dim = req.get<int64_t>("head_dim", d.head_dim);
  // Faults are planted in f32, where the floor is tight enough to see them.
  const std::vector<DType> dtypes =
      req.dtypes_or(req.fault.empty() ? std::vector<DType>{DType::f32, DType::bf16} : std::vector<DType>{DType::f32});
  // Packed sequences attend causally: a plain --set causal=false is refused by validate.
  // Without --set seq_lens the causal instances also run one packed stream of
  // five sequences (one token, none, 5/8 of --seq less one, 1/8 and 2/8),
  // padded to 2 cp rows each and followed by 2 cp rows of padding, so the
  // sweep reaches the packed paths with padding between sequences and after
  // the last, a sequence of one token and one of none (first, so that the
  // long one still crosses the kv members' boundaries).
  std::vector<Stream> streams;
  const std::string user_spec = seq_lens_option(req);
  if (!user_spec.empty()) streams.push_back({user_spec, cp::parse_seq_lens(user_spec, seq, req.seed)});
  else {
    streams.push_back({"", {}});
    if (const std::string spec = padded_stream_spec(seq); !spec.empty())
      streams.push_back({spec, cp::parse_seq_lens(spec, seq, req.seed)});
  }
  // Sliding windows: the user's on every instance (a RIGHT side of 1 or
  // more: without a causal mask only), else one more causal instance of the
  // single sequence and of the packed stream with a window of seq/8, and one
  // more instance without a causal mask of (seq/8, seq/16) keys either side
  // (at cp 4 and more, ring steps wholly outside the window are skipped;
  // packed, the window stays within each sequence).
  const std::optional<ops::Window> user_window = window_option(req);
  std::vector<bool> causals = {false, true};
  if (req.options.contains("causal")) causals = {req.get<bool>("causal", false)};
  else if (user_window && user_window->right >= 1) causals = {false};
  else if (!user_spec.empty() || user_window) causals = {true};
  // MLA: the user's v head dim on every instance, else the plain MHA rows
  // also run DeepSeek-V3's proportions, q/k head dim 3/2 of v's (192 and
  // 128 at the qualify profile's 128).
  const bool user_dv = req.options.contains("v_head_dim");
  const int64_t v_head_dim = req.get<int64_t>("v_head_dim", head_dim);
  std::vector<CaseConfig> out;
  for (const ParallelConfig& parallel : parallel_configs(req)) {
    const auto [a2a, p2p] = split_of(v, req, parallel.cp);
    for (const Stream& stream : streams)
      for (bool causal : causals) {
        if (!stream.lens.empty() && !causal && user_spec.empty()) continue;  // a user's is refused by validate
        std::vector<cp::Layout> layouts = {cp::Layout::contiguous};
        if (req.options.contains("layout")) layouts = {cp::parse_layout(req.get<std::string>("layout", ""))};
        else if (causal) layouts.push_back(cp::Layout::zigzag);
        std::vector<ops::Window> windows = {user_window ? window_for(*user_window, causal) : ops::Window{}};
        if (!user_window && seq >= 8 && causal) windows.push_back(ops::Window::causal(seq / 8));
        if (!user_window && seq >= 16 && !causal) windows.push_back({seq / 8, seq / 16});
        for (cp::Layout layout : layouts)
          for (ops::Window w : windows) {
            // High GQA ratios and MLA on the plain single-sequence rows; a default window runs MHA only: GQA
            // meets the window through the same mask.
            const bool plain = !w.any() && stream.lens.empty();
            const std::vector<int64_t> kv_list =
                !w.any() || user_window
                    ? kv_heads_list(req, heads, static_cast<int64_t>(a2a) * parallel.tp, parallel.tp, plain)
                    : std::vector<int64_t>{heads};
            for (int64_t kv : kv_list) {
              std::vector<std::pair<int64_t, int64_t>> dims = {{head_dim, v_head_dim}};  // (q/k, v)
              if (!user_dv && plain && kv == heads && mla_qk_head_dim(head_dim) > 0)
                dims.push_back({mla_qk_head_dim(head_dim), head_dim});
              const bool replicated = v.a2a && kv / parallel.tp < a2a;
              const cp::FaultSite site = cp::fault_site(v, p2p, causal, layout, stream.lens.size(), w, replicated);
              if (!cp::faults().shows(cp::faults().parse(req.fault), site)) continue;
              for (auto [dqk, dv] : dims)
                for (DType dtype : dtypes)
                  out.push_back(
                      config_of(v, req, {parallel, a2a, p2p, &stream, causal, layout, w, kv, dqk, dv, dtype}));
            }
          }
      }
  }
  return out;
}

std::vector<OptionSpec> attention_options() {
  return {OptionSpec::size("seq", "sequence length"),
          OptionSpec::size("batch", "batch size"),
          OptionSpec::size("heads", "query heads"),
          OptionSpec::size("kv_heads", "key/value heads (GQA: a divisor of heads)"),
          OptionSpec::size("head_dim", "head dimension of q and k"),
          OptionSpec::size("v_head_dim",
                           "head dimension of v and the output (MLA: other than head_dim; default: "
                           "head_dim, and the MHA rows also run head_dim 3/2 of it)"),
          OptionSpec::boolean("causal", "causal mask (default: both)"),
          OptionSpec::choice("layout", {"contiguous", "zigzag"}, "how the sequence is cut over CP (default: both)"),
          OptionSpec::integer("a2a_size", 1, 65536, "a2a+p2p: Ulysses group size (cp = a2a_size x p2p_size)"),
          OptionSpec::integer("p2p_size", 1, 65536, "a2a+p2p: ring size"),
          OptionSpec::choice("reference",
                             {reference_rows_name(ReferenceRows::full), reference_rows_name(ReferenceRows::spot)},
                             "float64 reference on every query row, or on sampled rows (default by size)"),
          OptionSpec::text("seq_lens", "packed sequences (THD): lengths a,b,c summing to --seq, or zipf:N"),
          OptionSpec::boolean("thd_padding", "pad each packed sequence to a multiple of 2 cp (default true)"),
          OptionSpec::integer("tail_padding", 0, kMaxDimension,
                              "packed: rows of padding after the last sequence (rounded up like the sequences; "
                              "default: 2 cp on the sweep's own stream, 0 with --set seq_lens)"),
          OptionSpec::text("window",
                           "sliding window LEFT[,RIGHT]: a query sees the keys at most LEFT positions before it and "
                           "RIGHT after it (TransformerEngine's window_size; causal: RIGHT 0; without a causal mask "
                           "RIGHT defaults to LEFT); default: the causal rows also run seq/8, the others seq/8,seq/16"),
          ops::attention_impl_option()};
}

// Per rank: q, k, v, dout, out, dq, dk, dv of its shard in f32, a few more
// for the merges. The group's rank 0 gathers the results and holds the
// inputs of the whole problem and the float64 reference (about ten whole
// tensors in 8 bytes).
MemoryEstimate attention_memory(const CaseConfig& c) {
  const Problem p = Problem::of(c);
  const double whole = static_cast<double>(p.batch) * p.seq * p.heads * std::max(p.head_dim, p.v_head_dim);
  const double shard = 12.0 * 4 * whole / c.ranks, root = 10.0 * 8 * whole;
  return {c.device == Device::host ? shard + root : root, c.device == Device::host ? 0 : shard};
}

void validate(const Variant& v, const CaseConfig& c) {
  const Problem p = Problem::of(c);
  const ParallelConfig& par = c.parallel;
  require_positive("--seq", p.seq);
  require_positive("--batch", p.batch);
  require_positive("--heads", p.heads);
  require_positive("--kv-heads", p.kv_heads);
  require_positive("--head-dim", p.head_dim);
  require_positive("--set v_head_dim", p.v_head_dim);
  require_divides("--kv-heads", p.kv_heads, "--heads", p.heads);
  require_divides("--tp", par.tp, "--heads", p.heads);
  require_divides("--tp", par.tp, "--kv-heads", p.kv_heads);
  require_divides("--dp", par.dp, "--batch", p.batch);
  require(par.pp == 1, cat("attention runs without pipeline stages: --pp ", par.pp, " must be 1"));
  if (c.device == Device::cuda)
    for (auto [name, dim] : {std::pair{"--head-dim", p.head_dim}, {"--set v_head_dim", p.v_head_dim}})
      require(dim <= 256, cat(name, " ", dim,
                              " must be at most 256 on --device cuda (the CUDA "
                              "attention kernels hold a row's columns in registers)"));
  if (const std::string problem = ops::window_problem(p.window, p.causal); !problem.empty())
    throw UsageError(cat("--set window: ", problem));
  if (p.packed()) validate_packed(p, c);
  else if (p.layout == cp::Layout::zigzag)
    require(p.seq % (2 * par.cp) == 0,
            cat("--seq ", p.seq, " must be divisible by 2*cp = ", 2 * par.cp, " for the zigzag layout"));
  else require(p.seq % par.cp == 0, cat("--seq ", p.seq, " must be divisible by cp ", par.cp));
  require(p.a2a_size >= 1 && par.cp % p.a2a_size == 0,
          cat("a2a_size ", p.a2a_size, " must divide cp ", par.cp, " (cp = a2a_size x p2p_size)"));
  require(p.a2a_size * p.p2p_size == par.cp, cat("a2a_size ", p.a2a_size, " x p2p_size ", p.p2p_size, " = ",
                                                 p.a2a_size * p.p2p_size, " must equal cp ", par.cp));
  require(v.a2a || p.a2a_size == 1, cat("variant ", v.name, " has no all-to-all: a2a_size ", p.a2a_size, " must be 1"));
  if (v.a2a) {
    const int64_t heads = p.heads / par.tp, kv = p.kv_heads / par.tp;
    require(heads % p.a2a_size == 0, cat("a2a size ", p.a2a_size, " must divide the ", heads,
                                         " heads per TP rank (--heads ", p.heads, " / --tp ", par.tp, ")"));
    require(kv % p.a2a_size == 0 || p.a2a_size % kv == 0,
            cat("a2a size ", p.a2a_size, " and the ", kv, " KV heads per TP rank (--kv-heads ", p.kv_heads, " / --tp ",
                par.tp, ") must divide one another (fewer KV heads than a2a members are replicated)"));
  }
  ops::require_attention_impl_runs(p.attention_impl, c.device);
  cp::faults().parse(c.fault);
}

const char* reference_rows_name(ReferenceRows r) { return r == ReferenceRows::spot ? "spot" : "full"; }

ReferenceRows parse_reference_rows(const std::string& name) {
  for (ReferenceRows r : {ReferenceRows::full, ReferenceRows::spot})
    if (name == reference_rows_name(r)) return r;
  throw UsageError(cat("reference '", name, "' must be full or spot"));
}

Problem Problem::of(const CaseConfig& c) {
  Problem p;
  p.variant = cp::parse_variant(c.s("variant"), "variant");
  p.layout = cp::parse_layout(c.s("layout"));
  p.causal = c.b("causal");
  p.window = {c.params.value("window", ops::kNoWindow), c.params.value("window_right", ops::kNoWindow)};
  p.seq = c.i("seq"), p.batch = c.i("batch"), p.heads = c.i("heads"), p.kv_heads = c.i("kv_heads");
  p.head_dim = c.i("head_dim");
  p.v_head_dim = c.params.value("v_head_dim", p.head_dim);
  p.a2a_size = static_cast<int>(c.i("a2a_size")), p.p2p_size = static_cast<int>(c.i("p2p_size"));
  p.reference = parse_reference_rows(c.s("reference"));
  p.attention_impl = ops::attention_impl_of(c.params);
  if (c.params.contains("seq_lens")) {
    p.seq_lens = c.params.at("seq_lens").get<std::vector<int64_t>>();
    p.thd_padding = c.params.value("thd_padding", true);
    p.tail_padding = c.params.value("tail_padding", int64_t{0});
    bool valid = p.tail_padding >= 0, any = false;
    for (int64_t n : p.seq_lens) valid = valid && n >= 0, any = any || n > 0;
    if (valid && any) p.packing = packing_for(p.seq_lens, p.thd_padding, c.parallel.cp, p.tail_padding);
    else p.packing.lengths = p.seq_lens;  // validate names the bad length
  }
  return p;
}

double Problem::flops_forward() const {
  if (window.any()) {
    double pairs = 0;
    for (int64_t n : packed() ? seq_lens : std::vector<int64_t>{seq}) pairs += window_pairs(n, causal, window);
    return 2.0 * batch * pairs * heads * (head_dim + v_head_dim);
  }
  double squares = static_cast<double>(seq) * seq;  // sum of L^2 over the sequences of a batch row
  if (packed()) {
    squares = 0;
    for (int64_t n : seq_lens) squares += static_cast<double>(n) * n;
  }
  return 2.0 * batch * squares * heads * (head_dim + v_head_dim) * (causal ? 0.5 : 1.0);
}

}  // namespace sextant::attention
