#include "kernels/moe/permute.h"

#include <algorithm>
#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"

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

// Row r of a permutation reads/writes slot `slot_of(r)`.
std::vector<int64_t> slots_in_token_order(const Permutation& p) {
  std::vector<int64_t> sorted = p.slot;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace

void copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n) {
  if (n == 0) return;
  const size_t width = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());
  if (src.dtype() != dst.dtype() || src.dim(1) != dst.dim(1) || src_row + n > src.dim(0) || dst_row + n > dst.dim(0))
    throw RuntimeError(cat("moe::copy_rows: ", n, " rows from ", shape_string(src.shape()), " at ", src_row, " to ",
                           shape_string(dst.shape()), " at ", dst_row));
  std::memcpy(static_cast<char*>(dst.raw()) + dst_row * width,
              static_cast<const char*>(src.raw()) + src_row * width, width * n);
}

void permute_rows_into(const Tensor& x, const SlotTable& s, const Permutation& p, bool weighted, Tensor& out) {
  require_rows("permute_rows", x, s.tokens);
  require_rows("permute_rows", out, p.rows());
  if (out.dtype() != x.dtype() || out.dim(1) != x.dim(1))
    throw RuntimeError(cat("moe::permute_rows: out ", shape_string(out.shape()), " does not fit x"));
  const int64_t h = x.dim(1);
  if (!weighted) {  // plain row copies
    const size_t width = static_cast<size_t>(h) * dtype_size(x.dtype());
    const char* in = static_cast<const char*>(x.raw());
    char* o = static_cast<char*>(out.raw());
    for (int64_t r = 0; r < p.rows(); ++r) std::memcpy(o + r * width, in + (p.slot[r] / s.topk) * width, width);
    return;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const float w = s.prob[p.slot[r]];
      const T* row = in + (p.slot[r] / s.topk) * h;
      for (int64_t i = 0; i < h; ++i) o[r * h + i] = from_float<T>(w * static_cast<float>(to_float(row[i])));
    }
  });
}

Tensor permute_rows(const Tensor& x, const SlotTable& s, const Permutation& p) {
  Tensor out = Tensor::empty({p.rows(), x.dim(-1)}, x.dtype());
  permute_rows_into(x, s, p, false, out);
  return out;
}

Tensor permute_rows_weighted(const Tensor& x, const SlotTable& s, const Permutation& p, bool use_probs) {
  Tensor out = Tensor::empty({p.rows(), x.dim(-1)}, x.dtype());
  permute_rows_into(x, s, p, use_probs, out);
  return out;
}

Tensor unpermute_rows(const Tensor& rows, const SlotTable& s, const Permutation& p, bool use_probs,
                      bool wrong_order) {
  require_rows("unpermute_rows", rows, p.rows());
  const int64_t h = rows.dim(1);
  Tensor acc = Tensor::zeros({s.tokens, h}, DType::f32);
  float* y = acc.data<float>();
  const std::vector<int64_t> slot_of = wrong_order ? slots_in_token_order(p) : p.slot;
  dispatch(rows.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = rows.data<T>();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const int64_t slot = slot_of[r];
      const float w = use_probs ? s.prob[slot] : 1.0f;
      float* yt = y + (slot / s.topk) * h;
      for (int64_t i = 0; i < h; ++i) yt[i] += w * static_cast<float>(to_float(in[r * h + i]));
    }
  });
  return rows.dtype() == DType::f32 ? acc : acc.to(rows.dtype());
}

void accumulate_row_dots(const Tensor& dy, const Tensor& rows, const SlotTable& s, const Permutation& p,
                         std::vector<float>& dprob) {
  require_rows("accumulate_row_dots", dy, s.tokens);
  require_rows("accumulate_row_dots", rows, p.rows());
  if (dy.dtype() != rows.dtype()) throw RuntimeError("moe::accumulate_row_dots: dy and rows must share a dtype");
  const int64_t h = rows.dim(1);
  dprob.resize(static_cast<size_t>(s.slots()), 0.0f);
  dispatch(rows.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *g = dy.data<T>(), *in = rows.data<T>();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const T* gt = g + (p.slot[r] / s.topk) * h;
      float dot = 0;
      for (int64_t i = 0; i < h; ++i) dot += static_cast<float>(to_float(gt[i])) * static_cast<float>(to_float(in[r * h + i]));
      dprob[p.slot[r]] += dot;
    }
  });
}

}  // namespace sextant::moe
