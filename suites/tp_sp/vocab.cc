// Case tp_sp/vocab: vocabulary-parallel embedding -> LM head (column-parallel,
// output split by vocabulary) -> vocabulary-parallel cross-entropy, mean over
// all tokens (kernels/tensor_parallel/vocab.h).
#include "kernels/tensor_parallel/vocab.h"

#include "harness/rng.h"
#include "kernels/tensor_parallel/regions.h"
#include "reference/cross_entropy.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "suites/tp_sp/tp_sp.h"

namespace sextant::tp_sp {
namespace {

const char* kPrefix = "tp_sp.vocab";

// Deterministic token ids in [0, vocab) for samples [first, first + count) of the global batch.
std::vector<int64_t> tokens(const Env& e, const char* name, int64_t first, int64_t count) {
  std::vector<int64_t> out(static_cast<size_t>(count * e.p.seq));
  const uint64_t id = tensor_id(std::string(kPrefix) + name);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<int64_t>(random_bits(e.seed, id, first * e.p.seq + i) % static_cast<uint64_t>(e.p.vocab));
  return out;
}

struct Outputs {
  Tensor logits;    // [b, s, V/tp]
  Tensor row_loss;  // [b, s] compute dtype
  Tensor dembedding;
  tp::LinearGrads head;
  size_t activation_bytes = 0;
};

// Forward + backward on `batch` samples whose loss is averaged over `global_tokens`.
Outputs run_block(const tp::TpGroup& g, const tp::VocabWeights& w, const std::vector<int64_t>& ids,
                  const std::vector<int64_t>& targets, int64_t batch, int64_t seq, int64_t global_tokens) {
  Outputs out;
  tp::EmbeddingSaved emb_saved;
  tp::ColumnSaved head_saved;
  tp::CrossEntropySaved ce_saved;
  Tensor x = tp::embedding_forward(g, w.embedding, ids, batch, seq, emb_saved);  // [b, s/tp | s, h]
  out.logits = tp::column_parallel_forward(g, w.head, x, head_saved);            // [b, s, V/tp]
  out.row_loss = tp::vocab_parallel_cross_entropy_forward(g, out.logits, targets, w.embedding.vocab_start, ce_saved)
                     .reshape({batch, seq});
  out.activation_bytes = emb_saved.bytes() + head_saved.bytes() + ce_saved.bytes();
  Tensor dlogits = tp::vocab_parallel_cross_entropy_backward(g, ce_saved, 1.0f / static_cast<float>(global_tokens));
  Tensor dx = tp::column_parallel_backward(g, w.head, head_saved, dlogits, out.head);  // [b, s/tp | s, h]
  tp::embedding_backward(g, w.embedding, emb_saved, dx, out.dembedding);
  return out;
}

struct VocabState {
  Env env;
  tp::VocabWeights w;
  std::vector<int64_t> ids, targets;  // this DP rank's samples, all tokens
  Outputs out;
};

void fwd_bwd(VocabState& s) {
  const Problem& p = s.env.p;
  s.out = run_block(*s.env.tp, s.w, s.ids, s.targets, s.env.at.batch, p.seq, p.tokens());
  tp::all_reduce_grads(*s.env.dp, {&s.out.dembedding, &s.out.head.dw});
}

VocabState setup(CaseContext& ctx) {
  VocabState s;
  s.env = make_env(ctx);
  const Problem& p = s.env.p;
  const Placement& at = s.env.at;
  s.w = tp::init_vocab_weights(p.vocab, p.hidden, at.tp_rank, p.tp, s.env.dtype, s.env.seed, kPrefix, s.env.device);
  s.ids = tokens(s.env, ".ids", at.batch_offset, at.batch);
  s.targets = tokens(s.env, ".targets", at.batch_offset, at.batch);
  return s;
}

struct Reference {
  Tensor logits, row_loss, dembedding, dhead;
};
Reference reference(const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, const tp::VocabWeights& w,
                    const Problem& p) {
  Reference r;
  const Tensor x = ref::embedding_forward(ids, w.embedding.table).reshape({p.batch, p.seq, p.hidden});
  r.logits = ref::linear_forward(x, w.head.w);
  r.row_loss = ref::cross_entropy_row_loss(r.logits, targets).reshape({p.batch, p.seq});
  const Tensor dlogits = ref::cross_entropy_backward(r.logits, targets, ref::Reduction::mean);
  const ref::LinearGrads g = ref::linear_backward(dlogits, x, w.head.w, /*has_bias=*/false);
  r.dhead = g.dw;
  r.dembedding = ref::embedding_backward(ids, g.dx, p.vocab);
  return r;
}

void check(VocabState& s, Checker& checker) {
  fwd_bwd(s);
  const Problem& p = s.env.p;
  const Placement& at = s.env.at;
  Reference r;
  Outputs base;
  if (checker.is_root()) {
    const auto ids = tokens(s.env, ".ids", 0, p.batch), targets = tokens(s.env, ".targets", 0, p.batch);
    const auto full = tp::init_vocab_weights(p.vocab, p.hidden, 0, 1, s.env.dtype, s.env.seed, kPrefix);
    auto as_tensor = [](const std::vector<int64_t>& v) {
      return Tensor::from_values({static_cast<int64_t>(v.size())}, std::vector<double>(v.begin(), v.end()), DType::f64);
    };
    checker.input("ids", as_tensor(ids));
    checker.input("targets", as_tensor(targets));
    checker.input("embedding", full.embedding.table);
    checker.input("head", full.head.w);
    r = reference(ids, targets, full, p);
    // The baseline: the same kernels on this rank's device, then to host memory.
    const auto weights = s.env.device == Device::host ? full
                                                      : tp::init_vocab_weights(p.vocab, p.hidden, 0, 1, s.env.dtype,
                                                                               s.env.seed, kPrefix, s.env.device);
    base = run_block(baseline_group(s.env), weights, ids, targets, p.batch, p.seq, p.tokens());
    move_to_host({&base.logits, &base.row_loss, &base.dembedding, &base.head.dw, &base.head.db});
  }
  const int64_t vocab_offset = s.w.embedding.vocab_start;
  check_gathered(checker, "logits", OpClass::linear, {{s.out.logits, {at.batch_offset, 0, vocab_offset}}},
                 {p.batch, p.seq, p.vocab}, base.logits, r.logits);
  check_gathered(checker, "row_loss", OpClass::loss, {{s.out.row_loss, {at.batch_offset, 0}}}, {p.batch, p.seq},
                 base.row_loss, r.row_loss);
  check_gathered(checker, "dembedding", OpClass::linear, {block_along(s.out.dembedding, 0, vocab_offset)},
                 {p.vocab, p.hidden}, base.dembedding, r.dembedding);
  check_gathered(checker, "dhead", OpClass::linear, {block_along(s.out.head.dw, 1, vocab_offset)}, {p.hidden, p.vocab},
                 base.head.dw, r.dhead);
}

Metrics metrics(VocabState& s, const RegionTimes& times) {
  const Problem& p = s.env.p;
  const double flops = 3 * tp::linear_forward_flops(p.tokens(), p.hidden, p.vocab);  // the LM head; lookups are free
  const size_t head_input_bytes = static_cast<size_t>(s.env.at.batch * p.seq * p.hidden) * dtype_size(s.env.dtype);
  return block_metrics(s.env, times, flops, s.out.activation_bytes, 0, 0, head_input_bytes, false);
}

}  // namespace

CaseDef vocab_case() {
  return make_block_case(BlockCase<VocabState>{
      .name = "vocab",
      .summary = "vocab-parallel embedding, LM head and cross-entropy (max, sum-exp, target all-reduced over TP)",
      .parts = {.vocab = true},
      .width = BlockWidth::vocab,
      .kernel_faults = {KernelFault::cross_entropy_gradient, KernelFault::embedding_backward_duplicates},
      .table_metrics = {"tflops_per_rank", "activation_bytes_per_rank"},
      .setup = setup,
      .fwd_bwd = fwd_bwd,
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, vocab_case);

}  // namespace sextant::tp_sp
