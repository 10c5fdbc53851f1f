#include "harness/topology.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "harness/comm_mpi.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Nodes numbered in the order of their first rank.
NodeMap renumber(const std::vector<std::string>& keys) {
  std::map<std::string, int> index;
  NodeMap out;
  for (const std::string& k : keys) {
    auto it = index.emplace(k, static_cast<int>(index.size())).first;
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

NodeMap detect_nodes(Communicator& comm) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm);
  if (!mpi) return renumber(all_gather_strings(comm, host_name()));
  MPI_Comm node_handle;
  check_mpi(MPI_Comm_split_type(mpi->handle(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &node_handle),
            "MPI_Comm_split_type");
  MpiCommunicator node(node_handle, true);
  // A node is named by its first rank in comm.
  const int first = static_cast<int>(node.all_reduce_value(comm.rank(), ReduceOp::min));
  return renumber(all_gather_strings(comm, std::to_string(first)));
}

int node_count(const NodeMap& nodes) { return nodes.empty() ? 0 : *std::max_element(nodes.begin(), nodes.end()) + 1; }

std::vector<int> ranks_per_node(const NodeMap& nodes) {
  std::vector<int> counts(static_cast<size_t>(node_count(nodes)), 0);
  for (int n : nodes) ++counts[static_cast<size_t>(n)];
  return counts;
}

int max_ranks_per_node(const NodeMap& nodes) {
  const std::vector<int> counts = ranks_per_node(nodes);
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

NodeMap first_ranks(const NodeMap& nodes, int ranks) {
  std::vector<std::string> keys;
  for (int r = 0; r < ranks && r < static_cast<int>(nodes.size()); ++r) keys.push_back(std::to_string(nodes[r]));
  return renumber(keys);
}

int nodes_spanned(const NodeMap& nodes, const std::vector<int>& members) {
  std::set<int> seen;
  for (int r : members) seen.insert(nodes.at(static_cast<size_t>(r)));
  return static_cast<int>(seen.size());
}

Placement placement_of(const RankGrid& grid, const NodeMap& nodes) {
  Placement p;
  p.order = grid.config().order;
  auto across = [&](Dim dim) {
    int count = 0;
    for (const std::vector<int>& g : grid.groups(dim)) count += nodes_spanned(nodes, g) > 1;
    return count;
  };
  p.tp_groups_across_nodes = across(Dim::tp);
  p.etp_groups_across_nodes = across(Dim::etp);
  p.ep_groups_across_nodes = across(Dim::ep);
  p.cp_groups_across_nodes = across(Dim::cp);
  p.dp_groups_across_nodes = across(Dim::dp);
  p.pp_groups_across_nodes = across(Dim::pp);
  for (const std::vector<int>& stages : grid.groups(Dim::pp))  // ascending ranks = stage order
    for (size_t s = 1; s < stages.size(); ++s)
      p.pp_far_hops += std::max(0, std::abs(nodes.at(stages[s]) - nodes.at(stages[s - 1])) - 1);
  return p;
}

namespace {

// tp stays fastest; the others in every order, the preferred ones first:
// DP outermost with PP next to it, then Megatron-Core's default.
std::vector<std::string> candidate_orders() {
  std::vector<std::string> out = {"tp-cp-ep-pp-dp", "tp-cp-ep-dp-pp"};
  std::vector<std::string> rest = {"cp", "dp", "ep", "pp"};
  do {
    const std::string order = "tp-" + join(rest, "-");
    if (std::find(out.begin(), out.end(), order) == out.end()) out.push_back(order);
  } while (std::next_permutation(rest.begin(), rest.end()));
  return out;
}

}  // namespace

std::string node_aware_order(const ParallelConfig& config, const NodeMap& nodes) {
  if (node_count(nodes) <= 1) return config.order;
  const int world = static_cast<int>(nodes.size());
  using Score = std::tuple<int, int, int, int, int, size_t>;
  std::optional<Score> best;
  std::string chosen = config.order;
  const std::vector<std::string> orders = candidate_orders();
  for (size_t i = 0; i < orders.size(); ++i) {
    ParallelConfig c = config;
    c.order = orders[i];
    try {
      const Placement p = placement_of(RankGrid(c, world), nodes);
      const std::string& o = orders[i];
      const Score score{p.tp_groups_across_nodes + p.etp_groups_across_nodes,
                        p.ep_groups_across_nodes,
                        p.cp_groups_across_nodes,
                        p.pp_far_hops,
                        o.compare(o.size() - 2, 2, "dp") == 0 ? 0 : 1,
                        i};
      if (!best || score < *best) best = score, chosen = o;
    } catch (const UsageError&) {
      // the expert layout would get other PP groups: not a valid order for this config
    }
  }
  return chosen;
}

std::vector<std::string> placement_warnings(const ParallelConfig& config, const NodeMap& nodes) {
  if (node_count(nodes) <= 1) return {};
  const int world = static_cast<int>(nodes.size());
  const RankGrid grid(config, world);
  const Placement p = placement_of(grid, nodes);
  std::vector<std::string> out;
  const std::string where = cat(to_string(config), " on ", node_count(nodes), " nodes (", max_ranks_per_node(nodes),
                                " ranks per node), order ", config.order);
  auto warn = [&](int across, Dim dim, const char* what) {
    if (across == 0) return;
    std::string line = cat(where, ": ", across, " of ", grid.groups(dim).size(), " ", what,
                           " groups span nodes: their traffic crosses the network");
    const std::string better = node_aware_order(config, nodes);
    ParallelConfig fixed = config;
    fixed.order = better;
    if (better != config.order && placement_of(RankGrid(fixed, world), nodes).tp_groups_across_nodes == 0)
      line += cat(" (order ", better, " keeps them inside a node)");
    else if (dim == Dim::tp && config.tp > max_ranks_per_node(nodes))
      line += cat(" (tp ", config.tp, " exceeds the ", max_ranks_per_node(nodes), " ranks of a node)");
    out.push_back(line);
  };
  warn(p.tp_groups_across_nodes, Dim::tp, "TP");
  if (config.expert_tp() != config.tp) warn(p.etp_groups_across_nodes, Dim::etp, "expert-TP");
  return out;
}

}  // namespace sextant
