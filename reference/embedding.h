// Token embedding, float64: y[t] = table[ids[t]].
#pragma once

#include <cstdint>
#include <span>

#include "harness/tensor.h"

namespace sextant::ref {

// ids: n token ids in [0, vocab); table: [vocab, h] -> y: [n, h] (reshape as needed).
Tensor embedding_forward(std::span<const int64_t> ids, const Tensor& table);
// dy: [n, h] (or [..., h] with n rows) -> dtable: [vocab, h], dtable[v] = sum of dy[t] over t with ids[t] = v.
Tensor embedding_backward(std::span<const int64_t> ids, const Tensor& dy, int64_t vocab);

}  // namespace sextant::ref
