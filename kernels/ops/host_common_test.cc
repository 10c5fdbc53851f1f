#include "kernels/ops/host_common.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "harness/device.h"
#include "harness/error.h"
#include "kernels/ops/op_testing.h"

namespace sextant::ops {
namespace {

TEST(HostCommon, TensorsOnTwoDevicesAreAClearError) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU here: a device tensor cannot be made in this build/machine";
  Tensor h = Tensor::zeros({4}, DType::f32), d = Tensor::zeros({4}, DType::f32, Device::cuda);
  EXPECT_TRUE(testing::throws_naming(
      [&] {
        require_one_device("some_op", {{"w", &h}, {"x", &d}});
      },
      "some_op: x is on cuda but w is on host"));
}

TEST(HostCommon, UndefinedTensorsAreAClearError) {
  Tensor undefined;
  EXPECT_TRUE(testing::throws_naming([&] { require_one_device("some_op", {{"gamma", &undefined}}); }, "gamma"));
}

TEST(HostCommon, OneDeviceIsTheTensorsDevice) {
  Tensor a = Tensor::zeros({4}, DType::f32), b = Tensor::zeros({2}, DType::f32);
  EXPECT_EQ(require_one_device("some_op", {{"a", &a}, {"b", &b}}), Device::host);
}

TEST(HostCommon, ShapeErrorsNameBothShapes) {
  Tensor t = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { require_shape("op", "w", t, {3, 2}); }, "op: w [2, 3] must be [3, 2]"));
}

TEST(HostCommon, RowsAreTheLeadingDims) {
  EXPECT_EQ(rows_of(Tensor::zeros({2, 3, 4}, DType::f32)), 6);
  EXPECT_EQ(rows_of(Tensor::zeros({5, 0}, DType::f32)), 5);
  EXPECT_EQ(rows_of(Tensor::zeros({7}, DType::f32)), 1);
}

TEST(HostCommon, LowPrecisionOutputsAreRoundedOnceOnStore) {
  // bf16 neighbours of 1 are 1 and 1 + 2^-7. 1 + 2^-8 + 2^-20 lies just above
  // the tie and rounds up; rounding through f16 first would drop the 2^-20,
  // land on the tie and round to even (1).
  Tensor out = Tensor::zeros({1}, DType::bf16);
  HostOut<float> view(out);
  view.get()[0] = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);
  EXPECT_EQ(out.at(0), 0.0);  // nothing stored before store()
  view.store();
  EXPECT_EQ(out.at(0), 1.0 + std::ldexp(1.0, -7));
}

TEST(HostCommon, FastBf16ConversionsMatchTheHarness) {
  // Every bf16 pattern widens like Tensor::to; f32 values around ties, the
  // overflow edge, infinities and NaN round like Tensor::to.
  Tensor all = Tensor::empty({65536}, DType::bf16);
  for (int b = 0; b < 65536; ++b) static_cast<uint16_t*>(all.raw())[b] = static_cast<uint16_t>(b);
  const Tensor wide = converted(all, DType::f32), expected = all.to(DType::f32);
  EXPECT_EQ(std::memcmp(wide.raw(), expected.raw(), wide.nbytes()), 0);
  std::vector<double> values;
  for (double base : {1.0, -3.0, 65504.0, 3.3895313892515355e38, 1e-40})
    for (int k = -3; k <= 3; ++k) values.push_back(base * (1.0 + k * std::ldexp(1.0, -9)));
  for (double v : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), 0.0, -0.0})
    values.push_back(v);
  const Tensor f32 = Tensor::from_values({static_cast<int64_t>(values.size())}, values, DType::f32);
  const Tensor narrow = converted(f32, DType::bf16), narrow_expected = f32.to(DType::bf16);
  EXPECT_EQ(std::memcmp(narrow.raw(), narrow_expected.raw(), narrow.nbytes()), 0);
}

TEST(HostCommon, InputsOfTheComputeTypeAreNotCopied) {
  Tensor t = Tensor::zeros({3}, DType::f32);
  HostIn<float> view(t);
  EXPECT_EQ(view.get(), t.data<float>());
}

TEST(HostCommon, LaneSumAndMaxCoverTheTail) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  EXPECT_EQ(lane_sum<float>(37, [&](int64_t i) { return x[i]; }), 666.0f);
  EXPECT_EQ(lane_max(x.data(), 37), 36.0f);
  for (int nan_at : {0, 20, 36}) {  // first lane, vector body, scalar tail
    std::vector<float> y = x;
    y[nan_at] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(lane_max(y.data(), 37))) << nan_at;
  }
  x[3] = 100.0f;  // the max inside the first vector
  EXPECT_EQ(lane_max(x.data(), 37), 100.0f);
}

}  // namespace
}  // namespace sextant::ops
