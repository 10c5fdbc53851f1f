#include <gtest/gtest.h>

#include <set>

#include "harness/strings.h"
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

std::vector<RankIdentity> ranks_on_nodes(const std::vector<int>& nodes) {
  std::vector<RankIdentity> who;
  for (size_t r = 0; r < nodes.size(); ++r)
    who.push_back({static_cast<int>(r), nodes[r], cat("n", nodes[r] + 1), std::nullopt, std::nullopt});
  return who;
}

TEST(VoteByClass, EachDeviceKindHasItsOwnMajority) {
  // Two H100s agree on "a", three H200s on "b" but one says "c"; the lone host is its own majority.
  const std::vector<std::string> classes = {"H100", "H200", "H100", "H200", "H200", "host"};
  const Vote v = vote_by_class({"a", "b", "a", "c", "b", "z"}, classes);
  EXPECT_EQ(v.majority, (std::map<std::string, std::string>{{"H100", "a"}, {"H200", "b"}, {"host", "z"}}));
  EXPECT_TRUE(v.no_majority.empty());
  // Two ranks of a kind that disagree: neither is the odd one out.
  const Vote split = vote_by_class({"a", "b", "b", "c"}, {"H100", "H100", "H200", "H200"});
  EXPECT_TRUE(split.majority.empty());
  EXPECT_EQ(split.no_majority, (std::set<std::string>{"H100", "H200"}));
}

TEST(NodesBehindLinks, NamesTheNodeAllOfWhoseOtherNodeLinksAreNamed) {
  // Two ranks on each of three nodes; node 2 (ranks 4, 5) has 8 other-node links.
  const auto who = ranks_on_nodes({0, 0, 1, 1, 2, 2});
  std::set<Pair> named = {{0, 4}, {0, 5}, {1, 4}, {1, 5}, {2, 4}, {2, 5}, {3, 4}};
  EXPECT_TRUE(nodes_behind_links(who, named).empty()) << "one of its links is healthy";
  named.insert({3, 5});
  const auto found = nodes_behind_links(who, named);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]["kind"], "slow_node");
  EXPECT_EQ(found[0]["node"], 2);
  EXPECT_EQ(found[0]["host"], "n3");
  EXPECT_FALSE(found[0].contains("rank"));
  EXPECT_EQ(found[0]["value"], 8);
  // A same-node link does not count, and two nodes cannot be told apart.
  named.insert({4, 5});
  EXPECT_EQ(nodes_behind_links(who, named).size(), 1u);
  EXPECT_TRUE(nodes_behind_links(ranks_on_nodes({0, 1}), {{0, 1}}).empty());
  EXPECT_TRUE(nodes_behind_links(ranks_on_nodes({0, 0, 0}), {{0, 1}, {0, 2}, {1, 2}}).empty());
}

}  // namespace
}  // namespace sextant::screen
