// The shards a rank holds and the inputs it generates: every rank draws its
// own rows of the global tensors (kernels/ops/random.h), by token, so that
// any CP size, layout or grouping sees the same values. Padding rows of a
// packed stream are zeros.
#include "harness/rng.h"
#include "kernels/ops/random.h"
#include "suites/attention/attention.h"

namespace sextant::attention {

Shard shard_of(const Problem& p, const ParallelConfig& par, const RankCoords& at) {
  Shard s;
  s.batch = p.batch / par.dp, s.batch0 = at.dp * s.batch;
  s.heads = p.heads / par.tp, s.head0 = at.tp * s.heads;
  s.kv_heads = p.kv_heads / par.tp, s.kv_head0 = at.tp * s.kv_heads;
  s.chunks = p.packed() ? cp::shard_chunks(p.layout, p.packing, par.cp, at.cp)
                        : cp::shard_chunks(p.layout, p.seq, par.cp, at.cp);
  for (const cp::Chunk& c : s.chunks) s.rows += c.length;
  return s;
}

Shard whole(const Problem& p) { return {0, p.batch, 0, p.heads, 0, p.kv_heads, {{0, p.rows()}}, p.rows()}; }

Tensor token_rows(const Problem& p, const Tensor& t, int dim) {
  if (!p.packed()) return t;
  const std::vector<int64_t> starts = p.packing.cu_seqlens_padded();
  std::vector<Tensor> parts;
  for (size_t i = 0; i < p.packing.lengths.size(); ++i)
    parts.push_back(narrow(t, dim, starts[i], p.packing.lengths[i]));
  return concat(parts, dim);
}

namespace {

// Consecutive rows of a chunk that hold consecutive tokens (token >= 0) or
// padding (token -1).
struct Piece {
  int64_t token = 0, length = 0;
};
std::vector<Piece> pieces_of(const Problem& p, const cp::Chunk& c) {
  if (!p.packed()) return {{c.start, c.length}};
  std::vector<Piece> out;
  for (int64_t row = c.start; row < c.start + c.length; ++row) {
    const int64_t t = cp::token_of_row(p.packing, row);
    const bool extends = !out.empty() && (t < 0 ? out.back().token < 0
                                                : out.back().token >= 0 && t == out.back().token + out.back().length);
    if (extends) ++out.back().length;
    else out.push_back({t, 1});
  }
  return out;
}

// The shard of a global [batch, seq, heads, dim] tensor of tokens, chunk by
// chunk, padding rows zero.
Tensor shard_tensor(const Problem& p, const Shard& s, bool kv, int64_t dim, const char* name, double scale, DType dtype,
                    uint64_t seed, Device device) {
  const int64_t heads = kv ? p.kv_heads : p.heads, h0 = kv ? s.kv_head0 : s.head0, h = kv ? s.kv_heads : s.heads;
  const RandomSpec spec{seed, tensor_id(name), scale};
  std::vector<Tensor> parts;
  for (const cp::Chunk& c : s.chunks)
    for (const Piece& piece : pieces_of(p, c))
      parts.push_back(piece.token < 0 ? Tensor::zeros({s.batch, piece.length, h, dim}, dtype, device)
                                      : ops::random_block({p.batch, p.seq, heads, dim}, {s.batch0, piece.token, h0, 0},
                                                          {s.batch, piece.length, h, dim}, dtype, spec, device));
  return parts.size() == 1 ? parts[0] : concat(parts, 1);
}

}  // namespace

// Scales: q.k / sqrt(d) has standard deviation 2 * 1.5 / 3 = 1, a softmax
// that is neither flat nor one-hot.
Inputs make_inputs(const Problem& p, const Shard& s, DType dtype, uint64_t seed, Device device) {
  return {shard_tensor(p, s, false, p.head_dim, "attention.q", 2.0, dtype, seed, device),
          shard_tensor(p, s, true, p.head_dim, "attention.k", 1.5, dtype, seed, device),
          shard_tensor(p, s, true, p.v_head_dim, "attention.v", 1.0, dtype, seed, device),
          shard_tensor(p, s, false, p.v_head_dim, "attention.dout", 1.0, dtype, seed, device)};
}

Inputs to_device(const Inputs& in, Device device) {
  if (in.q.device() == device) return in;
  return {in.q.to(device), in.k.to(device), in.v.to(device), in.dout.to(device)};
}

}  // namespace sextant::attention
