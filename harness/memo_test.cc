#include "harness/memo.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sextant {
namespace {

struct Key {
  int n = 0;
  std::vector<int> lengths;
  bool operator==(const Key&) const = default;
};

TEST(Memo, ComputesOncePerKeyAndForgetsTheOldest) {
  Memo<Key, std::string> memo(2);
  int computed = 0;
  auto value = [&](const Key& k) {
    return memo.get(k, [&] {
      ++computed;
      return std::to_string(k.n) + ":" + std::to_string(k.lengths.size());
    });
  };
  EXPECT_EQ(value({1, {}}), "1:0");
  EXPECT_EQ(value({1, {}}), "1:0");
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(value({1, {4, 4}}), "1:2");  // a field of the key differs
  EXPECT_EQ(computed, 2);
  EXPECT_EQ(value({2, {}}), "2:0");  // a third key: the first is forgotten
  EXPECT_EQ(value({1, {}}), "1:0");
  EXPECT_EQ(computed, 4);
}

TEST(Memo, ReferencesStayValidWhileNewerKeysArrive) {
  Memo<Key, std::vector<double>> memo(3);
  const std::vector<double>& first = memo.get({1, {}}, [] { return std::vector<double>(100, 1.0); });
  memo.get({2, {}}, [] { return std::vector<double>(100, 2.0); });
  EXPECT_EQ(first[99], 1.0);
}

}  // namespace
}  // namespace sextant
