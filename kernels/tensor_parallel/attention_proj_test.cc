// The packed QKV layout, (KV group, {its query heads, k, v}): query head j
// of group g and the group's k and v come from the columns the layout names,
// with v dv wide (MLA: dv != d), and merging the parts gives the packed
// tensor back.
#include "kernels/tensor_parallel/attention_proj.h"

#include <gtest/gtest.h>

#include <tuple>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::tp {
namespace {

// Element e of part i (i < r: query head i of the group; r: k; r + 1: v) of
// group g in row t, as an exact small integer.
double code(int64_t t, int64_t g, int64_t i, int64_t e) { return 1000.0 * t + 100.0 * g + 10.0 * i + e; }

TEST(SplitQkv, GroupsHoldTheirQueryHeadsThenKAndV) {
  for (const auto& [heads, kv_heads, dv] :
       {std::tuple{4, 4, 5}, std::tuple{4, 2, 5}, std::tuple{6, 1, 5}, std::tuple{4, 2, 3}, std::tuple{2, 2, 7}}) {
    const int64_t b = 2, s = 3, d = 5, r = heads / kv_heads, group = (r + 1) * d + dv, width = kv_heads * group;
    Tensor packed = Tensor::empty({b, s, width}, DType::f32);
    for (int64_t t = 0; t < b * s; ++t)
      for (int64_t g = 0; g < kv_heads; ++g)
        for (int64_t i = 0; i < r + 2; ++i)
          for (int64_t e = 0; e < (i == r + 1 ? dv : d); ++e)
            packed.set(t * width + g * group + i * d + e, code(t, g, i, e));
    const Qkv parts = split_qkv(packed, heads, kv_heads, d, dv);
    const std::string shape = cat(heads, ":", kv_heads, " dv ", dv);
    ASSERT_EQ(parts.q.shape(), (Shape{b, s, heads, d})) << shape;
    ASSERT_EQ(parts.k.shape(), (Shape{b, s, kv_heads, d})) << shape;
    ASSERT_EQ(parts.v.shape(), (Shape{b, s, kv_heads, dv})) << shape;
    for (int64_t t = 0; t < b * s; ++t)
      for (int64_t e = 0; e < std::max<int64_t>(d, dv); ++e) {
        for (int64_t h = 0; h < heads && e < d; ++h)  // query head h reads KV head h / r
          EXPECT_EQ(parts.q.at((t * heads + h) * d + e), code(t, h / r, h % r, e)) << shape;
        for (int64_t g = 0; g < kv_heads; ++g) {
          if (e < d) {
            EXPECT_EQ(parts.k.at((t * kv_heads + g) * d + e), code(t, g, r, e)) << shape;
          }
          if (e < dv) {
            EXPECT_EQ(parts.v.at((t * kv_heads + g) * dv + e), code(t, g, r + 1, e)) << shape;
          }
        }
      }
    const Tensor merged = merge_qkv(parts);
    ASSERT_EQ(merged.shape(), packed.shape()) << shape;
    for (int64_t i = 0; i < packed.numel(); ++i) ASSERT_EQ(merged.at(i), packed.at(i)) << shape;
  }
}

TEST(SplitQkv, RefusesKvHeadsThatDoNotDivideTheQueryHeads) {
  const Tensor packed = Tensor::zeros({1, 1, (4 + 2 * 3) * 2}, DType::f32);
  EXPECT_THROW(split_qkv(packed, 4, 3, 2, 2), RuntimeError);
  EXPECT_THROW(split_qkv(Tensor::zeros({1, 1, 7}, DType::f32), 4, 2, 2, 2), RuntimeError);
  EXPECT_THROW(split_qkv(Tensor::zeros({1, 1, (4 + 2 * 2) * 2}, DType::f32), 4, 2, 2, 3), RuntimeError);
  EXPECT_THROW(merge_qkv({Tensor::zeros({1, 1, 4, 2}, DType::f32), Tensor::zeros({1, 1, 3, 2}, DType::f32),
                          Tensor::zeros({1, 1, 3, 2}, DType::f32)}),
               RuntimeError);
  EXPECT_THROW(merge_qkv({Tensor::zeros({1, 1, 4, 2}, DType::f32), Tensor::zeros({1, 1, 2, 2}, DType::f32),
                          Tensor::zeros({1, 1, 1, 3}, DType::f32)}),
               RuntimeError);  // v's KV heads differ from k's
}

}  // namespace
}  // namespace sextant::tp
