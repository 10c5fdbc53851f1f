#include "harness/topology.h"

#include <gtest/gtest.h>

namespace sextant {
namespace {

ParallelConfig config(int tp, int cp, int pp, int dp, int ep = 1, int etp = 0) {
  ParallelConfig c;
  c.tp = tp, c.cp = cp, c.pp = pp, c.dp = dp, c.ep = ep, c.etp = etp;
  return c;
}

NodeMap blocks(int nodes, int per_node) {
  NodeMap m;
  for (int n = 0; n < nodes; ++n) m.insert(m.end(), per_node, n);
  return m;
}

TEST(Topology, CountsAndPrefixes) {
  const NodeMap m = {0, 0, 1, 1, 1, 2};
  EXPECT_EQ(node_count(m), 3);
  EXPECT_EQ(ranks_per_node(m), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(max_ranks_per_node(m), 3);
  EXPECT_EQ(first_ranks(m, 2), (NodeMap{0, 0}));
  EXPECT_EQ(first_ranks(m, 4), (NodeMap{0, 0, 1, 1}));
  EXPECT_EQ(nodes_spanned(m, {0, 1}), 1);
  EXPECT_EQ(nodes_spanned(m, {1, 2, 5}), 3);
}

TEST(Topology, OneNodeKeepsTheOrder) {
  ParallelConfig c = config(2, 1, 2, 2);
  EXPECT_EQ(node_aware_order(c, blocks(1, 8)), c.order);
  EXPECT_TRUE(placement_warnings(c, blocks(1, 8)).empty());
}

// Two nodes of two ranks, tp2 pp2: tp fastest keeps TP inside a node, PP
// crosses between the neighbouring nodes.
TEST(Topology, TpInsideANodePpAcross) {
  ParallelConfig c = config(2, 1, 2, 1);
  const NodeMap nodes = blocks(2, 2);
  c.order = node_aware_order(c, nodes);
  const Placement p = placement_of(RankGrid(c, 4), nodes);
  EXPECT_EQ(p.tp_groups_across_nodes, 0);
  EXPECT_EQ(p.pp_groups_across_nodes, 2);
  EXPECT_EQ(p.pp_far_hops, 0);
  EXPECT_TRUE(placement_warnings(c, nodes).empty());
}

// DP outermost where it is valid: four nodes of two, tp2 pp2 dp2: each DP
// replica is a pair of neighbouring nodes and pipeline neighbours are one
// node apart.
TEST(Topology, DpOutermostWithPipelineNeighboursAdjacent) {
  ParallelConfig c = config(2, 1, 2, 2);
  const NodeMap nodes = blocks(4, 2);
  c.order = node_aware_order(c, nodes);
  EXPECT_EQ(c.order, "tp-cp-ep-pp-dp");
  const RankGrid g(c, 8);
  EXPECT_EQ(g.group(Dim::pp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(g.group(Dim::dp, 0), (std::vector<int>{0, 4}));
  EXPECT_EQ(placement_of(g, nodes).pp_far_hops, 0);
}

// The Megatron-Core default (pp last) on the same nodes: pipeline stages
// two nodes apart; the node-aware order removes that.
TEST(Topology, DefaultOrderPutsStagesFarApart) {
  ParallelConfig c = config(2, 1, 2, 2);
  EXPECT_EQ(placement_of(RankGrid(c, 8), blocks(4, 2)).pp_far_hops, 4);
}

// TP across nodes: an order that puts pp fastest, or tp larger than a node.
TEST(Topology, WarnsWhenTpSpansNodes) {
  ParallelConfig c = config(2, 1, 2, 1);
  c.order = "pp-tp-cp-ep-dp";
  const std::vector<std::string> w = placement_warnings(c, blocks(2, 2));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("2 of 2 TP groups span nodes"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("keeps them inside a node"), std::string::npos) << w[0];

  const std::vector<std::string> big = placement_warnings(config(4, 1, 1, 1), blocks(2, 2));
  ASSERT_EQ(big.size(), 1u);
  EXPECT_NE(big[0].find("tp 4 exceeds the 2 ranks of a node"), std::string::npos) << big[0];
}

// Dense cp2: only orders with pp after the expert layout's dimensions are
// valid; the choice is still one of them and keeps TP and CP inside nodes.
TEST(Topology, ChoosesOnlyValidOrders) {
  ParallelConfig c = config(2, 2, 2, 1);
  const NodeMap nodes = blocks(2, 4);
  c.order = node_aware_order(c, nodes);
  const Placement p = placement_of(RankGrid(c, 8), nodes);  // throws if invalid
  EXPECT_EQ(p.tp_groups_across_nodes, 0);
  EXPECT_EQ(p.cp_groups_across_nodes, 0);
}

}  // namespace
}  // namespace sextant
