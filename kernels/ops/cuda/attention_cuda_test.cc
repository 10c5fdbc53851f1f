// The CUDA attention block against the host op and a float64 reference, per
// storage dtype (f32 takes the CUDA-core kernels; bf16 and f16 the tensor-core
// kernels up to head_dim 128 and the CUDA-core ones past it): whole
// sequences causal or not, MHA and GQA, sizes off the 64-row tiles; blocks of
// a sharded sequence with global positions (zigzag chunks, a ring step with
// rows that see nothing, fully masked blocks); packed sequences (THD) with
// padding rows; block merging; the delta.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/ops/attention_block.h"
#include "kernels/ops/cuda/cuda_testing.h"
#include "reference/attention.h"

namespace sextant::ops {
namespace {

using testing::gpu;
using testing::host;
using testing::input;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Problem {
  int64_t b, sq, sk, hq, hk, d;
  int64_t dv = 0;  // head dim of v, out, dout (MLA); 0: d
  int64_t v_dim() const { return dv ? dv : d; }
};

struct Inputs {
  Tensor q, k, v, dout;
};

Inputs make_inputs(const Problem& p, DType dt) {
  return {input({p.b, p.sq, p.hq, p.d}, dt, "attn.q", 2.0), input({p.b, p.sk, p.hk, p.d}, dt, "attn.k", 2.0),
          input({p.b, p.sk, p.hk, p.v_dim()}, dt, "attn.v"), input({p.b, p.sq, p.hq, p.v_dim()}, dt, "attn.dout")};
}

// Float64 attention of one block under a positions mask, plain loops that
// read like the math (reference/attention.h covers whole sequences only):
// S = Q K^T / sqrt(d) where key j is visible to query i (key_visible: causal,
// and within its sequence when packed), P = softmax(S),
// O = P V, LSE = log sum exp S; dV = P^T dO, dS = P (dO V^T - rowsum(dO O)),
// dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d). A row that sees no key has
// O = 0, LSE = -inf and no gradient.
struct Reference {
  Tensor out, lse, dq, dk, dv;
};

Reference reference(const Inputs& in, const AttentionMask& mask) {
  const int64_t b = in.q.dim(0), sq = in.q.dim(1), hq = in.q.dim(2), d = in.q.dim(3);
  const int64_t sk = in.k.dim(1), hk = in.k.dim(2), group = hq / hk, dv = in.v.dim(3);
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  const std::vector<double> q = in.q.to_vector(), k = in.k.to_vector(), v = in.v.to_vector(),
                            dout = in.dout.to_vector();
  Reference r{Tensor::zeros(in.dout.shape(), DType::f64), Tensor::empty({b, hq, sq}, DType::f64),
              Tensor::zeros(in.q.shape(), DType::f64), Tensor::zeros(in.k.shape(), DType::f64),
              Tensor::zeros(in.v.shape(), DType::f64)};
  auto qi = [&](int64_t bi, int64_t i, int64_t h) { return ((bi * sq + i) * hq + h) * d; };
  auto kj = [&](int64_t bi, int64_t j, int64_t g) { return ((bi * sk + j) * hk + g) * d; };
  auto oi = [&](int64_t bi, int64_t i, int64_t h) { return ((bi * sq + i) * hq + h) * dv; };  // out, dout
  auto vj = [&](int64_t bi, int64_t j, int64_t g) { return ((bi * sk + j) * hk + g) * dv; };  // v, dv
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t g = h / group;
        std::vector<double> s(sk, kNegInf), p(sk, 0.0), dp(sk, 0.0);
        double m = kNegInf;
        for (int64_t j = 0; j < sk; ++j) {
          if (!key_visible(mask, static_cast<size_t>(i), static_cast<size_t>(j))) continue;
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += q[qi(bi, i, h) + x] * k[kj(bi, j, g) + x];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        if (m == kNegInf) {  // sees nothing
          r.lse.set((bi * hq + h) * sq + i, kNegInf);
          continue;
        }
        double l = 0;
        for (int64_t j = 0; j < sk; ++j) l += (p[j] = s[j] == kNegInf ? 0.0 : std::exp(s[j] - m));
        r.lse.set((bi * hq + h) * sq + i, m + std::log(l));
        double delta = 0;
        for (int64_t x = 0; x < dv; ++x) {
          double o = 0;
          for (int64_t j = 0; j < sk; ++j) o += p[j] / l * v[vj(bi, j, g) + x];
          r.out.set(oi(bi, i, h) + x, o);
          delta += o * dout[oi(bi, i, h) + x];
        }
        for (int64_t j = 0; j < sk; ++j) {
          if (p[j] == 0) continue;
          const double pj = p[j] / l;
          for (int64_t x = 0; x < dv; ++x) dp[j] += dout[oi(bi, i, h) + x] * v[vj(bi, j, g) + x];
          const double ds = pj * (dp[j] - delta);
          for (int64_t x = 0; x < d; ++x) {
            r.dq.set(qi(bi, i, h) + x, r.dq.at(qi(bi, i, h) + x) + ds * k[kj(bi, j, g) + x] * scale);
            r.dk.set(kj(bi, j, g) + x, r.dk.at(kj(bi, j, g) + x) + ds * q[qi(bi, i, h) + x] * scale);
          }
          for (int64_t x = 0; x < dv; ++x)
            r.dv.set(vj(bi, j, g) + x, r.dv.at(vj(bi, j, g) + x) + pj * dout[oi(bi, i, h) + x]);
        }
      }
  return r;
}

// The LSE with the rows that see nothing set to 0, after checking that
// exactly those rows are -inf in `lse` (compare() counts -inf as a failure).
Tensor finite_lse(const Tensor& lse, const Tensor& ref_lse, int64_t& mismatched) {
  Tensor out = host(lse).to(DType::f64);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const bool empty = ref_lse.at(i) == kNegInf;
    if (empty != (out.at(i) == kNegInf)) ++mismatched;
    if (empty) out.set(i, 0.0);
  }
  return out;
}

struct Result {
  Tensor out, lse, dq, dk, dv;
};

Result run(const Inputs& in, const AttentionMask& mask, DType out_dtype, AttentionImpl impl = AttentionImpl::own) {
  const AttentionOut f = attention_block_forward(in.q, in.k, in.v, mask, out_dtype, impl);
  const AttentionGrads g = attention_block_backward(in.q, in.k, in.v, f.out, f.lse, in.dout, mask, impl);
  return {host(f.out), host(f.lse), host(g.dq), host(g.dk), host(g.dv)};
}

// Runs the block on the host and the GPU and checks both against the reference.
// impl: the GPU side's kernels (the host op is the baseline of both).
void expect_conforms(const Problem& p, DType dt, const AttentionMask& mask, const std::string& what,
                     AttentionImpl impl = AttentionImpl::own) {
  SCOPED_TRACE(what + " " + dtype_name(dt) + " d=" + std::to_string(p.d) + " " + attention_impl_name(impl));
  const Inputs in = make_inputs(p, dt);
  const Inputs din{gpu(in.q), gpu(in.k), gpu(in.v), gpu(in.dout)};
  const Result h = run(in, mask, dt), c = run(din, mask, dt, impl);
  const Reference r = reference(in, mask);
  Tensor ref_lse_finite = r.lse.clone();
  for (int64_t i = 0; i < ref_lse_finite.numel(); ++i)
    if (ref_lse_finite.at(i) == kNegInf) ref_lse_finite.set(i, 0.0);
  int64_t mismatched = 0;
  const Tensor c_lse = finite_lse(c.lse, r.lse, mismatched), h_lse = finite_lse(h.lse, r.lse, mismatched);
  EXPECT_EQ(mismatched, 0) << "rows that see no key must have LSE -inf, and only they";
  EXPECT_TRUE(testing::cuda_conforms(c.out, h.out, r.out, dt, OpClass::attention)) << "out";
  EXPECT_TRUE(testing::cuda_conforms(c_lse, h_lse, ref_lse_finite, DType::f32, OpClass::row_stat)) << "lse";
  EXPECT_TRUE(testing::cuda_conforms(c.dq, h.dq, r.dq, dt, OpClass::attention)) << "dq";
  EXPECT_TRUE(testing::cuda_conforms(c.dk, h.dk, r.dk, dt, OpClass::attention)) << "dk";
  EXPECT_TRUE(testing::cuda_conforms(c.dv, h.dv, r.dv, dt, OpClass::attention)) << "dv";
}

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

std::vector<int64_t> iota(int64_t start, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(CudaAttention, WholeSequencesConform) {
  SEXTANT_REQUIRE_GPU();
  // Partial tiles, MHA and GQA, every padded head_dim of the tensor-core
  // kernels (8 -> 16, 32, 64, 128) and one past them (200: CUDA cores).
  const Problem problems[] = {{1, 7, 7, 1, 1, 8},      {2, 200, 200, 4, 2, 16}, {1, 130, 130, 2, 2, 32},
                              {1, 150, 150, 4, 1, 64}, {1, 97, 97, 2, 2, 128},  {1, 70, 70, 2, 1, 200}};
  for (DType dt : kDtypes)
    for (const Problem& p : problems)
      for (bool causal : {false, true})
        expect_conforms(p, dt, causal ? AttentionMask::causal_blocks(0, p.sq, 0, p.sk) : AttentionMask::none(),
                        causal ? "causal" : "full");
}

// MLA: q/k head dim other than v's (DeepSeek-V3's 192 and 128, and narrower
// pairs), on our CUDA-core kernels (the tensor-core ones take d = dv only)
// and through cuDNN's pieces (a release that refuses d != dv hands them to
// our kernels and says so once).
TEST(CudaAttention, DifferentValueHeadDimsConform) {
  SEXTANT_REQUIRE_GPU();
  const Problem problems[] = {{1, 90, 90, 4, 4, 192, 128}, {2, 70, 70, 4, 2, 96, 64}, {1, 65, 65, 2, 1, 24, 40}};
  for (DType dt : kDtypes)
    for (const Problem& p : problems)
      for (AttentionImpl impl : {AttentionImpl::own, AttentionImpl::cudnn}) {
        expect_conforms(p, dt, AttentionMask::causal_blocks(0, p.sq, 0, p.sk), "MLA causal", impl);
        Problem offset = p;  // the last sq - 30 queries against every key
        offset.sq = p.sq - 30;
        expect_conforms(offset, dt, AttentionMask::causal_blocks(30, offset.sq, 0, p.sk), "MLA offset block", impl);
      }
}

// Sliding windows in every tile kernel (f32: CUDA cores; bf16 and f16:
// tensor cores), causal and two-sided: bands of one key either way (a band
// of the query alone has dq = dk = 0 exactly, all rounding), narrower than a tile,
// across tile edges, one side unbounded, and a query block at an offset
// that sees keys on both sides of it. cuDNN's path hands them to our kernels.
TEST(CudaAttention, SlidingWindowsConform) {
  SEXTANT_REQUIRE_GPU();
  for (DType dt : kDtypes)
    for (AttentionImpl impl : {AttentionImpl::own, AttentionImpl::cudnn}) {
      for (int64_t left : {1, 5, 63, 130})
        expect_conforms({1, 200, 200, 4, 2, 64}, dt,
                        AttentionMask::causal_blocks(0, 200, 0, 200).with_window(Window::causal(left)),
                        "causal window " + std::to_string(left), impl);
      for (Window w : {Window{0, 1}, Window{5, 3}, Window{63, 64}, Window{kNoWindow, 20}, Window{40, kNoWindow}}) {
        const std::string what = "window " + std::to_string(w.left) + "," + std::to_string(w.right);
        expect_conforms({1, 200, 200, 4, 2, 64}, dt,
                        AttentionMask::positions(iota(0, 200), iota(0, 200)).with_window(w), what, impl);
        expect_conforms({2, 64, 200, 2, 1, 32}, dt,
                        AttentionMask::positions(iota(100, 64), iota(0, 200)).with_window(w), what + " offset", impl);
      }
    }
}

TEST(CudaAttention, BlocksWithGlobalPositionsConform) {
  SEXTANT_REQUIRE_GPU();
  const int64_t c = 40;  // chunk rows
  // Zigzag shard of rank 0 of cp 2 (chunks 0 and 3 of 4) against the whole sequence.
  std::vector<int64_t> zigzag = iota(0, c), late = iota(3 * c, c);
  zigzag.insert(zigzag.end(), late.begin(), late.end());
  // Its keys from rank 1 (chunks 1 and 2): the early chunk sees none of them, the late one all.
  const std::vector<int64_t> rank1 = iota(c, 2 * c);
  for (DType dt : kDtypes) {
    expect_conforms({1, 2 * c, 4 * c, 4, 2, 64}, dt, AttentionMask::causal_positions(zigzag, iota(0, 4 * c)),
                    "zigzag queries, all keys");
    expect_conforms({2, 2 * c, 2 * c, 2, 2, 32}, dt, AttentionMask::causal_positions(zigzag, rank1),
                    "zigzag ring step: rows that see nothing");
    // A ring step whose keys lie after every query except the last: one row sees one key.
    expect_conforms({1, 100, 100, 2, 1, 16}, dt, AttentionMask::causal_blocks(0, 100, 99, 100), "one visible pair");
  }
}

// cuDNN's fused attention (attention_impl=cudnn) on the masks the CP
// variants hand it: whole sequences, zigzag shards and ring steps (one piece
// each), blocks at an offset (several pieces merged by LSE), packed
// sequences with padding, sampled rows; MHA and GQA; batch 2 (a piece's rows
// copied out of every batch row); head_dim 64 and 128.
TEST(CudaAttention, CudnnBlocksConform) {
  SEXTANT_REQUIRE_GPU();
  const int64_t c = 64;
  std::vector<int64_t> zigzag = iota(0, c), late = iota(3 * c, c);
  zigzag.insert(zigzag.end(), late.begin(), late.end());
  const std::vector<int64_t> rank1 = iota(c, 2 * c);
  constexpr int64_t kPad = AttentionMask::kPaddingRow;
  std::vector<int64_t> packed_pos = iota(0, 96), packed_seq;
  for (int64_t j = 0; j < 96; ++j) packed_seq.push_back(j < 40 ? 0 : j < 48 ? kPad : 48);
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t d : {64, 128}) {
      for (bool causal : {false, true})
        expect_conforms({2, 256, 256, 4, 2, d}, dt,
                        causal ? AttentionMask::causal_blocks(0, 256, 0, 256) : AttentionMask::none(),
                        causal ? "causal" : "full", AttentionImpl::cudnn);
      expect_conforms({2, 2 * c, 2 * c, 4, 4, d}, dt, AttentionMask::causal_positions(zigzag, zigzag),
                      "zigzag diagonal step", AttentionImpl::cudnn);
      expect_conforms({2, 2 * c, 2 * c, 4, 2, d}, dt, AttentionMask::causal_positions(zigzag, rank1),
                      "zigzag step, later keys", AttentionImpl::cudnn);
      expect_conforms({2, 2 * c, 2 * c, 4, 2, d}, dt, AttentionMask::causal_positions(rank1, zigzag),
                      "zigzag step, earlier keys", AttentionImpl::cudnn);
      expect_conforms({2, 100, 120, 2, 1, d}, dt, AttentionMask::causal_blocks(30, 100, 0, 120), "offset block",
                      AttentionImpl::cudnn);
      expect_conforms({2, 96, 96, 2, 2, d}, dt,
                      AttentionMask::causal_packed(packed_pos, packed_seq, packed_pos, packed_seq),
                      "packed with padding", AttentionImpl::cudnn);
      // Sampled rows (the spot reference): one-row pieces, row 0 against key 0
      // alone (cuDNN's backward refuses one by one: our kernels take that piece).
      expect_conforms({2, 4, 200, 4, 2, d}, dt, AttentionMask::causal_positions({0, 7, 64, 199}, iota(0, 200)),
                      "sampled rows", AttentionImpl::cudnn);
    }
  // f32 and head_dim 200 are not cuDNN's: the same request runs our kernels.
  expect_conforms({1, 70, 70, 2, 1, 200}, DType::bf16, AttentionMask::causal_blocks(0, 70, 0, 70), "head_dim 200",
                  AttentionImpl::cudnn);
  expect_conforms({1, 70, 70, 2, 1, 64}, DType::f32, AttentionMask::none(), "f32", AttentionImpl::cudnn);
}

// A pack of sequences each followed by padding (sequence names per row): the
// whole pack, a per-sequence zigzag shard against it, and the score count
// (tiles of other sequences skipped).
TEST(CudaAttention, PackedSequencesConform) {
  SEXTANT_REQUIRE_GPU();
  constexpr int64_t kPad = AttentionMask::kPaddingRow;
  const std::vector<int64_t> lengths = {5, 150, 3, 70}, padded = {8, 152, 8, 72};
  std::vector<int64_t> pos, seq, shard_pos, shard_seq;
  int64_t at = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (int64_t j = 0; j < padded[i]; ++j) pos.push_back(at + j), seq.push_back(j < lengths[i] ? at : kPad);
    const int64_t c = padded[i] / 4;  // cp 2: chunks 0 and 3 of every sequence
    for (int64_t chunk : {int64_t{0}, int64_t{3}})
      for (int64_t j = chunk * c; j < (chunk + 1) * c; ++j)
        shard_pos.push_back(at + j), shard_seq.push_back(j < lengths[i] ? at : kPad);
    at += padded[i];
  }
  const int64_t n = at, rows = static_cast<int64_t>(shard_pos.size());
  for (DType dt : kDtypes) {
    expect_conforms({1, n, n, 4, 2, 64}, dt, AttentionMask::causal_packed(pos, seq, pos, seq), "packed whole");
    expect_conforms({2, rows, n, 2, 1, 32}, dt, AttentionMask::causal_packed(shard_pos, shard_seq, pos, seq),
                    "packed zigzag shard");
    expect_conforms({1, n, n, 2, 2, 200}, dt, AttentionMask::causal_packed(pos, seq, pos, seq), "packed, CUDA cores");
  }
  const Inputs in = make_inputs({1, n, n, 1, 1, 64}, DType::bf16);
  const AttentionOut packed =
      attention_block_forward(gpu(in.q), gpu(in.k), gpu(in.v), AttentionMask::causal_packed(pos, seq, pos, seq));
  const AttentionOut causal =
      attention_block_forward(gpu(in.q), gpu(in.k), gpu(in.v), AttentionMask::causal_blocks(0, n, 0, n));
  EXPECT_LT(packed.scores, causal.scores);
}

TEST(CudaAttention, FullyMaskedBlocksGiveEmptyRows) {
  SEXTANT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    const Problem p{1, 70, 70, 2, 2, 64};
    const Inputs in = make_inputs(p, dt);
    const AttentionMask mask = AttentionMask::causal_blocks(0, 70, 70, 70);  // every key after every query
    const AttentionOut f = attention_block_forward(gpu(in.q), gpu(in.k), gpu(in.v), mask);
    Tensor dq = Tensor::zeros(in.q.shape(), DType::f32, Device::cuda),
           dk = Tensor::zeros(in.k.shape(), DType::f32, Device::cuda),
           dv = Tensor::zeros(in.k.shape(), DType::f32, Device::cuda);
    attention_block_backward_accumulate(gpu(in.q), gpu(in.k), gpu(in.v), f.out, gpu(in.dout), f.lse,
                                        attention_delta(f.out, gpu(in.dout)), mask, dq, dk, dv);
    const Tensor out = host(f.out), lse = host(f.lse);
    for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.at(i), 0.0) << dtype_name(dt);
    for (int64_t i = 0; i < lse.numel(); ++i) ASSERT_EQ(lse.at(i), kNegInf) << dtype_name(dt);
    for (const Tensor* g : {&dq, &dk, &dv}) {
      const Tensor h = host(*g);
      for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.at(i), 0.0) << dtype_name(dt);
    }
  }
}

// Two key blocks merged by their LSE give the whole; the backward of each
// block with the final LSE accumulates to the whole backward (the ring).
TEST(CudaAttention, BlocksMergeToTheWhole) {
  SEXTANT_REQUIRE_GPU();
  const int64_t s = 160, half = 80;
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " causal " << causal);
      const Inputs in = make_inputs({1, s, s, 4, 2, 32}, dt);
      const Tensor q = gpu(in.q), k = gpu(in.k), v = gpu(in.v), dout = gpu(in.dout);
      auto mask = [&](int64_t k_start) {
        return causal ? AttentionMask::causal_blocks(0, s, k_start, half) : AttentionMask::none();
      };
      const AttentionOut whole =
          attention_block_forward(q, k, v, causal ? AttentionMask::causal_blocks(0, s, 0, s) : AttentionMask::none());
      const Tensor k0 = narrow(k, 1, 0, half), k1 = narrow(k, 1, half, half);
      const Tensor v0 = narrow(v, 1, 0, half), v1 = narrow(v, 1, half, half);
      AttentionOut merged = attention_block_forward(q, k0, v0, mask(0));
      const AttentionOut part = attention_block_forward(q, k1, v1, mask(half));
      attention_merge(merged.out, merged.lse, part.out, part.lse);
      // 16-bit: P is rounded relative to each pass's own running max, so the
      // two outputs differ by rounding noise; the LSE sums unrounded P.
      const double out_tol = dt == DType::f32 ? 1e-5 : 4 * unit_roundoff(dt);
      EXPECT_LT(compare(host(merged.out), host(whole.out)).rel_l2, out_tol);
      EXPECT_LT(compare(host(merged.lse), host(whole.lse)).rel_l2, 1e-6);
      // Backward by blocks with the final LSE and D.
      const Tensor out = whole.out.to(dt), delta = attention_delta(out, dout);
      Tensor dq = Tensor::zeros(in.q.shape(), DType::f32, Device::cuda);
      Tensor dk0 = Tensor::zeros(k0.shape(), DType::f32, Device::cuda), dv0 = dk0.clone(), dk1 = dk0.clone(),
             dv1 = dk0.clone();
      attention_block_backward_accumulate(q, k0, v0, out, dout, whole.lse, delta, mask(0), dq, dk0, dv0);
      attention_block_backward_accumulate(q, k1, v1, out, dout, whole.lse, delta, mask(half), dq, dk1, dv1);
      const AttentionGrads g = attention_block_backward(
          q, k, v, out, whole.lse, dout, causal ? AttentionMask::causal_blocks(0, s, 0, s) : AttentionMask::none());
      // The same P and dS in both (they depend on the final LSE and D only): f32 summation order alone.
      const double tol = 1e-5;
      EXPECT_LT(compare(host(dq), host(g.dq)).rel_l2, tol);
      EXPECT_LT(compare(host(concat({dk0, dk1}, 1)), host(g.dk)).rel_l2, tol);
      EXPECT_LT(compare(host(concat({dv0, dv1}, 1)), host(g.dv)).rel_l2, tol);
    }
}

TEST(CudaAttention, DeltaMatchesTheHost) {
  SEXTANT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    const Tensor out = input({2, 33, 3, 40}, dt, "delta.out"), dout = input({2, 33, 3, 40}, DType::f32, "delta.do");
    const Tensor h = attention_delta(out, dout), c = attention_delta(gpu(out), gpu(dout));
    EXPECT_LT(compare(host(c), h).rel_l2, 1e-6) << dtype_name(dt);
  }
}

TEST(CudaAttention, ReportsTheScoresItComputed) {
  SEXTANT_REQUIRE_GPU();
  const Inputs in = make_inputs({1, 256, 256, 1, 1, 64}, DType::bf16);
  const AttentionOut full = attention_block_forward(gpu(in.q), gpu(in.k), gpu(in.v), AttentionMask::none());
  const AttentionOut causal =
      attention_block_forward(gpu(in.q), gpu(in.k), gpu(in.v), AttentionMask::causal_blocks(0, 256, 0, 256));
  EXPECT_EQ(full.scores, 256 * 256);
  EXPECT_EQ(causal.scores, 10 * 64 * 64);  // 4 x 4 tiles of 64, the 10 on and below the diagonal
}

}  // namespace
}  // namespace sextant::ops
