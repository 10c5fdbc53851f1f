// Which instances a rank count runs, at which sizes, and the bad-input rules.
#include <algorithm>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/attention/packing.h"
#include "kernels/ops/adam.h"
#include "kernels/ops/fp8_recipe.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {

// Model keys a user may set (--seq, --set data=..., ...), with the profile
// defaults. ci: tiny, for two shared cores; default: a small MoE model
// (h 64, 4 heads, 4 layers of which 2 MoE with 8 experts top-2, vocab 512,
// seq 64); qualify: larger, still within reach of the f64 reference.
const std::vector<std::string> kModelKeys = {
    "vocab",     "hidden",      "heads",   "kv_heads", "head_dim", "v_head_dim", "ffn",         "layers", "seq",
    "moe_every", "moe_pattern", "experts", "topk",     "moe_ffn",  "dispatcher", "batch",       "data",   "own_dataset",
    "cp_layout", "regather",    "lr",      "adam_eps", "steps",    "pad_to",     "tail_padding"};

}  // namespace

const std::vector<std::string>& step_keys() {
  static const std::vector<std::string> keys = {
      "microbatches",         "schedule", "cp_comm",  "a2a_size", "zero", "bucket_mb", "overlap_grad_reduce",
      "overlap_param_gather", "window",   "recompute"};
  return keys;
}

namespace {

nlohmann::json profile_sizes(Profile profile) {
  if (profile == Profile::ci)
    return {{"vocab", 128},   {"hidden", 32}, {"heads", 4}, {"ffn", 64},     {"layers", 4}, {"seq", 32},
            {"moe_every", 2}, {"experts", 8}, {"topk", 2},  {"moe_ffn", 32}, {"batch", 8},  {"steps", 3}};
  if (profile == Profile::qualify)
    return {{"vocab", 1024},  {"hidden", 128}, {"heads", 8}, {"ffn", 512},     {"layers", 8}, {"seq", 128},
            {"moe_every", 2}, {"experts", 8},  {"topk", 2},  {"moe_ffn", 256}, {"batch", 16}, {"steps", 3}};
  return {{"vocab", 512},   {"hidden", 64}, {"heads", 4}, {"ffn", 256},     {"layers", 4}, {"seq", 64},
          {"moe_every", 2}, {"experts", 8}, {"topk", 2},  {"moe_ffn", 128}, {"batch", 16}, {"steps", 3}};
}

ParallelConfig par(int tp, int cp, int pp, int dp, int ep = 1, bool sp = false, int vpp = 1, int etp = 0) {
  ParallelConfig p{tp, cp, pp, dp, ep, etp, vpp, sp};
  return p;
}

Recipe recipe(ParallelConfig p, nlohmann::json options = nlohmann::json::object()) { return {p, std::move(options)}; }

// A recipe option, not a case parameter: rows pack sequences with padding
// between them and after the last (TransformerEngine's pad_between_seqs),
// each padded to a multiple P = 2 cp of rows: with m = seq / P, lengths
// (m-3)P - P/2 + 1, 1, 0 and P/2, and P rows of tail padding (where m >= 4
// and the user gave no seq_lens).
constexpr const char* kPaddedRows = "padded_rows";
// A recipe option: grouped-query attention with this many query heads per KV
// head, where the user gave no kv_heads and the model and config allow it.
constexpr const char* kGroupedKv = "grouped_kv";
// A recipe option: MLA's head dims, DeepSeek-V3's ratio (q/k 192 beside v
// 128): v_head_dim = hidden / heads and head_dim 3/2 of it, where the user
// gave neither and hidden / heads is even.
constexpr const char* kMlaHeadDims = "mla_head_dims";
// A recipe option: the model dense (where the user gave no MoE layout) and
// its linears in FP8 under this recipe (where the user gave none), in bf16
// storage (where the user gave no --dtype), as TransformerEngine trains.
constexpr const char* kFp8Dense = "fp8_dense";

}  // namespace

// Adam's eps is 1e-5, not torch's 1e-8: Adam divides a gradient by its own
// magnitude, so where a gradient is rounding noise around zero (the key bias:
// softmax is shift-invariant, d loss / d b_k = 0 exactly) eps 1e-8 turns f32
// noise of 1e-9 into whole lr steps that the float64 reference does not take.
// Any f32 run (the one-rank baseline too) does that; eps = lr / 100 keeps the
// amplification (d update / d grad <= lr / eps) at 100 for any --set lr, so the
// parameter check measures the update, not noise (1e-5 at the default lr 1e-3).
constexpr double kAdamNoiseAmplification = 100;

nlohmann::json default_params(const SweepRequest& req) {
  nlohmann::json params = profile_sizes(req.profile);
  for (const std::string& key : kModelKeys)
    if (req.options.contains(key)) params[key] = req.options.at(key);
  if (!params.contains("adam_eps"))
    params["adam_eps"] = params.value("lr", ops::AdamConfig{}.lr) / kAdamNoiseAmplification;
  ops::record_attention_impl(req, params);
  ops::require_fp8_options_apply(req.options);
  for (const OptionSpec& option : ops::fp8_recipe_options())
    require(option.name == "fp8_recipe" || !req.options.contains(option.name) || req.options.contains("fp8_recipe"),
            cat("--set ", option.name, " needs --set fp8_recipe (the FP8 recipe it is a parameter of)"));
  if (req.options.contains("fp8_recipe"))
    params.update(ops::fp8_recipe_json(ops::with_fp8_options(
        ops::default_fp8_recipe(ops::parse_fp8_scaling(req.get<std::string>("fp8_recipe", ""))), req.options)));
  // Packed rows: "a,b,c" or "zipf:N" (drawn from --seed), recorded as the lengths.
  if (req.options.contains("seq_lens")) {
    const nlohmann::json& v = req.options.at("seq_lens");
    const std::string spec = v.is_string() ? v.get<std::string>() : v.dump();
    params["seq_lens"] =
        cp::parse_seq_lens(spec, params.at("seq").get<int64_t>(), req.seed, params.value("pad_to", int64_t{1}),
                           params.value("tail_padding", int64_t{0}));
    params["seq_lens_spec"] = spec;
  }
  return params;
}

// Together they exercise every dimension and variant: TP with SP, CP by
// ring / all-to-all / all-gather / both, EP with and without ETP, PP with
// 1F1B (over 2 and 4 stages), interleaved, ZB-H1 and ZB-V (I/W split), DP
// with Adam and ZeRO-1, gradient buckets of several layers (bucket_mb 0.3)
// reduced during the backward and ZeRO gathers during the next forward
// (alone, and under pipelines whose backward splits I and W), and all six at
// once from 16 ranks (with MLA's head dims and padded rows); one recipe reads its tokens through the Megatron
// dataset reader (own_dataset) and packs four sequences in a row with
// padding between them and after (one of length 1, one empty), attending in
// a sliding window of 8 within each; padded rows run under TP + SP, the
// ring, Ulysses, a2a+p2p and the all-gather too; grouped-
// query attention runs under TP (2:1), the ring (4:1), Ulysses (4:1, its one
// KV head replicated on the group of two) and a2a+p2p (2:1), and with MLA's
// head dims (v narrower than q and k) in the same recipes and under the
// all-gather. ci keeps the first ones of each count.
// TransformerEngine's recipes at 1, 2, 4 and 8 ranks: delayed over two
// pipeline microbatches at one rank (the step's amax is the microbatches'
// max), current under TP + SP, MXFP8 over two pipeline stages, delayed under
// TP + SP x DP (the amaxes reduced over both), block scaling under
// TP + SP x CP x DP, and all four of those with pipeline stages at 16;
// every profile keeps them.
std::vector<Recipe> fp8_recipes(int ranks) {
  const bool sp = true;
  switch (ranks) {
    case 1: return {recipe(par(1, 1, 1, 1), {{kFp8Dense, "delayed"}, {"microbatches", 2}})};
    case 2:
      return {recipe(par(2, 1, 1, 1, 1, sp), {{kFp8Dense, "current"}}),
              recipe(par(1, 1, 2, 1), {{kFp8Dense, "mxfp8"}, {"microbatches", 2}})};
    case 4: return {recipe(par(2, 1, 1, 2, 1, sp), {{kFp8Dense, "delayed"}})};
    case 8: return {recipe(par(2, 2, 1, 2, 1, sp), {{kFp8Dense, "block"}})};
    case 16: return {recipe(par(2, 2, 2, 2, 1, sp), {{kFp8Dense, "current"}, {"microbatches", 2}})};
    default: return {recipe(par(1, 1, 1, ranks), {{kFp8Dense, "current"}})};
  }
}

Recipe with_fp8_linears(Recipe r) {
  if (!r.options.contains(kFp8Dense)) r.options[kFp8Dense] = "current";
  return r;
}

std::vector<Recipe> recipes(int ranks, Profile profile) {
  const bool sp = true;
  const nlohmann::json zero_overlap = {{"zero", true}, {"overlap_grad_reduce", true}, {"overlap_param_gather", true}};
  auto with = [](nlohmann::json options, const nlohmann::json& more) {
    options.update(more);
    return options;
  };
  std::vector<Recipe> all;
  switch (ranks) {
    case 1: all = {recipe(par(1, 1, 1, 1), {{"microbatches", 2}})}; break;
    case 2:
      all = {recipe(par(2, 1, 1, 1, 1, sp), {{kGroupedKv, 2}, {kMlaHeadDims, true}}),
             recipe(par(1, 2, 1, 1), {{"own_dataset", true},
                                      {kPaddedRows, true},
                                      {kGroupedKv, 4},
                                      {"window", 8},
                                      {kMlaHeadDims, true},
                                      {"recompute", "selective"}}),
             recipe(par(1, 1, 2, 1), {{"microbatches", 2}, {"recompute", "full"}}),
             recipe(par(1, 1, 1, 2, 2), with(zero_overlap, {{"bucket_mb", 0.3}}))};
      break;
    case 4:
      all = {recipe(par(2, 2, 1, 1, 2, sp), {{kPaddedRows, true}, {"recompute", "full"}}),
             recipe(par(1, 1, 2, 2, 2), with({{"microbatches", 2}, {"schedule", "zb-h1"}}, zero_overlap)),
             recipe(par(2, 1, 2, 1, 1, sp, 2), {{"microbatches", 2}, {"schedule", "interleaved"}}),
             recipe(par(1, 2, 1, 2),  // 1 KV head on 2: replicated; CP cuts the sequence in two halves
                    {{"cp_comm", "a2a"},
                     {"cp_layout", "contiguous"},
                     {kGroupedKv, 4},
                     {kMlaHeadDims, true},
                     {kPaddedRows, true}}),
             recipe(par(1, 1, 4, 1), {{"microbatches", 4}, {"schedule", "1f1b"}})};
      break;
    case 8:
      all = {
          recipe(par(2, 2, 2, 1, 2, sp), {{"microbatches", 2}}),
          recipe(par(1, 4, 1, 2),
                 {{"cp_comm", "a2a+p2p"}, {"a2a_size", 2}, {kGroupedKv, 2}, {kMlaHeadDims, true}, {kPaddedRows, true}}),
          recipe(par(1, 1, 1, 8), {{"overlap_grad_reduce", true}, {"bucket_mb", 0.3}}),
          recipe(par(2, 1, 2, 2, 4, sp, 2, 1), with({{"microbatches", 2}, {"schedule", "zb-v"}}, zero_overlap))};
      break;
    case 16:
      all = {
          recipe(par(2, 2, 2, 2, 2, sp), {{"microbatches", 2}, {kMlaHeadDims, true}, {kPaddedRows, true}}),
          recipe(par(2, 2, 2, 2, 4, sp, 2, 1), {{"microbatches", 2},
                                                {"schedule", "zb-v"},
                                                {"zero", true},
                                                {"cp_comm", "allgather"},
                                                {kMlaHeadDims, true},
                                                {kPaddedRows, true}}),
          recipe(par(1, 2, 2, 4, 8, false, 2), {{"microbatches", 2}, {"schedule", "interleaved"}, {"cp_comm", "a2a"}})};
      break;
    default: all = {recipe(par(1, 1, 1, ranks))};
  }
  if (profile == Profile::ci && ranks >= 8) all.resize(ranks == 8 ? 2 : 1);  // two shared cores
  return all;
}

namespace {
std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}
}  // namespace

// With pipeline stages, 2 pp microbatches per DP replica where the batch
// allows (the 1F1B bubble is then (pp-1)/(3pp-1)), else one.
Recipe recipe_for(const ParallelConfig& p, const nlohmann::json& params) {
  const int64_t per_replica = params.value("batch", int64_t{16}) / p.dp;
  const int m = p.pp > 1 && per_replica % (2 * p.pp) == 0 ? 2 * p.pp : 1;
  return {p, {{"microbatches", m}}};
}

model::GptConfig recipe_model(const Recipe& r, const nlohmann::json& params) {
  nlohmann::json merged = params;
  for (auto it = r.options.begin(); it != r.options.end(); ++it)
    if (!merged.contains(it.key())) merged[it.key()] = it.value();
  return model::gpt_config_from_json(merged);
}

std::vector<Recipe> factorisations(int ranks, const nlohmann::json& params) {
  const model::GptConfig base = model::gpt_config_from_json(params);
  std::vector<Recipe> out;
  for (int tp : divisors(ranks))
    for (int cp : divisors(ranks / tp))
      for (int pp : divisors(ranks / tp / cp)) {
        const int dp = ranks / tp / cp / pp;
        for (int ep : divisors(tp * cp * dp)) {
          if (base.moe_layer_count() == 0 && ep > 1) continue;
          const Recipe r = recipe_for(par(tp, cp, pp, dp, ep, tp > 1), params);
          const ParallelConfig& p = r.parallel;
          model::GptConfig c = base;
          c.microbatches = r.options.at("microbatches").get<int>();
          try {
            validate(p, ranks);
            model::validate(c, p);
          } catch (const UsageError&) {
            continue;
          }
          out.push_back(r);
        }
      }
  return out;
}

std::string recipe_name(const ParallelConfig& p) {
  std::string s = cat("tp", p.tp);
  if (p.sp) s += "-sp";
  s += cat("-cp", p.cp, "-pp", p.pp, "-dp", p.dp);
  if (p.ep > 1) s += cat("-ep", p.ep);
  if (p.etp > 0 && p.etp != p.tp) s += cat("-etp", p.etp);
  if (p.vpp > 1) s += cat("-vpp", p.vpp);
  return s;
}

ParallelConfig parse_recipe(const std::string& text, int ranks) {
  ParallelConfig p;
  p.dp = 0;
  for (const std::string& part : split(text, '-')) {
    if (part == "sp") {
      p.sp = true;
      continue;
    }
    size_t digits = part.find_first_of("0123456789");
    const std::string dim = part.substr(0, digits);
    int value = 0;
    try {
      value = digits == std::string::npos ? -1 : std::stoi(part.substr(digits));
    } catch (const std::exception&) {
      value = -1;
    }
    require(value > 0, cat("--set configs: '", part, "' in '", text, "' must look like tp2, cp4, ..., or sp"));
    const std::optional<int ParallelConfig::*> size = find_named<int ParallelConfig::*>({{"tp", &ParallelConfig::tp},
                                                                                         {"cp", &ParallelConfig::cp},
                                                                                         {"pp", &ParallelConfig::pp},
                                                                                         {"dp", &ParallelConfig::dp},
                                                                                         {"ep", &ParallelConfig::ep},
                                                                                         {"etp", &ParallelConfig::etp},
                                                                                         {"vpp", &ParallelConfig::vpp}},
                                                                                        dim);
    if (!size)
      throw UsageError(
          cat("--set configs: '", part, "' in '", text, "' names no dimension (tp, cp, pp, dp, ep, etp, vpp)"));
    p.*(*size) = value;
  }
  if (p.dp == 0) p.dp = std::max(1, ranks / (p.tp * p.cp * p.pp));
  validate(p, ranks);
  return p;
}

CaseConfig make_config(const SweepRequest& req, const nlohmann::json& params, const Recipe& r, DType dtype) {
  CaseConfig c;
  c.params = params;
  for (auto it = r.options.begin(); it != r.options.end(); ++it)  // the user's choices win over a recipe's
    if (!req.options.contains(it.key())) c.params[it.key()] = it.value();
  for (const std::string& key : step_keys())
    if (req.options.contains(key)) c.params[key] = req.options.at(key);
  if (c.params.contains(kPaddedRows)) {
    c.params.erase(kPaddedRows);
    const int64_t seq = c.params.at("seq").get<int64_t>(), P = 2 * int64_t{r.parallel.cp}, m = seq / P;
    const bool user_packing =
        req.options.contains("seq_lens") || req.options.contains("pad_to") || req.options.contains("tail_padding");
    if (!user_packing && seq % P == 0 && m >= 4) {
      c.params["seq_lens"] = std::vector<int64_t>{(m - 3) * P - P / 2 + 1, 1, 0, P / 2};
      c.params["seq_lens_spec"] = cat((m - 3) * P - P / 2 + 1, ",1,0,", P / 2);
      c.params["pad_to"] = P;
      c.params["tail_padding"] = P;
    }
  }
  if (c.params.contains(kGroupedKv)) {
    const int64_t ratio = c.params.at(kGroupedKv).get<int64_t>(), heads = c.params.at("heads").get<int64_t>();
    c.params.erase(kGroupedKv);
    if (!req.options.contains("kv_heads") && heads % ratio == 0) {
      nlohmann::json grouped = c.params;
      grouped["kv_heads"] = heads / ratio;
      try {  // the user's sizes may leave too few KV heads for this config's TP or Ulysses split
        model::validate(model::gpt_config_from_json(grouped), r.parallel);
        c.params = std::move(grouped);
      } catch (const UsageError&) {
      }
    }
  }
  if (c.params.contains(kMlaHeadDims)) {
    c.params.erase(kMlaHeadDims);
    const int64_t heads = c.params.at("heads").get<int64_t>(), hidden = c.params.at("hidden").get<int64_t>();
    const int64_t dv = heads > 0 ? hidden / heads : 0;
    if (!req.options.contains("head_dim") && !req.options.contains("v_head_dim") && dv > 0 && dv % 2 == 0) {
      c.params["head_dim"] = dv + dv / 2;
      c.params["v_head_dim"] = dv;
    }
  }
  if (c.params.contains(kFp8Dense)) {
    const std::string name = c.params.at(kFp8Dense).get<std::string>();
    c.params.erase(kFp8Dense);
    if (!req.options.contains("moe_every") && !req.options.contains("moe_pattern")) c.params["moe_every"] = 0;
    if (!req.options.contains("fp8_recipe"))
      c.params.update(ops::fp8_recipe_json(ops::default_fp8_recipe(ops::parse_fp8_scaling(name))));
  }
  // ... and so does the user's token source.
  if (req.options.contains("own_dataset")) c.params["own_dataset"] = req.options.at("own_dataset");
  else if (req.options.contains("data")) c.params.erase("own_dataset");
  c.parallel = r.parallel;
  c.ranks = req.ranks;
  c.device = req.device;  // the sweep's validation reads it (cuDNN attention, FP8 linears on the host only)
  c.dtype = c.params.contains("fp8_recipe") && req.dtypes.empty() ? DType::bf16 : dtype;  // FP8 linears, bf16 storage
  return c;
}

void validate_dtype(DType dtype, const model::GptConfig& model) {
  require(dtype == DType::f32 || dtype == DType::bf16,
          cat("--dtype ", dtype_name(dtype), ": step/train runs f32 or bf16 (f16 would need loss scaling)"));
  require(dtype == DType::f32 || model.moe_layer_count() == 0,
          cat("--dtype bf16 needs a dense model (--set moe_every=0), not ", model.moe_layer_count(),
              " MoE layers: bf16 rounding routes tokens to other experts than the float64 reference"));
}

std::vector<OptionSpec> model_options(std::vector<OptionSpec> case_options) {
  std::vector<OptionSpec> options{
      OptionSpec::size("vocab", "vocabulary size"),
      OptionSpec::size("hidden", "hidden size"),
      OptionSpec::size("heads", "attention heads"),
      OptionSpec::size("kv_heads", "key/value heads (GQA; default heads): each serves heads / kv_heads query heads"),
      OptionSpec::size("head_dim", "query/key head dimension (default hidden / heads)"),
      OptionSpec::size("v_head_dim",
                       "value head dimension (MLA: DeepSeek-V3's 128 beside head_dim 192; default "
                       "head_dim)"),
      OptionSpec::size("ffn", "dense FFN size"),
      OptionSpec::size("layers", "transformer layers"),
      OptionSpec::size("seq", "sequence length"),
      OptionSpec::text("seq_lens",
                       "packed rows (THD): sequence lengths a,b,c summing to --seq, or zipf:N; with "
                       "pad_to or tail_padding, the padded lengths and the tail fill --seq"),
      OptionSpec::integer("pad_to", 1, kMaxDimension,
                          "packed rows: each sequence padded to a multiple of this many rows (pad_between_seqs)"),
      OptionSpec::integer("tail_padding", 0, kMaxDimension, "packed rows: padding rows after the last sequence"),
      OptionSpec::integer("window", 0, kMaxDimension,
                          "causal sliding window of every layer's attention (TransformerEngine's window_size "
                          "(LEFT, 0)), within each packed sequence; default: none, one 2-rank recipe 8"),
      OptionSpec::integer("moe_every", 0, kMaxDimension, "layer i is MoE when i % moe_every == 0 (0: dense)"),
      OptionSpec::text("moe_pattern", "one digit per layer: 1 MoE, 0 dense (wins over moe_every)"),
      OptionSpec::integer("experts", 1, 65536, "experts per MoE layer"),
      OptionSpec::integer("topk", 1, 65536, "experts per token"),
      OptionSpec::size("moe_ffn", "expert FFN size"),
      OptionSpec::choice("dispatcher", {"alltoall", "allgather"}, "MoE token dispatcher"),
      OptionSpec::size("batch", "global batch (sequences per step)"),
      OptionSpec::choice("cp_layout", {"contiguous", "zigzag"}, "how CP cuts the sequence"),
      OptionSpec::boolean("regather", "SP: save input shards and all-gather them again in backward"),
      OptionSpec::number("lr", 1e-12, 10, "Adam learning rate"),
      OptionSpec::number("adam_eps", 1e-30, 1, "Adam epsilon"),
      OptionSpec::integer("steps", 1, 1000, "training steps checked against the reference"),
      OptionSpec::integer("microbatches", 1, 1 << 20, "pipeline microbatches per DP replica and step"),
      OptionSpec::choice("schedule", pp::schedule_names(), "pipeline schedule"),
      OptionSpec::choice("cp_comm", cp::variant_names(), "context-parallel attention variant"),
      ops::attention_impl_option(),
      OptionSpec::integer("a2a_size", 1, 65536, "a2a+p2p: Ulysses group size"),
      OptionSpec::boolean("zero", "ZeRO-1: optimizer state sharded over the gradient groups"),
      OptionSpec::number("bucket_mb", 0, 1e6, "gradient bucket size in MB of f32 gradients (0: one layer per bucket)"),
      OptionSpec::boolean("overlap_grad_reduce", "reduce each gradient bucket as soon as its gradients are final"),
      OptionSpec::boolean("overlap_param_gather", "ZeRO: gather each bucket's parameters during the next forward"),
      OptionSpec::choice("recompute", model::recompute_names(),
                         "activation recomputation: selective (the attention core again in the backward), full "
                         "(each layer's forward again); gradients equal no recomputation's bit for bit"),
      OptionSpec::text("data", "a Megatron indexed dataset prefix (PREFIX.idx, PREFIX.bin); default: random tokens"),
      OptionSpec::boolean("own_dataset", "tokens from a Megatron indexed dataset the run writes first (not with data)"),
      peak_tflops_option()};
  for (OptionSpec& option : ops::fp8_recipe_options()) {
    if (option.name == "fp8_recipe")
      option.help +=
          "; the dense layers' QKV, output, fc1 and fc2 linears (needs --set moe_every=0); default: "
          "f32 or bf16, and FP8 recipes of their own at 1, 2, 4 and 8 ranks";
    options.push_back(std::move(option));
  }
  options.insert(options.end(), case_options.begin(), case_options.end());
  return options;
}

MemoryEstimate step_memory(const CaseConfig& c) {
  const model::GptConfig m = model::gpt_config_from_json(c.params);
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.heads) * m.head_dim;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim, v = static_cast<double>(m.kv_heads) * m.v_head_dim;
  const double o = static_cast<double>(m.heads) * m.v_head_dim;
  const int moe_layers = m.moe_layer_count();
  const double layer_params =
      h * (q + kv + v + o) + (m.layers - moe_layers) * 2 * h * m.ffn / std::max<int64_t>(m.layers, 1);
  const double params = 2 * m.vocab * h + m.layers * layer_params + moe_layers * 2.0 * m.experts * h * m.moe_ffn;
  const double tokens = static_cast<double>(m.batch) * m.seq;
  const double activations = tokens * (m.layers * (12 * h + 2 * std::max<int64_t>(m.ffn, m.moe_ffn)) + m.vocab);
  const ParallelConfig& p = c.parallel;
  const double shard = 4.0 * (4 * params / (p.tp * p.pp) + activations / c.ranks);
  const double reference = 8.0 * (4 * params + activations);
  return {c.device == Device::host ? shard + reference : reference, c.device == Device::host ? 0 : shard};
}

void validate_config(const CaseConfig& c) {
  const model::GptConfig model = model::gpt_config_from_json(c.params);
  validate_dtype(c.dtype, model);
  const int64_t steps = c.params.value("steps", int64_t{3});
  require(steps >= 1, cat("--set steps=", steps, " must be at least 1"));
  model::validate(model, c.parallel);
  ops::require_attention_impl_runs(model.attention_impl, c.device);
  require(!model.fp8 || c.device == Device::host,
          "--set fp8_recipe: step/train runs its FP8 linears on the host only (ops/gemm_fp8 has the CUDA product)");
  model::token_source(model, 0);  // the dataset's format and its fit to the model (--vocab, --seq)
}

}  // namespace sextant::step
