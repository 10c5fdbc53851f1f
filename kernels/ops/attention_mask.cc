#include "kernels/ops/attention_mask.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "harness/strings.h"

namespace sextant::ops {

AttentionMask AttentionMask::causal_blocks(int64_t q_start, int64_t sq, int64_t k_start, int64_t sk) {
  AttentionMask m;
  m.causal = true;
  m.q_pos.resize(static_cast<size_t>(sq));
  m.k_pos.resize(static_cast<size_t>(sk));
  std::iota(m.q_pos.begin(), m.q_pos.end(), q_start);
  std::iota(m.k_pos.begin(), m.k_pos.end(), k_start);
  return m;
}

AttentionMask AttentionMask::causal_positions(std::vector<int64_t> q_pos, std::vector<int64_t> k_pos) {
  AttentionMask m;
  m.causal = true;
  m.q_pos = std::move(q_pos);
  m.k_pos = std::move(k_pos);
  return m;
}

AttentionMask AttentionMask::positions(std::vector<int64_t> q_pos, std::vector<int64_t> k_pos) {
  AttentionMask m = causal_positions(std::move(q_pos), std::move(k_pos));
  m.causal = false;
  return m;
}

AttentionMask AttentionMask::causal_packed(std::vector<int64_t> q_pos, std::vector<int64_t> q_seq,
                                           std::vector<int64_t> k_pos, std::vector<int64_t> k_seq) {
  AttentionMask m = causal_positions(std::move(q_pos), std::move(k_pos));
  m.q_seq = std::move(q_seq);
  m.k_seq = std::move(k_seq);
  return m;
}

AttentionMask AttentionMask::with_window(Window w) const {
  AttentionMask m = *this;
  m.window = w;
  return m;
}

// Far past any position (positions stay within an int64's quarter), so that
// p - left and p + right never overflow.
constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;

int64_t AttentionMask::first_key(int64_t p) const { return window.left == kNoWindow ? -kUnbounded : p - window.left; }

int64_t AttentionMask::last_key(int64_t p) const {
  if (causal) return p;
  return window.right == kNoWindow ? kUnbounded : p + window.right;
}

std::string window_problem(Window w, bool causal) {
  const std::string which = cat("the sliding window (", w.left, ", ", w.right, ")");
  if (w.left < kNoWindow || w.right < kNoWindow) return cat(which, " needs each side >= 0 (or unbounded)");
  if (causal && w.right != kNoWindow && w.right != 0) return cat(which, " of a causal mask needs right 0");
  return "";
}

bool key_visible(const AttentionMask& m, size_t i, size_t j) {
  if (!m.positional()) return true;
  if (m.packed() && (m.q_seq[i] == AttentionMask::kPaddingRow || m.k_seq[j] != m.q_seq[i])) return false;
  return m.first_key(m.q_pos[i]) <= m.k_pos[j] && m.k_pos[j] <= m.last_key(m.q_pos[i]);
}

namespace {

// Visible pairs of a positional mask: the keys of each sequence sorted by
// position, each query counting those of its own sequence from its first
// key to its last.
int64_t positional_visible_pairs(const AttentionMask& mask) {
  const bool packed = mask.packed();
  std::vector<std::pair<int64_t, int64_t>> keys;  // (sequence, position)
  for (size_t j = 0; j < mask.k_pos.size(); ++j)
    if (!packed || mask.k_seq[j] != AttentionMask::kPaddingRow)
      keys.emplace_back(packed ? mask.k_seq[j] : 0, mask.k_pos[j]);
  std::sort(keys.begin(), keys.end());
  int64_t pairs = 0;
  for (size_t i = 0; i < mask.q_pos.size(); ++i) {
    const int64_t seq = packed ? mask.q_seq[i] : 0;
    if (seq == AttentionMask::kPaddingRow) continue;
    auto first =
        std::lower_bound(keys.begin(), keys.end(), std::pair<int64_t, int64_t>{seq, mask.first_key(mask.q_pos[i])});
    auto last =
        std::upper_bound(keys.begin(), keys.end(), std::pair<int64_t, int64_t>{seq, mask.last_key(mask.q_pos[i])});
    pairs += last - first;
  }
  return pairs;
}

}  // namespace

Visibility visibility(const AttentionMask& mask) {
  if (!mask.positional()) return Visibility::full;
  if (mask.q_pos.empty() || mask.k_pos.empty()) return Visibility::none;
  if (mask.packed() || mask.windowed()) {
    const int64_t pairs = positional_visible_pairs(mask);
    const int64_t all = static_cast<int64_t>(mask.q_pos.size() * mask.k_pos.size());
    return pairs == 0 ? Visibility::none : pairs == all ? Visibility::full : Visibility::partial;
  }
  auto [q_min, q_max] = std::minmax_element(mask.q_pos.begin(), mask.q_pos.end());
  auto [k_min, k_max] = std::minmax_element(mask.k_pos.begin(), mask.k_pos.end());
  if (*k_max <= *q_min) return Visibility::full;
  if (*k_min > *q_max) return Visibility::none;
  return Visibility::partial;
}

int64_t visible_pairs(const AttentionMask& mask, int64_t sq, int64_t sk) {
  if (!mask.positional()) return sq * sk;
  if (mask.packed() || mask.windowed()) return positional_visible_pairs(mask);
  std::vector<int64_t> keys = mask.k_pos;
  std::sort(keys.begin(), keys.end());
  int64_t pairs = 0;
  for (int64_t p : mask.q_pos) pairs += std::upper_bound(keys.begin(), keys.end(), p) - keys.begin();
  return pairs;
}

}  // namespace sextant::ops
