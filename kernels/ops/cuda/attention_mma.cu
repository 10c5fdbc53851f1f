// The attention block on tensor cores (bf16 / f16 storage, f32 accumulation):
// a tiled flash-style kernel (FlashAttention-2's schedule) written with
// mma.sync.m16n8k16, whose register fragments the PTX ISA documents, so the
// online softmax runs on the accumulators in registers.
//
// On a GPU, cuDNN's fused attention runs by default (attention_cudnn.cc,
// which cuts a block's mask into pieces cuDNN takes, one call each); this
// kernel is attention_impl=own, the cross-check of cuDNN's in ops/attention,
// and what runs where cuDNN is not used. It takes any mask given by global
// positions (a zigzag shard's two chunks against a ring neighbour's, packed
// sequences) in one call, accumulates dQ/dK/dV in f32, and its tiles skip
// whole causal blocks as the host op does.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16/.f16), lane = 4 g + t:
//   A 16x16 row-major: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B 16x8 (k x n):    b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g)
//   C 16x8 f32:        c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1)
// Two adjacent C tiles (16 x 16) are exactly one A fragment once packed to
// 16 bits, which is how P (forward) and P^T, dS^T (backward) feed the next
// product without leaving registers. Every operand read from shared memory
// is a pair of elements adjacent along k, i.e. one 32-bit load: tiles whose
// k runs along a row of the global tensor are stored row-major, the others
// (V in the forward, Q, dO and K for the backward's transposed products)
// transposed while being loaded. Rows are padded by 8 elements so the eight
// rows a fragment load touches fall in different banks.
//
// Forward: a block of 4 warps owns 64 query rows of one (batch, head); each
// warp 16 rows. Key tiles of 64 go through shared memory; per tile
// S = Q K^T (scaled into log2 units), mask, running max / sum, P V.
// Backward: a block owns 64 keys of one (batch, kv head) and walks every
// query tile of every query head of its group (GQA without atomics on
// dK/dV): S^T = K Q^T, P^T, dP^T = V dO^T, dS^T = P^T (dP^T - D),
// dV += P^T dO, dK += dS^T Q in registers; dS goes through shared memory
// for dQ = dS K, added to the f32 dQ with atomics (as FlashAttention-2).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/ops/cuda/attention_common.cuh"

namespace sextant::ops::cuda::attention {

namespace {

constexpr int kTile = kMmaTile;  // query and key rows per tile
constexpr int kWarps = 4;        // 16 rows each
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;
constexpr int kLdT = kTile + kPad;  // row length of a transposed tile (its rows are the D columns)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
__host__ __device__ constexpr int row_ld() {
  return D + kPad;
}

__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], const uint32_t b[2], __nv_bfloat16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // mma_supported() keeps older GPUs on the CUDA-core kernels
#endif
}

__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], const uint32_t b[2], __half) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

// Two f32 values as one 32-bit pair, lo in the low half (the lower k index).
__device__ __forceinline__ uint32_t pack(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack(float lo, float hi, __half) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <class T>
__device__ __forceinline__ uint32_t ld32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// A fragment of the 16 x 16 block at row 0, column k0 of a row-major tile.
template <class T>
__device__ __forceinline__ void load_a(uint32_t a[4], const T* tile, int ld, int k0, int g, int t) {
  a[0] = ld32(tile + g * ld + k0 + 2 * t);
  a[1] = ld32(tile + (g + 8) * ld + k0 + 2 * t);
  a[2] = ld32(tile + g * ld + k0 + 8 + 2 * t);
  a[3] = ld32(tile + (g + 8) * ld + k0 + 8 + 2 * t);
}

// B fragment (k0.. k0+15, n0.. n0+7) of a tile stored n-major: element
// (k, n) at tile[n * ld + k].
template <class T>
__device__ __forceinline__ void load_b(uint32_t b[2], const T* tile, int ld, int n0, int k0, int g, int t) {
  b[0] = ld32(tile + (n0 + g) * ld + k0 + 2 * t);
  b[1] = ld32(tile + (n0 + g) * ld + k0 + 8 + 2 * t);
}

// The A fragment for k block kb of a product whose left operand is held as
// C tiles c[2 kb] and c[2 kb + 1] (16 rows x 16 columns), rounded to T.
template <class T>
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float (*c)[4], int kb) {
  a[0] = pack(c[2 * kb][0], c[2 * kb][1], T{});
  a[1] = pack(c[2 * kb][2], c[2 * kb][3], T{});
  a[2] = pack(c[2 * kb + 1][0], c[2 * kb + 1][1], T{});
  a[3] = pack(c[2 * kb + 1][2], c[2 * kb + 1][3], T{});
}

// Copies kTile rows of a [rows, D] block whose row i starts at src + i * stride
// (d valid columns, `rows` valid rows; zeros elsewhere) into shared memory,
// row-major (dst[i * ld + c]) and / or transposed (dst_t[c * kLdT + i]).
template <class T, int D>
__device__ void load_tile(const T* src, int64_t stride, int rows, int d, T* dst, T* dst_t) {
  constexpr int kChunks = D / 8;  // 8 elements (16 bytes) per chunk
  const bool vectors = d % 8 == 0;
  const T zero = narrow_to<T>(0.0f);
  for (int idx = threadIdx.x; idx < kTile * kChunks; idx += kThreads) {
    const int i = idx / kChunks, c0 = (idx % kChunks) * 8;
    alignas(16) T vals[8];
    if (vectors && i < rows && c0 < d) {
      *reinterpret_cast<uint4*>(vals) = *reinterpret_cast<const uint4*>(src + i * stride + c0);
    } else {
      for (int e = 0; e < 8; ++e) vals[e] = (i < rows && c0 + e < d) ? src[i * stride + c0 + e] : zero;
    }
    if (dst) *reinterpret_cast<uint4*>(dst + i * row_ld<D>() + c0) = *reinterpret_cast<const uint4*>(vals);
    if (dst_t)
      for (int e = 0; e < 8; ++e) dst_t[(c0 + e) * kLdT + i] = vals[e];
  }
}

template <class T, int D>
constexpr size_t forward_smem() {
  return sizeof(T) * (kTile * row_ld<D>() + D * kLdT) + sizeof(int) * kTile;
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* q, const T* k, const T* v, float* out, float* lse, Sizes s, MaskRuns mask) {
  constexpr int kLd = row_ld<D>(), kDTiles = D / 8, kKTiles = kTile / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);                    // [kTile][kLd]; first the Q tile
  T* vt = ks + kTile * kLd;                              // [D][kLdT]: V transposed
  int* key_pos = reinterpret_cast<int*>(vt + D * kLdT);  // [kTile]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int q0 = blockIdx.x * kTile, h = blockIdx.y, bi = blockIdx.z, kvh = h / s.group;
  const int q_rows = min(kTile, s.sq - q0);
  const int64_t ldq = static_cast<int64_t>(s.hq) * s.d, ldk = static_cast<int64_t>(s.hk) * s.d;

  // The warp's 16 query rows as A fragments, for the whole key loop.
  load_tile<T, D>(q + ((static_cast<int64_t>(bi) * s.sq + q0) * s.hq + h) * s.d, ldq, q_rows, s.d, ks, nullptr);
  __syncthreads();
  uint32_t qf[D / 16][4];
  for (int kb = 0; kb < D / 16; ++kb) load_a(qf[kb], ks + warp * 16 * kLd, kLd, kb * 16, g, t);
  __syncthreads();

  const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;  // this thread's two query rows
  const Window w0 = query_window(mask, row0, s.sq), w1 = query_window(mask, row1, s.sq);
  const float scale_log2 = s.scale * kLog2e;
  float o[kDTiles][4] = {}, m0 = -INFINITY, m1 = -INFINITY, l0 = 0, l1 = 0;
  for (int k0 = 0; k0 < s.sk; k0 += kTile) {
    const int k_rows = min(kTile, s.sk - k0);
    if (tile_hidden(mask, q0, q0 + q_rows, k0, k0 + k_rows)) continue;  // the same for the whole block
    const int64_t kv_at = ((static_cast<int64_t>(bi) * s.sk + k0) * s.hk + kvh) * s.d;
    load_tile<T, D>(k + kv_at, ldk, k_rows, s.d, ks, nullptr);
    load_tile<T, D>(v + kv_at, ldk, k_rows, s.d, nullptr, vt);
    for (int j = threadIdx.x; j < kTile; j += kThreads) key_pos[j] = key_position(mask, k0 + j, s.sk);
    __syncthreads();

    float sc[kKTiles][4] = {};  // S: 16 query rows x 64 keys
    for (int kb = 0; kb < D / 16; ++kb)
      for (int n = 0; n < kKTiles; ++n) {
        uint32_t b[2];
        load_b(b, ks, kLd, n * 8, kb * 16, g, t);
        mma(sc[n], qf[kb], b, T{});
      }
    // Scale into log2 units, mask, and the running max of both rows (a quad shares a row).
    float mx0 = -INFINITY, mx1 = -INFINITY;
    for (int n = 0; n < kKTiles; ++n)
      for (int e = 0; e < 4; ++e) {
        const int col = n * 8 + 2 * t + (e & 1);
        const bool visible = in_window(key_pos[col], e < 2 ? w0 : w1);
        sc[n][e] = visible ? sc[n][e] * scale_log2 : -INFINITY;
        if (e < 2) mx0 = fmaxf(mx0, sc[n][e]);
        else mx1 = fmaxf(mx1, sc[n][e]);
      }
    for (int o_ = 1; o_ <= 2; o_ <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o_));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o_));
    }
    const float new0 = fmaxf(m0, mx0), new1 = fmaxf(m1, mx1);
    // A row with nothing visible yet keeps max -inf: shift by 0 so exp2 gives 0, not NaN.
    const float base0 = new0 == -INFINITY ? 0.0f : new0, base1 = new1 == -INFINITY ? 0.0f : new1;
    const float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
    float sum0 = 0, sum1 = 0;
    for (int n = 0; n < kKTiles; ++n)
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[n][e] - (e < 2 ? base0 : base1));
        sc[n][e] = p;
        if (e < 2) sum0 += p;
        else sum1 += p;
      }
    l0 = l0 * alpha0 + sum0, l1 = l1 * alpha1 + sum1;  // partial sums of this thread's columns
    m0 = new0, m1 = new1;
    for (int n = 0; n < kDTiles; ++n) o[n][0] *= alpha0, o[n][1] *= alpha0, o[n][2] *= alpha1, o[n][3] *= alpha1;
    for (int kb = 0; kb < kTile / 16; ++kb) {  // O += P V
      uint32_t a[4];
      c_to_a<T>(a, sc, kb);
      for (int n = 0; n < kDTiles; ++n) {
        uint32_t b[2];
        load_b(b, vt, kLdT, n * 8, kb * 16, g, t);
        mma(o[n], a, b, T{});
      }
    }
    __syncthreads();  // the next tile overwrites ks, vt and key_pos
  }

  for (int o_ = 1; o_ <= 2; o_ <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  for (int n = 0; n < kDTiles; ++n)
    for (int e = 0; e < 4; ++e) {
      const int row = e < 2 ? row0 : row1, c = n * 8 + 2 * t + (e & 1);
      if (row < s.sq && c < s.d)
        out[((static_cast<int64_t>(bi) * s.sq + row) * s.hq + h) * s.d + c] = o[n][e] * (e < 2 ? inv0 : inv1);
    }
  if (t == 0) {
    const int64_t stat = (static_cast<int64_t>(bi) * s.hq + h) * s.sq;
    if (row0 < s.sq) lse[stat + row0] = l0 > 0.0f ? (m0 + log2f(l0)) * kLn2 : -INFINITY;
    if (row1 < s.sq) lse[stat + row1] = l1 > 0.0f ? (m1 + log2f(l1)) * kLn2 : -INFINITY;
  }
}

template <class T, int D>
constexpr size_t backward_smem() {
  // ks, vs, qs, dos: [kTile][kLd]; kt, qt, dot: [D][kLdT]; dss: [kTile][kLdT];
  // per query row: lse (log2 units), delta, window.
  return sizeof(T) * (4 * kTile * row_ld<D>() + 3 * D * kLdT + kTile * kLdT) +
         kTile * (2 * sizeof(float) + sizeof(Window));
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* q, const T* k, const T* v, const T* dout, const float* lse, const float* delta, float* dq,
                    float* dk, float* dv, Sizes s, MaskRuns mask) {
  constexpr int kLd = row_ld<D>(), kDTiles = D / 8, kQTiles = kTile / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);  // [kTile keys][kLd]
  T* vs = ks + kTile * kLd;            // [kTile keys][kLd]
  T* qs = vs + kTile * kLd;            // [kTile queries][kLd]
  T* dos = qs + kTile * kLd;           // [kTile queries][kLd]
  T* kt = dos + kTile * kLd;           // [D][kLdT]: K transposed
  T* qt = kt + D * kLdT;               // [D][kLdT]: Q transposed
  T* dot = qt + D * kLdT;              // [D][kLdT]: dO transposed
  T* dss = dot + D * kLdT;             // [kTile queries][kLdT keys]: dS
  float* lse2 = reinterpret_cast<float*>(dss + kTile * kLdT);
  float* delta_s = lse2 + kTile;
  Window* query_win = reinterpret_cast<Window*>(delta_s + kTile);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int k0 = blockIdx.x * kTile, kvh = blockIdx.y, bi = blockIdx.z;
  const int k_rows = min(kTile, s.sk - k0);
  const int64_t ldq = static_cast<int64_t>(s.hq) * s.d, ldk = static_cast<int64_t>(s.hk) * s.d;
  const int64_t kv_at = ((static_cast<int64_t>(bi) * s.sk + k0) * s.hk + kvh) * s.d;
  load_tile<T, D>(k + kv_at, ldk, k_rows, s.d, ks, kt);
  load_tile<T, D>(v + kv_at, ldk, k_rows, s.d, vs, nullptr);
  const int key0 = k0 + warp * 16 + g;  // this thread's two keys: key0, key0 + 8
  const int kp0 = key_position(mask, key0, s.sk), kp1 = key_position(mask, key0 + 8, s.sk);
  const float scale_log2 = s.scale * kLog2e;
  float dk_acc[kDTiles][4] = {}, dv_acc[kDTiles][4] = {};

  for (int hg = 0; hg < s.group; ++hg) {
    const int h = kvh * s.group + hg;
    for (int q0 = 0; q0 < s.sq; q0 += kTile) {
      const int q_rows = min(kTile, s.sq - q0);
      if (tile_hidden(mask, q0, q0 + q_rows, k0, k0 + k_rows)) continue;  // uniform over the block
      __syncthreads();                                                    // the previous tile's readers are done
      const int64_t q_at = ((static_cast<int64_t>(bi) * s.sq + q0) * s.hq + h) * s.d;
      load_tile<T, D>(q + q_at, ldq, q_rows, s.d, qs, qt);
      load_tile<T, D>(dout + q_at, ldq, q_rows, s.d, dos, dot);
      for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const int64_t stat = (static_cast<int64_t>(bi) * s.hq + h) * s.sq + q0 + i;
        const float l = i < q_rows ? lse[stat] : -INFINITY;
        lse2[i] = l * kLog2e;
        delta_s[i] = i < q_rows ? delta[stat] : 0.0f;
        // A row that saw no key (LSE -inf) has P = 0: it sees nothing here either.
        query_win[i] = l == -INFINITY ? kEmptyWindow : query_window(mask, q0 + i, s.sq);
      }
      __syncthreads();

      // S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys x 64 queries.
      float st[kQTiles][4] = {}, dpt[kQTiles][4] = {};
      for (int kb = 0; kb < D / 16; ++kb) {
        uint32_t ka[4], va[4];
        load_a(ka, ks + warp * 16 * kLd, kLd, kb * 16, g, t);
        load_a(va, vs + warp * 16 * kLd, kLd, kb * 16, g, t);
        for (int n = 0; n < kQTiles; ++n) {
          uint32_t b[2];
          load_b(b, qs, kLd, n * 8, kb * 16, g, t);
          mma(st[n], ka, b, T{});
          load_b(b, dos, kLd, n * 8, kb * 16, g, t);
          mma(dpt[n], va, b, T{});
        }
      }
      // P^T = exp(scale S^T - LSE) where visible; dS^T = P^T (dP^T - D).
      for (int n = 0; n < kQTiles; ++n)
        for (int e = 0; e < 4; ++e) {
          const int col = n * 8 + 2 * t + (e & 1);
          const bool visible = in_window(e < 2 ? kp0 : kp1, query_win[col]);
          const float p = visible ? exp2f(st[n][e] * scale_log2 - lse2[col]) : 0.0f;
          st[n][e] = p;
          dpt[n][e] = p * (dpt[n][e] - delta_s[col]);
        }
      // dV += P^T dO and dK += dS^T Q (k = the 64 queries).
      for (int kb = 0; kb < kTile / 16; ++kb) {
        uint32_t pa[4], sa[4];
        c_to_a<T>(pa, st, kb);
        c_to_a<T>(sa, dpt, kb);
        for (int n = 0; n < kDTiles; ++n) {
          uint32_t b[2];
          load_b(b, dot, kLdT, n * 8, kb * 16, g, t);
          mma(dv_acc[n], pa, b, T{});
          load_b(b, qt, kLdT, n * 8, kb * 16, g, t);
          mma(dk_acc[n], sa, b, T{});
        }
      }
      // dS to shared memory as [query][key], for dQ = dS K over all 64 keys.
      for (int n = 0; n < kQTiles; ++n)
        for (int e = 0; e < 4; ++e)
          dss[(n * 8 + 2 * t + (e & 1)) * kLdT + warp * 16 + g + (e < 2 ? 0 : 8)] = narrow_to<T>(dpt[n][e]);
      __syncthreads();
      // dQ rows of this warp (16 queries), 32 columns at a time.
      for (int n0 = 0; n0 < kDTiles; n0 += 4) {
        float acc[4][4] = {};
        for (int kb = 0; kb < kTile / 16; ++kb) {
          uint32_t a[4];
          load_a(a, dss + warp * 16 * kLdT, kLdT, kb * 16, g, t);
          for (int x = 0; x < 4 && n0 + x < kDTiles; ++x) {
            uint32_t b[2];
            load_b(b, kt, kLdT, (n0 + x) * 8, kb * 16, g, t);
            mma(acc[x], a, b, T{});
          }
        }
        for (int x = 0; x < 4 && n0 + x < kDTiles; ++x)
          for (int e = 0; e < 4; ++e) {
            const int row = q0 + warp * 16 + g + (e < 2 ? 0 : 8), c = (n0 + x) * 8 + 2 * t + (e & 1);
            if (row < s.sq && c < s.d)
              atomicAdd(dq + ((static_cast<int64_t>(bi) * s.sq + row) * s.hq + h) * s.d + c, s.scale * acc[x][e]);
          }
      }
    }
  }
  // This block's keys are its own: plain adds into the accumulators.
  for (int n = 0; n < kDTiles; ++n)
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + (e < 2 ? 0 : 8), c = n * 8 + 2 * t + (e & 1);
      if (key >= s.sk || c >= s.d) continue;
      const int64_t at = ((static_cast<int64_t>(bi) * s.sk + key) * s.hk + kvh) * s.d + c;
      dk[at] += s.scale * dk_acc[n][e];
      dv[at] += dv_acc[n][e];
    }
}

// Calls fn(std::integral_constant<int, D>) with the padded head_dim for d.
template <class Fn>
void with_head_dim(int d, Fn&& fn) {
  if (d <= 16) return fn(std::integral_constant<int, 16>{});
  if (d <= 32) return fn(std::integral_constant<int, 32>{});
  if (d <= 64) return fn(std::integral_constant<int, 64>{});
  if (d <= 128) return fn(std::integral_constant<int, 128>{});
  throw RuntimeError(cat("attention on tensor cores: head_dim ", d, " exceeds ", kMmaMaxHeadDim));
}

template <class Fn>
void with_half_type(DType dtype, Fn&& fn) {
  if (dtype == DType::bf16) return fn(__nv_bfloat16{});
  if (dtype == DType::f16) return fn(__half{});
  throw RuntimeError("attention on tensor cores: storage must be bf16 or f16, not " + dtype_name(dtype));
}

template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  SEXTANT_CHECK_CUDA(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

void require_grid(const char* what, int64_t x, int64_t y, int64_t z) {
  if (x > 0x7fffffff || y > 65535 || z > 65535)
    throw RuntimeError(cat("attention on tensor cores: ", what, " grid ", x, " x ", y, " x ", z, " exceeds CUDA's"));
}

}  // namespace

bool mma_supported(int head_dim) {
  if (head_dim > kMmaMaxHeadDim) return false;
  int device = 0, major = 0, optin = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  size_t needed = 0;
  with_head_dim(head_dim, [&](auto dim) { needed = backward_smem<__half, decltype(dim)::value>(); });
  return major >= 8 && needed <= static_cast<size_t>(optin);
}

void forward_mma(DType dtype, const ForwardArgs& a) {
  const Sizes& s = a.sizes;
  if (s.sq == 0 || s.b == 0 || s.hq == 0) return;
  const int64_t tiles = (s.sq + kTile - 1) / kTile;
  require_grid("forward", tiles, s.hq, s.b);
  with_half_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(s.d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      auto kernel = forward_kernel<T, D>;
      allow_smem(kernel, forward_smem<T, D>());
      kernel<<<dim3(static_cast<unsigned>(tiles), s.hq, s.b), kThreads, forward_smem<T, D>(), compute_stream()>>>(
          static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), a.out, a.lse, s, a.mask);
    });
  });
  SEXTANT_CHECK_LAUNCH("attention forward (tensor cores)");
}

void backward_mma(DType dtype, const BackwardArgs& a) {
  const Sizes& s = a.sizes;
  if (s.sk == 0 || s.b == 0 || s.hk == 0) return;
  const int64_t tiles = (s.sk + kTile - 1) / kTile;
  require_grid("backward", tiles, s.hk, s.b);
  with_half_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(s.d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      auto kernel = backward_kernel<T, D>;
      allow_smem(kernel, backward_smem<T, D>());
      kernel<<<dim3(static_cast<unsigned>(tiles), s.hk, s.b), kThreads, backward_smem<T, D>(), compute_stream()>>>(
          static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
          static_cast<const T*>(a.dout), a.lse, a.delta, a.dq, a.dk, a.dv, s, a.mask);
    });
  });
  SEXTANT_CHECK_LAUNCH("attention backward (tensor cores)");
}

}  // namespace sextant::ops::cuda::attention
