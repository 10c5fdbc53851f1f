#include "harness/rng.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
// splitmix64's finalizer: a bijective mix with good avalanche.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [0, 1) with 53 random bits.
double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
}  // namespace

uint64_t tensor_id(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t random_bits(uint64_t seed, uint64_t tensor, uint64_t index, uint64_t stream) {
  return mix(mix(mix(mix(seed) ^ tensor) ^ index) ^ stream);
}

double random_value(const RandomSpec& spec, uint64_t index) {
  if (spec.distribution == Distribution::uniform)
    return spec.scale * (2.0 * unit(random_bits(spec.seed, spec.tensor, index)) - 1.0);
  // Box-Muller on two independent streams of the same counter.
  double u1 = unit(random_bits(spec.seed, spec.tensor, index, 1));
  double u2 = unit(random_bits(spec.seed, spec.tensor, index, 2));
  double radius = std::sqrt(-2.0 * std::log1p(-u1));  // 1 - u1 in (0, 1]: no log(0)
  return spec.scale * radius * std::cos(2.0 * std::numbers::pi * u2);
}

Tensor random_tensor(const Shape& shape, DType dtype, const RandomSpec& spec) {
  return random_block(shape, Shape(shape.size(), 0), shape, dtype, spec);
}

namespace {
// Fills dst[i0, i1) of a block: local element i sits at global flat index
// `flat` (walked with an odometer over the local multi-index).
template <class T>
void fill_block(T* dst, int64_t i0, int64_t i1, const Shape& global, const Shape& offset, const Shape& local,
                const RandomSpec& spec) {
  const size_t n = global.size();
  std::vector<int64_t> idx(n, 0), stride(n, 1);
  for (int d = static_cast<int>(n) - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
  int64_t flat = 0, rest = i0;
  for (int d = static_cast<int>(n) - 1; d >= 0; --d) {  // unravel i0 in the local shape
    idx[d] = local[d] ? rest % local[d] : 0;
    rest = local[d] ? rest / local[d] : 0;
  }
  for (size_t d = 0; d < n; ++d) flat += (offset[d] + idx[d]) * stride[d];
  for (int64_t i = i0; i < i1; ++i) {
    dst[i] = from_double<T>(random_value(spec, static_cast<uint64_t>(flat)));
    for (int d = static_cast<int>(n) - 1; d >= 0; --d) {  // odometer increment
      flat += stride[d];
      if (++idx[d] < local[d]) break;
      flat -= stride[d] * local[d];
      idx[d] = 0;
    }
  }
}
}  // namespace

Tensor random_block(const Shape& global, const Shape& offset, const Shape& local, DType dtype, const RandomSpec& spec) {
  const size_t n = global.size();
  if (offset.size() != n || local.size() != n)
    throw RuntimeError("random_block: global, offset and local shapes differ in rank");
  for (size_t d = 0; d < n; ++d)
    if (offset[d] < 0 || offset[d] + local[d] > global[d])
      throw RuntimeError(cat("random_block: block ", shape_string(local), " at ", shape_string(offset), " outside ",
                             shape_string(global)));
  Tensor out = Tensor::empty(local, dtype);
  const int64_t count = out.numel();
  // Every value depends on its index alone, so large blocks are drawn by
  // several threads (a 1e9-parameter model is initialised on the host).
  constexpr int64_t kPerThread = int64_t{1} << 22;
  const int64_t threads = std::clamp<int64_t>(count / kPerThread, 1, std::max(1u, std::thread::hardware_concurrency()));
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data<T>();
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t)
      pool.emplace_back(fill_block<T>, dst, count * t / threads, count * (t + 1) / threads, std::cref(global),
                        std::cref(offset), std::cref(local), std::cref(spec));
    fill_block<T>(dst, 0, count / threads, global, offset, local, spec);
    for (std::thread& th : pool) th.join();
  });
  return out;
}

}  // namespace sextant
