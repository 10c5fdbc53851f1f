#include "kernels/moe/permute.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::moe {

Permutation group_by_expert(const SlotTable& s, int first, int experts) {
  Permutation p;
  p.tokens = s.tokens;
  p.count.assign(static_cast<size_t>(experts), 0);
  for (int64_t slot = 0; slot < s.slots(); ++slot) {
    const int e = s.expert[slot] - first;
    if (s.kept[slot] && e >= 0 && e < experts) ++p.count[e];
  }
  p.offset.assign(static_cast<size_t>(experts) + 1, 0);
  for (int e = 0; e < experts; ++e) p.offset[e + 1] = p.offset[e] + p.count[e];
  p.slot.resize(static_cast<size_t>(p.offset[experts]));
  std::vector<int64_t> next(p.offset.begin(), p.offset.end() - 1);
  for (int64_t slot = 0; slot < s.slots(); ++slot) {  // token order: a stable grouping
    const int e = s.expert[slot] - first;
    if (s.kept[slot] && e >= 0 && e < experts) p.slot[next[e]++] = slot;
  }
  return p;
}

namespace {

void require_rows(const char* what, const Tensor& t, int64_t rows) {
  if (t.ndim() != 2 || t.dim(0) != rows)
    throw RuntimeError(cat("moe::", what, ": ", shape_string(t.shape()), " must have ", rows, " rows"));
}

// The slot whose token row r of a permutation gathers: p.slot[r], or under
// the planted fault moe_permute_order the slots of each expert in reverse.
std::vector<int64_t> gather_slots(const Permutation& p) {
  std::vector<int64_t> slots = p.slot;
  if (kernel_fault_planted(KernelFault::moe_permute_order))
    for (size_t e = 0; e + 1 < p.offset.size(); ++e)
      std::reverse(slots.begin() + p.offset[e], slots.begin() + p.offset[e + 1]);
  return slots;
}

// The routing weight of a slot in a combine (squared under the planted fault
// moe_combine_twice).
float combine_weight(const SlotTable& s, int64_t slot) {
  const float w = s.prob[slot];
  return kernel_fault_planted(KernelFault::moe_combine_twice) ? w * w : w;
}

// Row r of a permutation reads/writes slot `slot_of(r)`.
std::vector<int64_t> slots_in_token_order(const Permutation& p) {
  std::vector<int64_t> sorted = p.slot;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// The device paths (ops::cuda moe_*): the index lists are built here, on the
// host, from the routing table; the rows move on the device.

// Token of each permuted row.
std::vector<int64_t> row_tokens(const std::vector<int64_t>& slot_of, int topk) {
  std::vector<int64_t> tokens(slot_of.size());
  for (size_t r = 0; r < slot_of.size(); ++r) tokens[r] = slot_of[r] / topk;
  return tokens;
}

// Probability of each permuted row, as a device f32 tensor (undefined: no scaling).
Tensor row_scales(const SlotTable& s, const std::vector<int64_t>& slot_of, bool use_probs) {
  if (!use_probs) return {};
  Tensor host = Tensor::empty({static_cast<int64_t>(slot_of.size())}, DType::f32);
  float* w = host.data<float>();
  for (size_t r = 0; r < slot_of.size(); ++r) w[r] = combine_weight(s, slot_of[r]);
  return host.to(Device::cuda);
}

// Each token's rows in ascending row order (the order every unpermute adds
// them), as CSR lists: token t's rows are ids[first[t] .. first[t + 1]).
struct TokenRows {
  std::vector<int64_t> first, ids;
};
TokenRows rows_by_token(const SlotTable& s, const std::vector<int64_t>& slot_of) {
  TokenRows c{std::vector<int64_t>(static_cast<size_t>(s.tokens) + 1, 0), std::vector<int64_t>(slot_of.size())};
  for (int64_t slot : slot_of) ++c.first[slot / s.topk + 1];
  for (int64_t t = 0; t < s.tokens; ++t) c.first[t + 1] += c.first[t];
  std::vector<int64_t> next(c.first.begin(), c.first.end() - 1);
  for (size_t r = 0; r < slot_of.size(); ++r) c.ids[next[slot_of[r] / s.topk]++] = static_cast<int64_t>(r);
  return c;
}

// unpermute_rows on the device.
Tensor unpermute_on_device(const Tensor& rows, const SlotTable& s, const std::vector<int64_t>& slot_of,
                           bool use_probs) {
  const TokenRows c = rows_by_token(s, slot_of);
  Tensor y = Tensor::empty({s.tokens, rows.dim(1)}, rows.dtype(), Device::cuda);
  SEXTANT_CUDA_CALL(ops::cuda::moe_combine_rows(rows, c.first, c.ids, row_scales(s, slot_of, use_probs), y));
  return y;
}

}  // namespace

RowAddresses row_addresses(const Tensor& t) {
  RowAddresses a{{}, t.dtype(), t.dim(1)};
  const size_t width = static_cast<size_t>(t.dim(1)) * dtype_size(t.dtype());
  char* base = static_cast<char*>(const_cast<void*>(t.raw()));
  for (int64_t r = 0; r < t.dim(0); ++r) a.rows.push_back(base + r * width);
  return a;
}

void copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n) {
  if (n == 0) return;
  const size_t width = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());
  if (src.dtype() != dst.dtype() || src.dim(1) != dst.dim(1) || src_row + n > src.dim(0) || dst_row + n > dst.dim(0))
    throw RuntimeError(cat("moe::copy_rows: ", n, " rows from ", shape_string(src.shape()), " at ", src_row, " to ",
                           shape_string(dst.shape()), " at ", dst_row));
  if (src.device() != dst.device()) throw RuntimeError("moe::copy_rows: src and dst must be on the same device");
  char* to = static_cast<char*>(dst.raw()) + dst_row * width;
  const char* from = static_cast<const char*>(src.raw()) + src_row * width;
  if (src.is_host()) std::memcpy(to, from, width * n);
  else cuda_copy_2d(to, width * n, from, width * n, width * n, 1);  // one block, on the compute stream
}

void permute_rows_into(const Tensor& x, const SlotTable& s, const Permutation& p, bool weighted, Tensor& out) {
  require_rows("permute_rows", x, s.tokens);
  require_rows("permute_rows", out, p.rows());
  if (out.dtype() != x.dtype() || out.dim(1) != x.dim(1) || out.device() != x.device())
    throw RuntimeError(cat("moe::permute_rows: out ", shape_string(out.shape()), " does not fit x"));
  if (x.is_host()) return permute_rows_to(x, s, p, weighted, row_addresses(out));
  const std::vector<int64_t> source = gather_slots(p);
  SEXTANT_CUDA_CALL(ops::cuda::moe_gather_rows(x, row_tokens(source, s.topk), row_scales(s, source, weighted), out));
}

Tensor permute_rows(const Tensor& x, const SlotTable& s, const Permutation& p) {
  Tensor out = Tensor::empty({p.rows(), x.dim(-1)}, x.dtype(), x.device());
  permute_rows_into(x, s, p, false, out);
  return out;
}

Tensor permute_rows_weighted(const Tensor& x, const SlotTable& s, const Permutation& p, bool use_probs) {
  Tensor out = Tensor::empty({p.rows(), x.dim(-1)}, x.dtype(), x.device());
  permute_rows_into(x, s, p, use_probs, out);
  return out;
}

Tensor unpermute_rows(const Tensor& rows, const SlotTable& s, const Permutation& p, bool use_probs, bool wrong_order) {
  require_rows("unpermute_rows", rows, p.rows());
  if (rows.is_host()) {
    Tensor y = Tensor::empty({s.tokens, rows.dim(1)}, rows.dtype());
    unpermute_rows_from(row_addresses(rows), s, p, use_probs, wrong_order, y);
    return y;
  }
  const bool token_order = wrong_order || kernel_fault_planted(KernelFault::moe_unpermute_order);
  return unpermute_on_device(rows, s, token_order ? slots_in_token_order(p) : p.slot, use_probs);
}

void accumulate_row_dots(const Tensor& dy, const Tensor& rows, const SlotTable& s, const Permutation& p,
                         std::vector<float>& dprob) {
  require_rows("accumulate_row_dots", dy, s.tokens);
  require_rows("accumulate_row_dots", rows, p.rows());
  if (dy.dtype() != rows.dtype() || dy.device() != rows.device())
    throw RuntimeError("moe::accumulate_row_dots: dy and rows must share a dtype and a device");
  dprob.resize(static_cast<size_t>(s.slots()), 0.0f);
  if (!rows.is_host()) {
    Tensor dots = Tensor::empty({p.rows()}, DType::f32, Device::cuda);
    SEXTANT_CUDA_CALL(ops::cuda::moe_row_dots(dy, row_tokens(p.slot, s.topk), rows, dots));
    const Tensor host = dots.to(Device::host);
    for (int64_t r = 0; r < p.rows(); ++r) dprob[p.slot[r]] += host.data<float>()[r];
    return;
  }
  accumulate_row_dots_from(dy, row_addresses(rows), s, p, dprob);
}

void permute_rows_to(const Tensor& x, const SlotTable& s, const Permutation& p, bool weighted,
                     const RowAddresses& out) {
  require_rows("permute_rows", x, s.tokens);
  if (!x.is_host() || out.dtype != x.dtype() || out.h != x.dim(1) || static_cast<int64_t>(out.rows.size()) != p.rows())
    throw RuntimeError(cat("moe::permute_rows_to: ", out.rows.size(), " host rows of width ", out.h, " for ", p.rows(),
                           " rows of ", shape_string(x.shape())));
  const int64_t h = x.dim(1);
  const std::vector<int64_t> source = gather_slots(p);
  if (!weighted) {  // plain row copies
    const size_t width = static_cast<size_t>(h) * dtype_size(x.dtype());
    const char* in = static_cast<const char*>(x.raw());
    for (int64_t r = 0; r < p.rows(); ++r) std::memcpy(out.rows[r], in + (source[r] / s.topk) * width, width);
    return;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const float w = combine_weight(s, source[r]);
      const T* row = in + (source[r] / s.topk) * h;
      T* o = reinterpret_cast<T*>(out.rows[r]);
      for (int64_t i = 0; i < h; ++i) o[i] = from_float<T>(w * static_cast<float>(to_float(row[i])));
    }
  });
}

// Token-major: each output row is summed from its token's rows in ascending
// row order (from zero, in f32) and written once, so the result matches a
// row-major accumulation bit for bit while touching y once.
void unpermute_rows_from(const RowAddresses& rows, const SlotTable& s, const Permutation& p, bool use_probs,
                         bool wrong_order, Tensor& y) {
  if (static_cast<int64_t>(rows.rows.size()) != p.rows())
    throw RuntimeError(cat("moe::unpermute_rows: ", rows.rows.size(), " rows for ", p.rows()));
  if (!y.is_host() || y.dtype() != rows.dtype || y.shape() != Shape{s.tokens, rows.h})
    throw RuntimeError(
        cat("moe::unpermute_rows: y ", shape_string(y.shape()), " must be [", s.tokens, ", ", rows.h, "] on the host"));
  const int64_t h = rows.h;
  const bool token_order = wrong_order || kernel_fault_planted(KernelFault::moe_unpermute_order);
  const std::vector<int64_t> slot_of = token_order ? slots_in_token_order(p) : p.slot;
  const auto [first, ids] = rows_by_token(s, slot_of);
  std::vector<float> acc(static_cast<size_t>(h));
  dispatch(rows.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t t = 0; t < s.tokens; ++t) {
      T* out = y.data<T>() + t * h;
      // f32 rows sum in y's row itself (0 + the first row, then the others:
      // the same operations as a zeroed accumulator), others in f32 first.
      float* sum = std::is_same_v<T, float> ? reinterpret_cast<float*>(out) : acc.data();
      if (first[t] == first[t + 1]) std::fill(sum, sum + h, 0.0f);
      for (int64_t k = first[t]; k < first[t + 1]; ++k) {
        const int64_t r = ids[k];
        const float w = use_probs ? combine_weight(s, slot_of[r]) : 1.0f;
        const T* in = reinterpret_cast<const T*>(rows.rows[r]);
        if (k == first[t])
          for (int64_t i = 0; i < h; ++i) sum[i] = 0.0f + w * static_cast<float>(to_float(in[i]));
        else
          for (int64_t i = 0; i < h; ++i) sum[i] += w * static_cast<float>(to_float(in[i]));
      }
      if constexpr (!std::is_same_v<T, float>)
        for (int64_t i = 0; i < h; ++i) out[i] = from_float<T>(sum[i]);
    }
  });
}

void accumulate_row_dots_from(const Tensor& dy, const RowAddresses& rows, const SlotTable& s, const Permutation& p,
                              std::vector<float>& dprob) {
  require_rows("accumulate_row_dots", dy, s.tokens);
  if (!dy.is_host() || rows.dtype != dy.dtype() || rows.h != dy.dim(1) ||
      static_cast<int64_t>(rows.rows.size()) != p.rows())
    throw RuntimeError("moe::accumulate_row_dots: dy and rows must share a dtype and a width, on the host");
  const int64_t h = rows.h;
  dprob.resize(static_cast<size_t>(s.slots()), 0.0f);
  dispatch(rows.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const T* gt = g + (p.slot[r] / s.topk) * h;
      const T* in = reinterpret_cast<const T*>(rows.rows[r]);
      float dot = 0;
      for (int64_t i = 0; i < h; ++i) dot += static_cast<float>(to_float(gt[i])) * static_cast<float>(to_float(in[i]));
      dprob[p.slot[r]] += dot;
    }
  });
}

}  // namespace sextant::moe
