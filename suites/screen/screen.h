// The screen suite: name the part of a cluster that is slow or wrong.
//
// Every rank runs identical, deterministic work, so ranks can be judged
// against each other: a rank, link or node is a suspect when its figure is
// worse than its class (same device kind; same-node or other-node links;
// nodes of the same size) by the rule of harness/suspects.h.
//
//   compute: the same gemm on the same inputs on every rank; TFLOP/s per
//            rank and a bitwise hash of every output (silent data corruption:
//            a hash that differs from the majority's).
//   links:   point-to-point bandwidth and latency of every pair of ranks, in
//            a round-robin tournament (n - 1 rounds of n / 2 disjoint pairs).
//   nodes:   all_reduce inside each node, every node at once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/fault_table.h"
#include "harness/suspects.h"

namespace sextant::screen {

// First in listings and in qualify: the screen says where to look before
// the suites measure the whole.
inline constexpr int kSuiteOrder = 5;

// ---- Who a rank is: what a suspect line names.
struct RankIdentity {
  int rank = 0, node = 0;
  std::string host;
  std::optional<int> gpu;           // CUDA device index
  std::optional<std::string> uuid;  // GPU UUID, hex
};
// Collective over ctx.host_comm: every rank's identity, in rank order.
std::vector<RankIdentity> identify_ranks(CaseContext& ctx);

// The metric every screen case records its suspects in (a JSON array).
const MetricDef& suspects_metric();
// A suspect as the results record it (results/schema.json: suspect).
nlohmann::json suspect_json(const std::string& kind, const RankIdentity& who, const std::string& figure);

// ---- The link tournament.
using Pair = std::pair<int, int>;  // (lower rank, higher rank)
// The circle method: n - 1 rounds (n even) or n rounds (n odd, one rank
// sits out each round) of disjoint pairs; every pair meets exactly once.
std::vector<std::vector<Pair>> round_robin(int n);

// The nodes whose every link to the other nodes is among `named` (the
// links a screen named, (lower, higher) rank): the NIC, cable or switch
// port is the one part those links share, so the node is a slow_node
// suspect too. With two nodes every other-node link touches both, and
// neither can be told apart: nobody is named.
std::vector<nlohmann::json> nodes_behind_links(const std::vector<RankIdentity>& who, const std::set<Pair>& named);

// ---- Planted faults of the suite. They take their rank from the case
// options fault_rank (default: the last rank) and fault_peer (slow_link and
// slow_round; default: rank 0, or 1 when fault_rank is 0).
enum class ScreenFault { none, slow_rank, slow_link, slow_round, bitflip };
struct ScreenSite {
  std::string case_name;  // compute, links, nodes
};
const FaultTable<ScreenFault, ScreenSite>& screen_faults();
// The planted rank and peer of a config (params fault_rank, fault_peer).
int fault_rank(const CaseConfig& c);
int fault_peer(const CaseConfig& c);
// Puts fault_rank/fault_peer into the config's params and refuses a rank the
// group does not have.
void plant_fault_params(const SweepRequest& req, CaseConfig& c);
void validate_fault_params(const CaseConfig& c);

// The options of a screen case that judges `figures`: the planted faults'
// and the overrides of those figures' suspect rules.
std::vector<OptionSpec> screen_options(const std::vector<std::string>& figures);
// The configs of a screen case at the request's rank count: one per dtype,
// with `params` and the request's overrides of the suspect rules of
// `figures`. Nothing at one rank: a rank is judged against the others.
std::vector<CaseConfig> screen_configs(const SweepRequest& req, const nlohmann::json& params, DType dtype,
                                       const std::vector<std::string>& figures);

// The message of links and nodes: the option `option` or the profile's
// size (ci 64 KiB, default 1 MiB, qualify 4 MiB on a host and `qualify_gpu`
// on a GPU), whole f32 elements.
int64_t message_bytes(const SweepRequest& req, const std::string& option, int64_t qualify_gpu);
// Memory of a case with a send, a receive and a host copy of params "bytes".
MemoryEstimate message_memory(const CaseConfig& c);

// The exact payload of links and nodes: small integers in [-4, 4], exact in
// f32 sums.
float payload(int rank, int64_t i);
// The samples of a log that the timed iterations made (the log holds the
// same number per iteration, warm-up first).
std::vector<double> without_warmup(const std::vector<double>& log, const TimeStats& t);
// Figures as the results hold them: unmeasured (negative) ones are null.
nlohmann::json nulls_for_unmeasured(const std::vector<double>& figures);

// The bits a class of ranks agrees on: each class's strict-majority hash,
// and the classes without one (two ranks that disagree: neither is the odd
// one out). Classes are device kinds: another GPU model may run another
// kernel and round otherwise, and still be right.
struct Vote {
  std::map<std::string, std::string> majority;  // class: hash
  std::set<std::string> no_majority;
};
Vote vote_by_class(const std::vector<std::string>& hashes, const std::vector<std::string>& classes);

// A stable 64-bit hash of a tensor's bytes (FNV-1a), as 16 hex digits.
std::string content_hash(const Tensor& host);

}  // namespace sextant::screen
