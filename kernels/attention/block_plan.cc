#include <time.h>

#include <exception>

#include "kernels/attention/kv_exchange.h"

namespace sextant::cp {

namespace {

// The key positions the kernel believes in for member k_member's block, seen
// from q_member. Under the planted off-by-one, blocks received from other
// members sit one position early: where such a block starts right after a
// query row, that row also sees the block's first key (one pair per block
// boundary; the member's own block stays exact).
std::vector<int64_t> key_positions(const BlockPlan& plan, int q_member, int k_member) {
  std::vector<int64_t> pos = plan.positions.at(k_member);
  if (plan.fault == Fault::mask_off_by_one && k_member != q_member)
    for (int64_t& p : pos) p -= 1;
  return pos;
}

}  // namespace

ops::AttentionMask BlockPlan::mask(int q_member, int k_member) const {
  if (!causal && !window.any()) return ops::AttentionMask::none();
  if (!causal)
    return ops::AttentionMask::positions(positions.at(q_member), key_positions(*this, q_member, k_member))
        .with_window(window);
  if (sequences.empty())
    return ops::AttentionMask::causal_positions(positions.at(q_member), key_positions(*this, q_member, k_member))
        .with_window(window);
  return ops::AttentionMask::causal_packed(positions.at(q_member), sequences.at(q_member),
                                           key_positions(*this, q_member, k_member), sequences.at(k_member))
      .with_window(window);
}

ops::AttentionMask BlockPlan::mask_all(int q_member) const {
  if (!causal && !window.any()) return ops::AttentionMask::none();
  std::vector<int64_t> keys, key_sequences;
  for (int m = 0; m < static_cast<int>(positions.size()); ++m) {
    std::vector<int64_t> mine = key_positions(*this, q_member, m);
    keys.insert(keys.end(), mine.begin(), mine.end());
    if (!sequences.empty()) key_sequences.insert(key_sequences.end(), sequences[m].begin(), sequences[m].end());
  }
  if (!causal) return ops::AttentionMask::positions(positions.at(q_member), std::move(keys)).with_window(window);
  if (sequences.empty())
    return ops::AttentionMask::causal_positions(positions.at(q_member), std::move(keys)).with_window(window);
  return ops::AttentionMask::causal_packed(positions.at(q_member), sequences.at(q_member), std::move(keys),
                                           std::move(key_sequences))
      .with_window(window);
}

void count_work(Stats* stats, int64_t scores, const ops::AttentionMask& mask, const Tensor& q, const Tensor& k) {
  if (!stats) return;
  stats->scores += scores;
  stats->pairs += ops::visible_pairs(mask, q.dim(1), k.dim(1)) * q.dim(0) * q.dim(2);
}

}  // namespace sextant::cp
