#include "kernels/attention/cp_attention.h"

#include <algorithm>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/attention/kv_exchange.h"
#include "kernels/attention/ulysses.h"

namespace sextant::cp {

namespace {

struct Geometry {
  int a2a_size = 1, a2a_rank = 0, kv_size = 1, kv_rank = 0;
  int cp() const { return a2a_size * kv_size; }
  int cp_rank() const { return kv_rank * a2a_size + a2a_rank; }
};

Geometry geometry_of(const Comms& comms) {
  Geometry g;
  if (comms.a2a) g.a2a_size = comms.a2a->size(), g.a2a_rank = comms.a2a->rank();
  if (comms.kv) g.kv_size = comms.kv->size(), g.kv_rank = comms.kv->rank();
  return g;
}

// The chunks of CP rank c as the kernel believes them (the planted zigzag
// faults swap a rank's two chunks, or zigzag a packed stream as one sequence).
std::vector<Chunk> chunks_of(const Options& o, int cp, int c) {
  std::vector<Chunk> chunks = o.packing.packed() && o.fault != Fault::thd_zigzag_stream
                                  ? shard_chunks(o.layout, o.packing, cp, c)
                                  : shard_chunks(o.layout, o.seq, cp, c);
  if (o.fault == Fault::zigzag_order) std::reverse(chunks.begin(), chunks.end());
  return chunks;
}

// The packing the mask reads: under the planted off-by-one every boundary
// between sequences sits one row late (the rows stay where they are).
Packing mask_packing(const Options& o) {
  Packing p = o.packing;
  if (o.fault == Fault::cu_seqlens_off_by_one && p.padded.size() > 1) ++p.padded.front(), --p.padded.back();
  return p;
}

// Under padding_rows_attend: every row named by the stream position of the
// segment it lies in, a sequence's padding rows by its first row (and the
// padding after the last sequence by its own first row).
std::vector<int64_t> segment_of_rows(const Packing& packing, const std::vector<int64_t>& rows) {
  const std::vector<int64_t> starts = packing.cu_seqlens_padded();
  std::vector<int64_t> names;
  for (int64_t row : rows) names.push_back(*(std::upper_bound(starts.begin(), starts.end() - 1, row) - 1));
  return names;
}

// Positions (and, packed, sequences) of each kv member's rows: after the
// Ulysses stage a member holds the rows of its whole a2a group (A
// consecutive CP ranks), in group order.
BlockPlan plan_for(const Options& o, const Geometry& g, Stats* stats) {
  BlockPlan plan{.causal = o.causal,
                 .positions = MemberPositions(g.kv_size),
                 .sequences = {},
                 .fault = o.fault,
                 .fault_magnitude = o.fault_magnitude,
                 .stats = stats,
                 .impl = o.attention_impl,
                 .window = o.window};
  const bool packed = o.causal && o.packing.packed() && o.fault != Fault::thd_cross_boundary;
  if (packed) plan.sequences.resize(g.kv_size);
  for (int m = 0; m < g.kv_size; ++m)
    for (int a = 0; a < g.a2a_size; ++a) {
      std::vector<int64_t> rows = positions_of(chunks_of(o, g.cp(), m * g.a2a_size + a));
      plan.positions[m].insert(plan.positions[m].end(), rows.begin(), rows.end());
      if (!packed) continue;
      std::vector<int64_t> names = o.fault == Fault::padding_rows_attend ? segment_of_rows(mask_packing(o), rows)
                                                                         : sequence_of_rows(mask_packing(o), rows);
      plan.sequences[m].insert(plan.sequences[m].end(), names.begin(), names.end());
    }
  return plan;
}

void check_inputs(const char* op, const Options& o, const Geometry& g, const Tensor& q, const Tensor& k,
                  const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v})
    if (!t->defined() || t->device() != q.device() || t->ndim() != 4)
      throw RuntimeError(cat(op, ": q, k, v must be tensors [b, n, h, d] on one device"));
  if (const std::string problem = ops::window_problem(o.window, o.causal); !problem.empty())
    throw RuntimeError(cat(op, ": ", problem));
  if (o.packing.packed() && (!o.causal || o.packing.rows() != o.seq))
    throw RuntimeError(
        cat(op, ": packed sequences need a causal mask and seq ", o.seq, " = the packed rows ", o.packing.rows()));
  if (q.dim(1) * g.cp() != o.seq || k.dim(1) != q.dim(1) || v.dim(0) != k.dim(0) || v.dim(1) != k.dim(1) ||
      v.dim(2) != k.dim(2))
    throw RuntimeError(cat(op, ": q ", shape_string(q.shape()), ", k ", shape_string(k.shape()), ", v ",
                           shape_string(v.shape()), " do not hold seq ", o.seq, " / cp ", g.cp(),
                           " rows of the same heads"));
}

Tensor scatter(const Comms& c, const Options& o, const Tensor& x) {
  return c.a2a ? scatter_heads(*c.a2a, x, o.fault == Fault::ulysses_swap) : x;
}

// How many copies of each KV head the Ulysses stage sends (ulysses.h).
int64_t replicas(const Comms& c, const Tensor& k) { return c.a2a ? kv_replicas(c.a2a->size(), k.dim(2)) : 1; }

}  // namespace

Forward cp_attention_forward(const Comms& comms, const Options& o, const Tensor& q, const Tensor& k, const Tensor& v,
                             Stats* stats) {
  const Geometry g = geometry_of(comms);
  check_inputs("cp_attention_forward", o, g, q, k, v);
  const BlockPlan plan = plan_for(o, g, stats);
  // [b, n, h, d] -> [b, A n, h/A, d]; KV heads fewer than A travel as r copies each
  const int64_t r = replicas(comms, k);
  const Tensor q2 = scatter(comms, o, q), k2 = scatter(comms, o, replicate_kv_heads(k, r)),
               v2 = scatter(comms, o, replicate_kv_heads(v, r));
  ops::AttentionOut part = comms.kv && o.kv_exchange == KvExchange::allgather
                               ? allgather_forward(*comms.kv, q2, k2, v2, plan)
                               : ring_forward(comms.kv, q2, k2, v2, plan);
  Tensor out = part.out.to(q.dtype());  // round once, before the inverse all-to-all
  if (!comms.a2a) return {out, part.lse};
  return {gather_heads(*comms.a2a, out), gather_heads_stat(*comms.a2a, part.lse)};
}

Grads cp_attention_backward(const Comms& comms, const Options& o, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse, const Tensor& dout, Stats* stats) {
  const Geometry g = geometry_of(comms);
  check_inputs("cp_attention_backward", o, g, q, k, v);
  const BlockPlan plan = plan_for(o, g, stats);
  Tensor delta;  // [b, hq, n] = rowsum(dout * out), before the heads move
  {
    ScopedTimer timer(compute_seconds(stats), compute_clock_on(q.device()));
    delta = ops::attention_delta(out, dout);
  }
  // The backward is stateless: it redoes the forward's all-to-all of q, k, v
  // instead of keeping the head-scattered copies alive between the passes.
  const int64_t r = replicas(comms, k);
  const Tensor q2 = scatter(comms, o, q), k2 = scatter(comms, o, replicate_kv_heads(k, r)),
               v2 = scatter(comms, o, replicate_kv_heads(v, r));
  const Tensor dout2 = scatter(comms, o, dout);
  const Tensor lse2 = comms.a2a ? scatter_heads_stat(*comms.a2a, lse) : lse;
  const Tensor delta2 = comms.a2a ? scatter_heads_stat(*comms.a2a, delta) : delta;
  // cuDNN's blocks read the final out (and compute delta from it themselves).
  const Tensor out2 = o.attention_impl == ops::AttentionImpl::cudnn && !q.is_host() ? scatter(comms, o, out) : Tensor{};
  ops::AttentionGrads grads = comms.kv && o.kv_exchange == KvExchange::allgather
                                  ? allgather_backward(*comms.kv, q2, k2, v2, out2, dout2, lse2, delta2, plan)
                                  : ring_backward(comms.kv, q2, k2, v2, out2, dout2, lse2, delta2, plan);
  Grads result{grads.dq.to(q.dtype()), grads.dk.to(k.dtype()), grads.dv.to(v.dtype())};
  if (!comms.a2a) return result;
  if (r == 1)
    return {gather_heads(*comms.a2a, result.dq), gather_heads(*comms.a2a, result.dk),
            gather_heads(*comms.a2a, result.dv)};
  // The copies' gradients come home in f32 and are summed there, rounded once.
  const bool first_only = o.fault == Fault::kv_replica_first_only;
  Tensor dk = sum_kv_replicas(gather_heads(*comms.a2a, grads.dk), r, first_only);
  Tensor dv = sum_kv_replicas(gather_heads(*comms.a2a, grads.dv), r, first_only);
  return {gather_heads(*comms.a2a, result.dq), dk.to(k.dtype()), dv.to(v.dtype())};
}

}  // namespace sextant::cp
