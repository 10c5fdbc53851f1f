#include "harness/fault_table.h"

#include <gtest/gtest.h>

namespace sextant {
namespace {

enum class ToyFault { none, early, late };
struct ToySite {
  int ranks = 1;
};

const FaultTable<ToyFault, ToySite>& toy() {
  static const FaultTable<ToyFault, ToySite> table(
      "toy", {{ToyFault::early, "early", "runs too early", "every config"},
              {ToyFault::late, "late", "runs too late", "2+ ranks", [](const ToySite& s) { return s.ranks >= 2; }}});
  return table;
}

TEST(FaultTable, ParsesItsNamesAndRefusesOthersAsBadInput) {
  EXPECT_EQ(toy().parse(""), ToyFault::none);
  EXPECT_EQ(toy().parse("late"), ToyFault::late);
  try {
    toy().parse("sideways");
    ADD_FAILURE() << "an unknown fault was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--fault 'sideways' is not a toy fault (known: early, late)");
  }
  EXPECT_EQ(toy().name(ToyFault::early), "early");
  EXPECT_EQ(toy().name(ToyFault::none), "");
}

TEST(FaultTable, SaysWhereEachFaultShows) {
  EXPECT_TRUE(toy().shows(ToyFault::none, {1}));
  EXPECT_TRUE(toy().shows(ToyFault::early, {1}));
  EXPECT_FALSE(toy().shows(ToyFault::late, {1}));
  EXPECT_TRUE(toy().shows(ToyFault::late, {2}));
  const std::vector<FaultDoc> one_rank = toy().docs_where({{1}});
  EXPECT_EQ(toy().docs_where({{1}, {3}}).size(), 2u);
  ASSERT_EQ(one_rank.size(), 1u);
  EXPECT_EQ(one_rank[0].name, "early");
  EXPECT_EQ(one_rank[0].family, "toy");
  EXPECT_EQ(toy().docs().size(), 2u);
}

}  // namespace
}  // namespace sextant
