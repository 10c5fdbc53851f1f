// Which node each rank runs on, and rank grids placed with it in mind.
//
// Nodes are detected, not assumed: ranks that share memory
// (MPI_COMM_TYPE_SHARED) are one node. A node map numbers the nodes in the
// order of their first rank: {0, 0, 1, 1} is two nodes of two ranks.
//
// Node-aware grids, after Megatron-LM's placement advice (Narayanan et al.
// 2021, "Efficient Large-Scale Language Model Training on GPU Clusters",
// section 3.3: tensor parallelism within a node, pipeline parallelism across
// nodes): among the rank orders of harness/grid.h that keep tp fastest, the
// one that keeps TP groups inside a node, then EP and CP groups, then puts
// pipeline neighbours on the same or adjacent nodes, and prefers DP
// outermost. Racks are not visible to the program, so "EP inside a rack" is
// approximated by EP inside a node where possible.
#pragma once

#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/grid.h"

namespace sextant {

using NodeMap = std::vector<int>;  // node index of each rank

// Collective over comm (a host communicator): the node of every rank of comm.
// MpiCommunicator: MPI_COMM_TYPE_SHARED; any other: the host name.
NodeMap detect_nodes(Communicator& comm);

int node_count(const NodeMap& nodes);
// Ranks on the most populated node.
int max_ranks_per_node(const NodeMap& nodes);
// Ranks of each node, in node order.
std::vector<int> ranks_per_node(const NodeMap& nodes);
// The first `ranks` entries, renumbered (the group of the first g ranks).
NodeMap first_ranks(const NodeMap& nodes, int ranks);
// Distinct nodes among `members` (ranks of the map).
int nodes_spanned(const NodeMap& nodes, const std::vector<int>& members);

// How a grid lies on the nodes.
struct Placement {
  std::string order;
  int tp_groups_across_nodes = 0, etp_groups_across_nodes = 0, ep_groups_across_nodes = 0, cp_groups_across_nodes = 0,
      dp_groups_across_nodes = 0, pp_groups_across_nodes = 0;
  int pp_far_hops = 0;  // consecutive stages more than one node apart, summed over hops
};
Placement placement_of(const RankGrid& grid, const NodeMap& nodes);

// The rank order for `config` on these nodes (see the file comment). One
// node: config.order unchanged. Throws nothing: invalid candidates are skipped.
std::string node_aware_order(const ParallelConfig& config, const NodeMap& nodes);

// One line per problem a user should hear about, e.g. "tp2 ...: 2 of 2 TP
// groups span nodes (order pp-tp-cp-ep-dp): TP traffic crosses the network".
// Empty on one node.
std::vector<std::string> placement_warnings(const ParallelConfig& config, const NodeMap& nodes);

}  // namespace sextant
