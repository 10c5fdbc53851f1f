// Explicit SIMD for the element-wise host ops, at the width each CPU does best.
//
// Why not plain auto-vectorized loops: GCC duplicates the clamped branch of an
// inlined exp into constant-folded paths and then either gives up on
// vectorizing (under its default -ftrapping-math) or blends the folded
// constants back in, one of them denormal: GELU ran at 4 ns per element, 20%
// of copy bandwidth. GCC vector types (`float __attribute__((vector_size(64)))`)
// keep every lane on one straight-line path: +, *, /, comparisons and
// `mask ? a : b` act per lane and compile to SSE, AVX2, AVX-512 or NEON.
//
// Width: a vector wider than the hardware's is lowered badly (16 lanes under
// AVX2 ran 5x slower than 8), so run_simd(kernel) calls kernel(Lanes<L>{}) with
// L = 16 compiled for x86-64-v4 (AVX-512), 8 for x86-64-v3 (AVX2 + FMA) or 4
// for the baseline (SSE2; NEON elsewhere), picked once per process by CPU. The
// v3/v4 code fuses multiply-adds, so the last bits of a result may differ
// between CPU generations (every rank of one machine runs the same code).
//
// Rule that keeps this safe: a function that takes or returns a lane vector
// must be inlined into the kernel (SEXTANT_ALWAYS_INLINE, and
// SEXTANT_INLINE_LAMBDA on lambdas), because vector arguments are passed
// differently at each ISA level (GCC's -Wpsabi note; a call across levels
// returns garbage). always_inline turns a failure to inline into a compile
// error instead.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#define SEXTANT_ALWAYS_INLINE inline __attribute__((always_inline))
#define SEXTANT_INLINE_LAMBDA __attribute__((always_inline))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace sextant::ops {

// f32 and i32 vectors of L lanes. (An alias template with a dependent
// vector_size silently drops the attribute in GCC 12: one explicit
// specialization per width.)
template <int L>
struct LaneTypes;
template <>
struct LaneTypes<4> {
  typedef float f32 __attribute__((vector_size(16)));
  typedef int32_t i32 __attribute__((vector_size(16)));
};
template <>
struct LaneTypes<8> {
  typedef float f32 __attribute__((vector_size(32)));
  typedef int32_t i32 __attribute__((vector_size(32)));
};
template <>
struct LaneTypes<16> {
  typedef float f32 __attribute__((vector_size(64)));
  typedef int32_t i32 __attribute__((vector_size(64)));
};
template <int L>
using f32v = typename LaneTypes<L>::f32;
template <int L>
using i32v = typename LaneTypes<L>::i32;

// The lane count a kernel runs with, as a type: kernel(Lanes<L>{}).
template <int L>
struct Lanes {
  static constexpr int value = L;
};

namespace simd_detail {
// 16 (x86-64-v4), 8 (x86-64-v3) or 4, from the CPU, computed once.
int host_lanes();
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SEXTANT_SIMD_X86 1
template <class Kernel>
__attribute__((target("arch=x86-64-v4"))) void run_avx512(const Kernel& kernel) {
  kernel(Lanes<16>{});
}
template <class Kernel>
__attribute__((target("arch=x86-64-v3"))) void run_avx2(const Kernel& kernel) {
  kernel(Lanes<8>{});
}
#endif
}  // namespace simd_detail

// The lane count run_simd uses on this machine (16, 8 or 4; the environment
// variable SEXTANT_SIMD_LANES caps it).
int simd_lanes();
// Caps it (for tests of the narrower paths, or to compare levels); returns the previous cap.
int limit_simd_lanes(int max_lanes);

// Runs kernel (a lambda `[&](auto lanes) SEXTANT_INLINE_LAMBDA {...}`) compiled
// for the widest ISA level this CPU has, with the matching lane count.
template <class Kernel>
void run_simd(const Kernel& kernel) {
#if defined(SEXTANT_SIMD_X86)
  switch (simd_detail::host_lanes()) {
    case 16: return simd_detail::run_avx512(kernel);
    case 8: return simd_detail::run_avx2(kernel);
    default: break;
  }
#endif
  kernel(Lanes<4>{});
}

template <int L>
SEXTANT_ALWAYS_INLINE f32v<L> load_lanes(const float* p) {
  f32v<L> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int L>
SEXTANT_ALWAYS_INLINE void store_lanes(float* p, f32v<L> v) {
  std::memcpy(p, &v, sizeof v);
}

// Lane sum in a fixed pairwise order.
template <int L>
SEXTANT_ALWAYS_INLINE float sum_lanes(f32v<L> v) {
  float lanes[L];
  store_lanes<L>(lanes, v);
  for (int width = L / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

// y[i] = fn(a[i], ...) for i < n. F = float runs fn on L-lane vectors (the
// tail through a zero-padded block, so every element takes the same
// arithmetic); F = double runs fn on scalars. y may alias an input.
template <int L, class F, class Fn, class... In>
SEXTANT_ALWAYS_INLINE void map_lanes(int64_t n, F* y, Fn&& fn, const In*... in) {
  if constexpr (std::is_same_v<F, float>) {
    int64_t i = 0;
    for (; i + L <= n; i += L) store_lanes<L>(y + i, fn(load_lanes<L>(in + i)...));
    if (i < n) {
      const int64_t rest = n - i;
      auto padded = [&](const float* p) SEXTANT_INLINE_LAMBDA {
        float block[L] = {};
        std::memcpy(block, p + i, rest * sizeof(float));
        return load_lanes<L>(block);
      };
      float out[L];
      store_lanes<L>(out, fn(padded(in)...));
      std::memcpy(y + i, out, rest * sizeof(float));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = fn(in[i]...);
  }
}

// sum_i fn(a[i], ...) for i < n, lanes as in map_lanes (padded tail lanes are
// not summed).
template <int L, class F, class Fn, class... In>
SEXTANT_ALWAYS_INLINE F sum_map_lanes(int64_t n, Fn&& fn, const In*... in) {
  if constexpr (std::is_same_v<F, float>) {
    f32v<L> acc = {};
    int64_t i = 0;
    for (; i + L <= n; i += L) acc += fn(load_lanes<L>(in + i)...);
    if (i < n) {
      const int64_t rest = n - i;
      auto padded = [&](const float* p) SEXTANT_INLINE_LAMBDA {
        float block[L] = {};
        std::memcpy(block, p + i, rest * sizeof(float));
        return load_lanes<L>(block);
      };
      const f32v<L> tail = fn(padded(in)...);
      for (int64_t j = 0; j < rest; ++j) acc[j] += tail[j];
    }
    return sum_lanes<L>(acc);
  } else {
    F s = 0;
    for (int64_t i = 0; i < n; ++i) s += fn(in[i]...);
    return s;
  }
}

}  // namespace sextant::ops

#pragma GCC diagnostic pop
