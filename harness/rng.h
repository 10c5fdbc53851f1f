// Counter-based deterministic inputs: every element is a pure function of
// (seed, tensor id, global flat index), so a rank generates exactly its shard
// with no communication and the reference generates the whole tensor
// identically. Values are rounded to the storage dtype when written.
#pragma once

#include <cstdint>
#include <string_view>

#include "harness/tensor.h"

namespace sextant {

enum class Distribution { uniform, normal };

// Stable id of a named tensor (FNV-1a of the name): tensor_id("attention.q").
uint64_t tensor_id(std::string_view name);

struct RandomSpec {
  uint64_t seed = 0;
  uint64_t tensor = 0;  // tensor_id(...)
  double scale = 1.0;   // uniform in [-scale, scale), or normal with stddev scale
  Distribution distribution = Distribution::uniform;
};

// 64 random bits for (seed, tensor, index, stream).
uint64_t random_bits(uint64_t seed, uint64_t tensor, uint64_t index, uint64_t stream = 0);
// The value of element `index` of the global tensor described by spec.
double random_value(const RandomSpec& spec, uint64_t index);

// The whole tensor.
Tensor random_tensor(const Shape& shape, DType dtype, const RandomSpec& spec);
// The block of the global tensor that starts at `offset` and has shape `local`
// (a rank's shard); element values equal those of random_tensor(global, ...).
Tensor random_block(const Shape& global, const Shape& offset, const Shape& local, DType dtype, const RandomSpec& spec);

}  // namespace sextant
