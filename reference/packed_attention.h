// Float64 reference attention over packed variable-length sequences (THD):
// q, k, v and dout hold the sequences one after another along s, with
// seq_lens summing to s; each sequence attends to itself alone, causally,
// exactly as if it were the only sequence (reference/attention.h on its
// rows). No cu_seqlens arithmetic is shared with the kernels: the sequences
// are cut out, computed one by one and put back in place.
//
// Shapes as reference/attention.h: q, dout [b, s, hq, d]; k, v [b, s, hk, d];
// lse [b, hq, s]. Results are f64.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/attention.h"

namespace sextant::ref {

// window_left: a causal sliding window within each sequence (-1: none).
AttentionResult packed_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const std::vector<int64_t>& seq_lens, int64_t window_left = -1);
AttentionGradients packed_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                             const std::vector<int64_t>& seq_lens, int64_t window_left = -1);
// The query rows at packed positions `rows` (spot check), each from its own sequence.
AttentionRows packed_attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                    const std::vector<int64_t>& seq_lens, const std::vector<int64_t>& rows,
                                    int64_t window_left = -1);

}  // namespace sextant::ref
