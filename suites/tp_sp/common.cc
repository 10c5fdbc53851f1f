// What the three tp_sp cases share: sweep, bad-input rules, placement,
// gathered comparison and the metrics.
#include <algorithm>
#include <bit>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/tensor_parallel/tp_group.h"
#include "suites/tp_sp/tp_sp.h"

namespace sextant::tp_sp {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kTflopsPerRank = define_metric({"tp_sp", "tflops_per_rank", "TFLOP/s", Better::higher,
                                                 "matmul FLOP/s of the block's forward and backward per rank"});
const MetricDef& kActivationBytesPerRank = define_metric({"tp_sp", "activation_bytes_per_rank", "B", Better::neither,
                                                          "activations a rank holds between forward and backward"});
const MetricDef& kLayernormActivationBytesPerRank =
    define_metric({"tp_sp", "layernorm_activation_bytes_per_rank", "B", Better::neither,
                   "the LayerNorm's share of activation_bytes_per_rank (mlp, attn_proj)"});
const MetricDef& kSpGradAllreduceBytesPerRank =
    define_metric({"tp_sp", "sp_grad_allreduce_bytes_per_rank", "B", Better::neither,
                   "SP: bytes of the TP all-reduce of replicated parameters' gradients"});
const MetricDef& kRegatherBytesPerRank =
    define_metric({"tp_sp", "regather_bytes_per_rank", "B", Better::neither,
                   "SP with regather: bytes of the backward re-all-gather of saved input shards"});
}  // namespace

namespace {

struct Sizes {
  int64_t batch, seq, hidden, heads, ffn, vocab;
};
// Small enough that the float64 reference (plain loops) stays in seconds.
Sizes profile_sizes(Profile profile) {
  if (profile == Profile::ci) return {4, 8, 16, 4, 32, 64};
  if (profile == Profile::qualify) return {4, 256, 512, 8, 2048, 4096};
  return {4, 64, 128, 8, 512, 1024};
}

// The params a block records (METRICS.md, tp_sp): shared ones plus its own width.
nlohmann::json block_params(const BlockKind& kind, const Sizes& s) {
  nlohmann::json j = {{"block", kind.name}, {"batch", s.batch}, {"seq", s.seq}, {"hidden", s.hidden}};
  switch (kind.width) {
    case BlockWidth::ffn: j["ffn"] = s.ffn; break;
    case BlockWidth::heads: j["heads"] = s.heads; break;
    case BlockWidth::vocab: j["vocab"] = s.vocab; break;
  }
  return j;
}

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// (parallel config, regather) pairs to run at req.ranks.
std::vector<std::pair<ParallelConfig, bool>> variants(const SweepRequest& req) {
  const bool user_regather = req.options.contains("regather");
  const bool regather = req.get<bool>("regather", true);
  std::vector<std::pair<ParallelConfig, bool>> out;
  if (req.parallel) {  // pinned: exactly that config
    out.push_back({*req.parallel, regather});
    return out;
  }
  for (int tp : {1, 2, 4}) {
    if (tp > req.ranks || req.ranks % tp != 0) continue;
    ParallelConfig pc{tp, 1, 1, req.ranks / tp};
    out.push_back({pc, false});
    if (tp == 1) continue;  // SP over one rank is the same run
    pc.sp = true;
    if (user_regather) {
      out.push_back({pc, regather});
    } else {
      out.push_back({pc, true});   // Megatron's default: save the shard, all-gather again in backward
      out.push_back({pc, false});  // save the gathered input: exactly the all-reduce path's bytes
    }
  }
  return out;
}

// The linears' precisions to run: unquantized, and for a block with FP8
// linears each recipe at TransformerEngine's defaults (the user's recipe
// parameters over them) on the host; --set fp8_recipe: that recipe alone,
// and nothing for a block without FP8 linears.
std::vector<std::optional<ops::Fp8Recipe>> precisions(const SweepRequest& req, const BlockKind& kind) {
  // Read from the options themselves: a block without FP8 linears does not
  // declare them, and runs nothing when another block's FP8 is asked for.
  const bool picked = req.options.contains("fp8_recipe");
  std::vector<std::optional<ops::Fp8Recipe>> out;
  if (!picked) out.push_back(std::nullopt);
  if (kind.fp8_linears) ops::require_fp8_options_apply(req.options);
  // Unasked, FP8 runs where its gemm is built: the host.
  if (!kind.fp8_linears || (!picked && req.device != Device::host)) return out;
  for (const std::string& name : ops::fp8_scaling_names())
    if (!picked || req.get<std::string>("fp8_recipe", "") == name)
      out.push_back(ops::with_fp8_options(ops::default_fp8_recipe(ops::parse_fp8_scaling(name)), req.options));
  return out;
}

}  // namespace

std::vector<CaseConfig> sweep(const SweepRequest& req, const BlockKind& kind) {
  const tp::FaultSite& parts = kind.parts;
  const tp::Fault fault = tp::faults().parse(req.fault);
  Sizes s = profile_sizes(req.profile);
  s.seq = req.get<int64_t>("seq", s.seq);
  s.hidden = req.get<int64_t>("hidden", s.hidden);
  s.heads = req.get<int64_t>("heads", s.heads);
  s.ffn = req.get<int64_t>("ffn", s.ffn);
  s.vocab = req.get<int64_t>("vocab", s.vocab);
  std::vector<CaseConfig> out;
  for (const std::optional<ops::Fp8Recipe>& fp8 : precisions(req, kind))
    for (DType dtype : fp8 ? req.dtypes_or({DType::bf16}) : req.dtypes_or({DType::f32, DType::bf16}))
      for (const auto& [parallel, regather] : variants(req)) {
        const bool per_tensor = fp8 && fp8->per_tensor();
        if (!tp::faults().shows(fault, {parallel.tp, parallel.sp, parts.layernorm, parts.vocab, per_tensor})) continue;
        Sizes sized = s;  // the default global batch is raised to a multiple of dp; a given one must divide
        sized.batch = req.options.contains("batch") ? req.get<int64_t>("batch", s.batch)
                                                    : round_up(s.batch, std::max(parallel.dp, 1));
        CaseConfig c;
        c.params = block_params(kind, sized);
        c.params["sp"] = parallel.sp;
        if (parallel.sp) c.params["regather"] = regather;
        if (fp8) c.params.update(ops::fp8_recipe_json(*fp8));
        c.parallel = parallel;
        c.ranks = req.ranks;
        c.dtype = dtype;
        out.push_back(c);
      }
  return out;
}

Problem problem_of(const CaseConfig& c) {
  Problem p;
  p.block = c.s("block");
  p.width = c.params.contains("ffn")     ? BlockWidth::ffn
            : c.params.contains("heads") ? BlockWidth::heads
                                         : BlockWidth::vocab;
  p.sp = c.parallel.sp;
  p.regather = c.params.value("regather", true);
  p.batch = c.i("batch");
  p.seq = c.i("seq");
  p.hidden = c.i("hidden");
  p.heads = c.params.value("heads", int64_t{0});
  p.ffn = c.params.value("ffn", int64_t{0});
  p.vocab = c.params.value("vocab", int64_t{0});
  p.tp = c.parallel.tp;
  p.dp = c.parallel.dp;
  if (c.params.contains("fp8_recipe")) p.fp8 = ops::fp8_recipe_from_json(c.params);
  return p;
}

std::vector<OptionSpec> block_options(bool fp8_linears) {
  std::vector<OptionSpec> out = {
      OptionSpec::size("seq", "sequence length"),
      OptionSpec::size("batch", "global batch (sequences)"),
      OptionSpec::size("hidden", "hidden size"),
      OptionSpec::size("heads", "attention heads (attn_proj)"),
      OptionSpec::size("ffn", "FFN hidden size (mlp)"),
      OptionSpec::size("vocab", "vocabulary size (vocab)"),
      OptionSpec::boolean("regather", "SP: save input shards and all-gather them again in backward")};
  if (fp8_linears)
    for (OptionSpec& option : ops::fp8_recipe_options()) out.push_back(std::move(option));
  return out;
}

// The widest matrix of the block sets the scale: activations [b, s, width]
// and weights [h, width] per rank, and on the group's rank 0 the float64
// reference of the whole problem (a dozen such tensors in 8 bytes).
MemoryEstimate block_memory(const CaseConfig& c) {
  const Problem p = problem_of(c);
  const double width = std::max({p.hidden, 3 * p.hidden, p.ffn, p.vocab}) * 1.0;
  const double elements = static_cast<double>(p.batch) * p.seq * width + static_cast<double>(p.hidden) * width;
  const double shard = 4.0 * 8 * elements / p.tp, reference = 8.0 * 12 * elements;
  return {c.device == Device::host ? shard + reference : reference, c.device == Device::host ? 0 : shard};
}

void validate_problem(const CaseConfig& c) {
  const Problem p = problem_of(c);
  require(c.parallel.cp == 1, cat("tp_sp runs tp x dp: --cp ", c.parallel.cp, " must be 1"));
  require(c.parallel.pp == 1, cat("tp_sp runs tp x dp: --pp ", c.parallel.pp, " must be 1"));
  require_positive("--batch", p.batch);
  require_positive("--seq", p.seq);
  require_divides("--tp", p.tp, "--hidden", p.hidden);
  switch (p.width) {
    case BlockWidth::ffn: require_divides("--tp", p.tp, "--ffn", p.ffn); break;
    case BlockWidth::heads:
      require_divides("--tp", p.tp, "--heads", p.heads);
      require_divides("--heads", p.heads, "--hidden", p.hidden);
      break;
    case BlockWidth::vocab: require_divides("--tp", p.tp, "--vocab", p.vocab); break;
  }
  if (p.sp && p.seq % p.tp != 0)
    throw UsageError(cat("--tp ", p.tp, " must divide --seq ", p.seq, " under --sp (each rank holds seq/tp tokens)"));
  require_divides("--dp", p.dp, "--batch", p.batch);
  if (p.fp8) {
    require(c.device == Device::host,
            cat("tp_sp/", p.block, ": FP8 linears run on the host only (cuBLASLt's FP8 matmul is not built yet)"));
    require(c.dtype == DType::f32 || c.dtype == DType::bf16,
            cat("tp_sp/", p.block, ": FP8 linears take --dtype f32 or bf16 (the activations and the gemms' outputs)"));
  }
}

Placement placement_of(const CaseContext& ctx, const Problem& p) {
  Placement at;
  at.tp_rank = ctx.grid.get(Dim::tp).rank();
  at.dp_rank = ctx.grid.get(Dim::dp).rank();
  at.batch = p.batch / p.dp;
  at.batch_offset = at.batch * at.dp_rank;
  const bool sharded = p.sp && p.tp > 1;
  at.seq = sharded ? p.seq / p.tp : p.seq;
  at.seq_offset = sharded ? at.seq * at.tp_rank : 0;
  return at;
}

Env make_env(CaseContext& ctx) {
  Env e;
  e.p = problem_of(ctx.config);
  e.at = placement_of(ctx, e.p);
  e.tp = std::make_unique<tp::TpGroup>(
      tp::TpGroup{ctx.grid.get(Dim::tp), e.p.sp, e.p.regather, tp::faults().parse(ctx.config.fault)});
  e.dp = &ctx.grid.get(Dim::dp);
  e.tp->amax_dp = e.dp;
  e.self = &ctx.self;
  e.seed = ctx.seed;
  e.dtype = ctx.config.dtype;
  e.device = ctx.device;
  return e;
}

tp::TpGroup baseline_group(const Env& env) { return tp::TpGroup{*env.self}; }

void check_gathered(Checker& checker, const std::string& name, OpClass op, const std::vector<Block>& blocks,
                    const Shape& global, const Tensor& base, const Tensor& ref) {
  check_gathered(checker, name, tolerance_bound(checker.dtype(), op), blocks, global, base, ref);
}

void check_gathered(Checker& checker, const std::string& name, const Bound& bound, const std::vector<Block>& blocks,
                    const Shape& global, const Tensor& base, const Tensor& ref) {
  if (blocks.empty()) throw RuntimeError(cat("check_gathered ", name, ": this rank holds no block"));
  Assembled a = assemble(checker.comm(), blocks, global, blocks.front().data.dtype());
  if (!checker.is_root()) return;
  if (a.uncovered > 0) checker.fail(cat(name, ": ", a.uncovered, " elements held by no rank"));
  if (a.mismatched > 0) checker.fail(cat(name, ": ", a.mismatched, " replicated elements differ between ranks"));
  checker.compare(name, bound, a.tensor, base, ref);
}

Bound tensor_bound(const Env& env, OpClass op, const Fp8Casts& casts) {
  if (!env.p.fp8 || casts.empty()) return tolerance_bound(env.dtype, op);
  return fp8_bound(op, tp::cast_unit_roundoffs(*env.p.fp8, casts), env.dtype);
}

int checked_steps(const Problem& p) { return p.fp8 && p.fp8->scaling == ops::Fp8Scaling::delayed ? 3 : 1; }

Fp8Scales fp8_scales(const std::vector<std::pair<std::string, const tp::Fp8LinearState*>>& linears) {
  Fp8Scales out;
  for (const auto& [name, state] : linears)
    for (const char* operand : tp::kFp8OperandNames) out.names.push_back(cat(name, ".", operand));
  for (const auto& entry : linears)
    out.values.insert(out.values.end(), entry.second->scale_inv.begin(), entry.second->scale_inv.end());
  return out;
}

Tensor on_host(const Tensor& t) { return !t.defined() || t.is_host() ? t : t.to(Device::host); }

Tensor on_device(const Tensor& t, Device device) { return t.device() == device ? t : t.to(device); }

void move_to_host(const std::vector<Tensor*>& tensors) {
  for (Tensor* t : tensors)
    if (t) *t = on_host(*t);
}

size_t bytes_of(const std::vector<Tensor*>& tensors) {
  size_t total = 0;
  for (const Tensor* t : tensors)
    if (t && t->defined()) total += t->nbytes();
  return total;
}

Metrics block_metrics(const Env& env, const RegionTimes& times, double flops, size_t activation_bytes,
                      size_t layernorm_bytes, size_t replicated_grad_bytes, size_t regathered_bytes,
                      bool has_layernorm) {
  const TimeStats& t = times.at("fwd_bwd");
  const int ranks = env.p.tp * env.p.dp;
  const bool sp = env.tp->sp();
  Metrics m;
  // Matrix-product FLOPs of the global forward + backward, shared evenly by the ranks.
  m.add(kTflopsPerRank, t.median > 0 ? flops / (t.median * ranks) / 1e12 : 0.0);
  m.add(kActivationBytesPerRank, static_cast<double>(activation_bytes));
  if (has_layernorm) m.add(kLayernormActivationBytesPerRank, static_cast<double>(layernorm_bytes));
  // The two ways SP's traffic differs from the all-reduce path's (ring bytes per rank and iteration).
  m.add(kSpGradAllreduceBytesPerRank,
        sp ? static_cast<double>(ring_bytes_sent(CommOp::all_reduce, replicated_grad_bytes, env.p.tp)) : 0.0);
  m.add(kRegatherBytesPerRank,
        sp && env.p.regather ? static_cast<double>(ring_bytes_sent(CommOp::all_gather, regathered_bytes, env.p.tp))
                             : 0.0);
  return m;
}

std::vector<FaultDoc> block_faults(const tp::FaultSite& parts, bool fp8_linears) {
  return tp::faults().docs_where(
      {{2, false, parts.layernorm, parts.vocab, fp8_linears}, {2, true, parts.layernorm, parts.vocab, fp8_linears}});
}

}  // namespace sextant::tp_sp
