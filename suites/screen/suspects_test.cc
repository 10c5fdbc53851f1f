#include <gtest/gtest.h>

#include <set>

#include "suites/screen/screen.h"

namespace sextant::screen {
namespace {

TEST(RoundRobin, EveryPairMeetsOnceInDisjointRounds) {
  for (int n : {2, 3, 4, 5, 8, 9, 16}) {
    const auto rounds = round_robin(n);
    EXPECT_EQ(rounds.size(), static_cast<size_t>(n % 2 ? n : n - 1)) << n;
    std::set<Pair> met;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "rank twice in a round, n " << n;
        EXPECT_TRUE(met.insert({a, b}).second) << "pair twice, n " << n;
      }
      EXPECT_EQ(round.size(), static_cast<size_t>(n / 2));
    }
    EXPECT_EQ(met.size(), static_cast<size_t>(n * (n - 1) / 2));
  }
}

TEST(ContentHash, SeesOneBit) {
  Tensor t = Tensor::zeros({16}, DType::f32);
  const std::string before = content_hash(t);
  static_cast<unsigned char*>(t.raw())[17] ^= 4;
  EXPECT_NE(content_hash(t), before);
  EXPECT_EQ(content_hash(Tensor::zeros({16}, DType::f32)), before);
}

}  // namespace
}  // namespace sextant::screen
