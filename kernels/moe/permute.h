// Permute and unpermute (Megatron moe_utils.permute / unpermute): the rows of
// a dispatch are the kept slots (token, j), grouped by expert in expert order
// and stable in token order inside an expert. The inverse weights each row by
// its routing probability and sums a token's k rows.
//
// Rows are copied in the storage dtype (what travels is what the layer
// stores); weighted sums and dot products accumulate in f32 and round once.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/tensor.h"
#include "kernels/moe/router.h"

namespace sextant::moe {

struct Permutation {
  int64_t tokens = 0;           // tokens of the slot table it came from
  std::vector<int64_t> slot;    // [rows]: slot t * k + j of each permuted row
  std::vector<int64_t> count;   // [experts]: rows per expert
  std::vector<int64_t> offset;  // [experts + 1]: first row of each expert
  int64_t rows() const { return static_cast<int64_t>(slot.size()); }
};

// Kept slots of experts [first, first + experts), grouped by expert (index
// relative to first), token order inside each.
Permutation group_by_expert(const SlotTable& slots, int first, int experts);

// x: [T, h] -> out: [rows, h] (x's dtype), row r = x[token of slot r], scaled by
// its probability when `weighted` (the backward of a weighted combine).
void permute_rows_into(const Tensor& x, const SlotTable& slots, const Permutation& p, bool weighted, Tensor& out);
Tensor permute_rows(const Tensor& x, const SlotTable& slots, const Permutation& p);
Tensor permute_rows_weighted(const Tensor& x, const SlotTable& slots, const Permutation& p, bool use_probs = true);

// rows: [rows, h] -> y: [T, h], y[t] = sum over t's rows of prob * row (or of
// row alone when !use_probs). wrong_order (planted fault): row r is taken for
// the r-th kept slot in token order, as if the rows had not been grouped.
Tensor unpermute_rows(const Tensor& rows, const SlotTable& slots, const Permutation& p, bool use_probs,
                      bool wrong_order = false);

// dprob[slot of row r] += <dy[token of r], rows[r]> (f32).
void accumulate_row_dots(const Tensor& dy, const Tensor& rows, const SlotTable& slots, const Permutation& p,
                         std::vector<float>& dprob);

// The same three on the host with each row anywhere in memory: row r of the
// permutation at rows[r] (x's or dy's dtype and width), e.g. in a peer's
// buffer, so a dispatch writes each row once, into its final place, and a
// combine reads the experts' outputs where they are.
struct RowAddresses {
  std::vector<char*> rows;  // [p.rows()]
  DType dtype = DType::f32;
  int64_t h = 0;
};
RowAddresses row_addresses(const Tensor& rows);  // of a contiguous host tensor [rows, h]
void permute_rows_to(const Tensor& x, const SlotTable& slots, const Permutation& p, bool weighted,
                     const RowAddresses& out);
// Into y: [T, h] of the rows' dtype (a buffer kept between calls: a fresh
// one costs a page fault per 4 KiB).
void unpermute_rows_from(const RowAddresses& rows, const SlotTable& slots, const Permutation& p, bool use_probs,
                         bool wrong_order, Tensor& y);
void accumulate_row_dots_from(const Tensor& dy, const RowAddresses& rows, const SlotTable& slots, const Permutation& p,
                              std::vector<float>& dprob);

// Copies row ranges between buffers of the same dtype and row width:
// dst rows [dst_row, dst_row + n) = src rows [src_row, src_row + n).
void copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n);

}  // namespace sextant::moe
