#include "kernels/model/gpt_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/attention/packing.h"

namespace sextant::model {

int GptConfig::moe_layer_count() const { return static_cast<int>(std::count(moe.begin(), moe.end(), true)); }

std::vector<bool> moe_layer_pattern(int64_t layers, int64_t every, const std::string& pattern) {
  if (!pattern.empty()) {
    require(static_cast<int64_t>(pattern.size()) == layers,
            cat("--set moe_pattern=", pattern, " has ", pattern.size(), " entries but --layers is ", layers,
                " (one 0/1 per layer)"));
    std::vector<bool> out;
    for (char ch : pattern) {
      require(ch == '0' || ch == '1', cat("--set moe_pattern=", pattern, " must hold only 0 (dense) and 1 (MoE)"));
      out.push_back(ch == '1');
    }
    return out;
  }
  require(every >= 0, cat("--set moe_every=", every, " must be 0 (no MoE) or positive"));
  require(every <= layers, cat("--set moe_every=", every, " must be at most --layers ", layers,
                               " (layer i is MoE when i % moe_every == 0)"));
  std::vector<bool> out(static_cast<size_t>(std::max<int64_t>(layers, 0)), false);
  for (int64_t i = 0; every > 0 && i < layers; ++i) out[i] = i % every == 0;
  return out;
}

GptConfig gpt_config_from_json(const nlohmann::json& j) {
  GptConfig c;
  auto i64 = [&](const char* key, int64_t fallback) { return j.contains(key) ? j.at(key).get<int64_t>() : fallback; };
  c.vocab = i64("vocab", c.vocab);
  c.hidden = i64("hidden", c.hidden);
  c.heads = i64("heads", c.heads);
  c.kv_heads = i64("kv_heads", c.heads);
  c.head_dim = i64("head_dim", c.heads > 0 ? c.hidden / c.heads : c.head_dim);
  c.v_head_dim = i64("v_head_dim", c.head_dim);
  c.ffn = i64("ffn", 4 * c.hidden);
  c.layers = i64("layers", c.layers);
  c.seq = i64("seq", c.seq);
  if (j.contains("seq_lens")) c.seq_lens = j.at("seq_lens").get<std::vector<int64_t>>();
  c.pad_to = i64("pad_to", c.pad_to);
  c.tail_padding = i64("tail_padding", c.tail_padding);
  c.window = i64("window", c.window);
  c.moe = moe_layer_pattern(c.layers, i64("moe_every", 0), j.value("moe_pattern", std::string()));
  c.experts = static_cast<int>(i64("experts", c.experts));
  c.topk = static_cast<int>(i64("topk", c.topk));
  c.moe_ffn = i64("moe_ffn", c.ffn);
  c.dispatcher = moe::parse_dispatcher(j.value("dispatcher", std::string("alltoall")));
  c.batch = i64("batch", c.batch);
  c.data = j.value("data", c.data);
  c.own_dataset = j.value("own_dataset", c.own_dataset);
  c.microbatches = static_cast<int>(i64("microbatches", c.microbatches));
  c.schedule = pp::parse_schedule(j.value("schedule", std::string("1f1b")));
  c.cp_comm = cp::parse_variant(j.value("cp_comm", std::string("p2p")), "--set cp_comm");
  c.a2a_size = static_cast<int>(i64("a2a_size", c.a2a_size));
  c.cp_layout = cp::parse_layout(j.value("cp_layout", std::string("zigzag")));
  c.attention_impl = ops::attention_impl_of(j);
  c.regather = j.value("regather", c.regather);
  c.distributed_optimizer = j.value("zero", c.distributed_optimizer);
  c.bucket_mb = j.value("bucket_mb", c.bucket_mb);
  c.overlap_grad_reduce = j.value("overlap_grad_reduce", c.overlap_grad_reduce);
  c.overlap_param_gather = j.value("overlap_param_gather", c.overlap_param_gather);
  if (j.contains("recompute")) {
    const std::string name = j.at("recompute").get<std::string>();
    const std::vector<std::string> names = recompute_names();
    const auto it = std::find(names.begin(), names.end(), name);
    require(it != names.end(), cat("--set recompute=", name, " must be one of ", join(names, ", ")));
    c.recompute = kRecomputeKinds[it - names.begin()];
  }
  c.adam.lr = j.value("lr", c.adam.lr);
  c.adam.eps = j.value("adam_eps", c.adam.eps);
  if (j.contains("fp8_recipe")) c.fp8 = ops::fp8_recipe_from_json(j);
  return c;
}

int64_t GptConfig::predictions_per_row() const {
  if (seq_lens.empty()) return seq;
  return cp::pack_sequences(seq_lens, std::max<int64_t>(pad_to, 1), std::max<int64_t>(tail_padding, 0)).tokens();
}

int64_t layers_per_stage(const GptConfig& c, const ParallelConfig& p) { return c.layers / (p.pp * p.vpp); }

namespace {

void validate_sizes(const GptConfig& c) {
  for (auto [name, value] : {std::pair{"--vocab", c.vocab},
                             {"--hidden", c.hidden},
                             {"--heads", c.heads},
                             {"--kv-heads", c.kv_heads},
                             {"--head-dim", c.head_dim},
                             {"--set v_head_dim", c.v_head_dim},
                             {"--ffn", c.ffn},
                             {"--layers", c.layers},
                             {"--seq", c.seq},
                             {"--batch", c.batch},
                             {"--microbatches", int64_t{c.microbatches}}})
    require_positive(name, value);
  require(c.heads % c.kv_heads == 0, cat("--kv-heads ", c.kv_heads, " must divide --heads ", c.heads,
                                         " (each KV head serves heads / kv_heads query heads)"));
  require(static_cast<int64_t>(c.moe.size()) == c.layers,
          cat("the MoE layer pattern has ", c.moe.size(), " entries but --layers is ", c.layers));
  require(!c.fp8 || c.moe_layer_count() == 0,
          cat("--set fp8_recipe needs a dense model (--set moe_every=0), not ", c.moe_layer_count(),
              " MoE layers: FP8 rounding routes tokens to other experts than the float64 reference"));
  if (c.moe_layer_count() == 0) return;
  require_positive("--experts", c.experts);
  require_positive("--set moe_ffn", c.moe_ffn);
  require(c.topk >= 1 && c.topk <= c.experts, cat("--topk ", c.topk, " must be between 1 and --experts ", c.experts));
}

void validate_tp(const GptConfig& c, const ParallelConfig& p) {
  require_divides("--tp", p.tp, "--heads", c.heads);
  require_divides("--tp", p.tp, "--kv-heads", c.kv_heads);  // TP splits whole KV groups (Megatron's rule)
  require_divides("--tp", p.tp, "--ffn", c.ffn);
  require_divides("--tp", p.tp, "--vocab", c.vocab);
  if (c.moe_layer_count() > 0 && p.tp > 1)
    require(p.sp, cat("MoE layers with --tp ", p.tp,
                      " need --sp (Megatron requires sequence parallelism for expert parallelism under TP)"));
}

// Packed rows: lengths that, with their padding, fill the row and split
// for CP: the padding is the data's, so CP cuts whole padded sequences.
void validate_packed(const GptConfig& c, const ParallelConfig& p) {
  require(c.pad_to >= 1, cat("--set pad_to=", c.pad_to, " must be at least 1"));
  require(c.tail_padding >= 0 && c.tail_padding % c.pad_to == 0,
          cat("--set tail_padding=", c.tail_padding, " must be a multiple of --set pad_to=", c.pad_to));
  require(!c.seq_lens.empty() || (c.pad_to == 1 && c.tail_padding == 0),
          "--set pad_to and tail_padding pad packed sequences: they need --set seq_lens");
  if (c.seq_lens.empty()) return;
  cp::require_packed_lengths("--set seq_lens", c.seq_lens, c.seq, c.pad_to, c.tail_padding);
  const cp::Packing packing = cp::pack_sequences(c.seq_lens, c.pad_to, c.tail_padding);
  if (c.cp_layout == cp::Layout::zigzag && p.cp > 1)
    for (int64_t n : packing.padded)
      require(n % (2 * p.cp) == 0,
              cat("--set seq_lens: a sequence of ", n, " rows (padding included) must be divisible by 2 x --cp ", p.cp,
                  " = ", 2 * p.cp, " (step/train zigzags each sequence; --set pad_to pads them)"));
}

void validate_cp(const GptConfig& c, const ParallelConfig& p) {
  validate_packed(c, p);
  require(c.window >= -1, cat("--set window=", c.window, " must not be negative"));
  const int64_t chunks = cp::layout_chunks(c.cp_layout, p.cp);
  if (c.cp_layout == cp::Layout::zigzag)
    require(c.seq % chunks == 0, cat("2 x --cp ", p.cp, " = ", chunks, " must divide --seq ", c.seq,
                                     " (zigzag layout: 2 chunks per CP rank)"));
  else require_divides("--cp", p.cp, "--seq", c.seq);
  const int64_t local = c.seq / p.cp;
  if (p.sp && p.tp > 1)
    require(local % p.tp == 0, cat("--tp ", p.tp, " must divide seq/cp = ", c.seq, "/", p.cp, " = ", local,
                                   " under --sp (each TP rank holds a sequence shard)"));
  // Ulysses scatters the query heads over its group of A, and the KV heads
  // too, or replicates them where there are fewer (kernels/attention/ulysses.h).
  const cp::VariantInfo& v = cp::variant_info(c.cp_comm);
  auto ulysses = [&](int64_t a, const std::string& group) {
    const int64_t heads = c.heads / p.tp, kv = c.kv_heads / p.tp;
    require(heads % a == 0, cat(group, " must divide heads/tp = ", c.heads, "/", p.tp, " = ", heads, " for cp_comm ",
                                v.name, " (Ulysses scatters heads)"));
    require(kv % a == 0 || a % kv == 0,
            cat(group, " and kv_heads/tp = ", c.kv_heads, "/", p.tp, " = ", kv, " must divide one another for cp_comm ",
                v.name, " (KV heads fewer than the Ulysses group are replicated)"));
  };
  if (v.a2a && !v.kv) ulysses(p.cp, cat("--cp ", p.cp));
  if (v.split()) {
    require(c.a2a_size >= 1 && p.cp % c.a2a_size == 0,
            cat("--set a2a_size=", c.a2a_size, " must divide --cp ", p.cp, " for cp_comm ", v.name));
    ulysses(c.a2a_size, cat("--set a2a_size=", c.a2a_size));
  }
}

void validate_ep(const GptConfig& c, const ParallelConfig& p) {
  if (c.moe_layer_count() == 0) return;
  require_divides("--ep", p.ep, "--experts", c.experts);
  require_divides("--etp", p.expert_tp(), "--set moe_ffn", c.moe_ffn);
}

void validate_dp_comm(const GptConfig& c) {
  require(c.bucket_mb >= 0, cat("--set bucket_mb=", c.bucket_mb, " must be at least 0 (0: one layer per bucket)"));
  require(!c.overlap_param_gather || c.distributed_optimizer,
          "--set overlap_param_gather=true needs --set zero=true (only the distributed optimizer gathers parameters)");
}

void validate_pp_dp(const GptConfig& c, const ParallelConfig& p) {
  const int64_t stages = static_cast<int64_t>(p.pp) * p.vpp;
  require(c.layers % stages == 0, cat("--pp ", p.pp, " x --vpp ", p.vpp, " = ", stages, " must divide --layers ",
                                      c.layers, " (whole layers per pipeline stage)"));
  const int64_t split = static_cast<int64_t>(p.dp) * c.microbatches;
  require(c.batch % split == 0, cat("--dp ", p.dp, " x --microbatches ", c.microbatches, " = ", split,
                                    " must divide --batch ", c.batch, " (whole sequences per microbatch)"));
  pp::validate_schedule_request(c.schedule, p.pp, c.microbatches, p.vpp);
  // The executor's message tags: 2 * stages * microbatches must fit MPI's 32768.
  require(2 * stages * c.microbatches <= 32768,
          cat("2 x stages x --microbatches = ", 2 * stages * c.microbatches, " exceeds MPI's 32768 message tags"));
}

}  // namespace

void validate(const GptConfig& c, const ParallelConfig& p) {
  validate_sizes(c);
  validate_tp(c, p);
  validate_cp(c, p);
  validate_ep(c, p);
  validate_pp_dp(c, p);
  validate_dp_comm(c);
}

}  // namespace sextant::model
