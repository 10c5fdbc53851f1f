// The mask of one attention block (attention_block.h): which keys each
// query row may see, from the rows' global positions and, for packed
// sequences, the sequence of every row. Shared by the host and CUDA block
// kernels (cuda_ops.h), the piece driver and the CP stages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sextant::ops {

// A sliding window (TransformerEngine's window_size (left, right)): the
// query at position p sees the keys at positions [p - left, p + right] only;
// kNoWindow leaves that side unbounded. Under a causal mask right is 0 or
// kNoWindow (no later key is seen anyway).
inline constexpr int64_t kNoWindow = -1;
struct Window {
  int64_t left = kNoWindow, right = kNoWindow;

  bool any() const { return left != kNoWindow || right != kNoWindow; }
  bool operator==(const Window&) const = default;
  // A causal window of `left` keys before the query.
  static Window causal(int64_t left) { return {left, kNoWindow}; }
};

// Which keys a query row may see. Rows carry their global sequence positions
// so that a block of a sharded sequence (contiguous, zigzag, or gathered from
// several ranks) is masked by where its rows really are.
//   causal: key j is visible to query i iff k_pos[j] <= q_pos[i].
// Packed variable-length sequences (THD, as TransformerEngine's cu_seqlens):
// positions run through the packed stream, and every row also names its
// sequence by the stream position of the sequence's first row (its
// cu_seqlens entry), or kPaddingRow for a padding row. A query then sees the
// keys of its own sequence only, causally; a padding row sees no key and is
// seen by no query (its out is 0 and its lse -inf). Sequences must occupy
// disjoint ranges of positions, each starting at its name: the CUDA kernels
// read "same sequence, causal" as the window [q_seq[i], q_pos[i]].
// A sliding window (above) bounds every query's keys further, causal or not;
// a windowed mask carries positions even without a causal one.
struct AttentionMask {
  static constexpr int64_t kPaddingRow = -1;
  static constexpr int64_t kNoWindow = ops::kNoWindow;

  bool causal = false;
  Window window;               // kNoWindow on both sides: none
  std::vector<int64_t> q_pos;  // [sq] global positions of the query rows (positional() only)
  std::vector<int64_t> k_pos;  // [sk] global positions of the key rows (positional() only)
  std::vector<int64_t> q_seq;  // [sq] sequence of each query row (packed only; empty: one sequence)
  std::vector<int64_t> k_seq;  // [sk] sequence of each key row (packed only)

  bool packed() const { return !q_seq.empty(); }
  bool windowed() const { return window.any(); }
  // Whether rows carry positions: a causal or a windowed mask.
  bool positional() const { return causal || windowed(); }
  // The same mask with a sliding window.
  AttentionMask with_window(Window w) const;
  // The positions of the keys a query at position p may see (within its
  // sequence when packed): [first_key(p), last_key(p)].
  int64_t first_key(int64_t p) const;
  int64_t last_key(int64_t p) const;

  static AttentionMask none() { return {}; }
  // Query rows at q_start.., key rows at k_start.. (contiguous blocks).
  static AttentionMask causal_blocks(int64_t q_start, int64_t sq, int64_t k_start, int64_t sk);
  static AttentionMask causal_positions(std::vector<int64_t> q_pos, std::vector<int64_t> k_pos);
  // No causal mask, rows at these positions (for a window to bound).
  static AttentionMask positions(std::vector<int64_t> q_pos, std::vector<int64_t> k_pos);
  // Causal within packed sequences.
  static AttentionMask causal_packed(std::vector<int64_t> q_pos, std::vector<int64_t> q_seq, std::vector<int64_t> k_pos,
                                     std::vector<int64_t> k_seq);
};

// "the window (left, right) needs ...", or "" when w fits a mask that is
// causal or not: each side kNoWindow or >= 0, and right 0 or kNoWindow when causal.
std::string window_problem(Window w, bool causal);

// The CUDA kernels take a mask as at most this many runs of consecutive
// positions of one sequence, per side (kernels/ops/cuda/attention_common.cuh);
// a block whose rows form more runs is refused with a RuntimeError.
constexpr int kCudaMaskRuns = 128;

// Whether key j is visible to query i under the mask (the rule above).
bool key_visible(const AttentionMask& mask, size_t i, size_t j);

// How much of a block the mask lets through.
enum class Visibility { full, partial, none };
Visibility visibility(const AttentionMask& mask);

// Number of visible (query, key) pairs of a block: the causal work it holds.
int64_t visible_pairs(const AttentionMask& mask, int64_t sq, int64_t sk);

}  // namespace sextant::ops
