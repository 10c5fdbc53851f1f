#include "harness/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace sextant {
namespace {

TEST(Npy, RoundTripAndHeaderAlignment) {
  std::string path = ::testing::TempDir() + "/t.npy";
  for (DType d : {DType::f64, DType::f32, DType::f16}) {
    Tensor t = Tensor::from_values({2, 3}, {1, -2, 3.5, 0, 7, -0.25}, d);
    write_npy(path, t);
    Tensor back = read_npy(path);
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.to_vector(), t.to_vector());
    std::ifstream in(path, std::ios::binary);
    char head[10];
    in.read(head, 10);
    size_t header = static_cast<unsigned char>(head[8]) | (static_cast<unsigned char>(head[9]) << 8);
    EXPECT_EQ((10 + header) % 64, 0u) << "numpy requires the data to start 64-byte aligned";
  }
  Tensor b = Tensor::from_values({2}, {1.5, -3}, DType::bf16);
  write_npy(path, b);
  EXPECT_EQ(read_npy(path).dtype(), DType::f32) << "bf16 is written as f32";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sextant
