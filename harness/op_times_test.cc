#include "harness/op_times.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

TEST(OpTimes, RecordsTheOutermostOpOfEachCall) {
  OpTimes times;
  {
    OpTimer attention("attention", Device::host);
    OpTimer gemm("gemm", Device::host);  // inside attention: part of it
  }
  { OpTimer gemm("gemm", Device::host); }
  { OpTimer gemm("gemm", Device::host); }
  const std::map<std::string, double> s = times.seconds();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GE(s.at("attention"), 0.0);
  EXPECT_GE(s.at("gemm"), 0.0);
}

TEST(OpTimes, NothingIsRecordedWithoutARecording) {
  { OpTimer gemm("gemm", Device::host); }
  OpTimes times;
  EXPECT_TRUE(times.seconds().empty());
}

TEST(OpTimes, OneRecordingPerThread) {
  OpTimes times;
  EXPECT_THROW(OpTimes second, RuntimeError);
}

}  // namespace
}  // namespace sextant
