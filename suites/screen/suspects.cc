// The screen suite's shared pieces: who a rank is, the suspect rule, the
// round-robin tournament and the planted faults.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "harness/topology.h"
#include "suites/screen/screen.h"

namespace sextant::screen {

namespace {
std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}
}  // namespace

std::vector<RankIdentity> identify_ranks(CaseContext& ctx) {
  const NodeMap nodes = detect_nodes(ctx.host_comm);
  std::string mine = host_name();
  if (ctx.device == Device::cuda) mine += cat("\n", cuda_current_device(), "\n", hex(cuda_device_uuid()));
  std::vector<RankIdentity> out;
  const std::vector<std::string> all = all_gather_strings(ctx.host_comm, mine);
  for (size_t r = 0; r < all.size(); ++r) {
    RankIdentity id;
    id.rank = static_cast<int>(r);
    id.node = nodes.at(r);
    const std::vector<std::string> fields = split(all[r], '\n');
    id.host = fields.at(0);
    if (fields.size() == 3) {
      id.gpu = std::stoi(fields[1]);
      id.uuid = fields[2];
    }
    out.push_back(id);
  }
  return out;
}

const MetricDef& suspects_metric() {
  static const MetricDef& def =
      define_metric({"screen", "suspects", "json", Better::neither,
                     "the ranks, links or nodes this case names, each with its figure, class median and rule"});
  return def;
}

nlohmann::json suspect_json(const std::string& kind, const RankIdentity& who, const std::string& figure) {
  nlohmann::json j = {{"kind", kind},
                      {"rank", who.rank},
                      {"node", who.node},
                      {"host", who.host},
                      {"gpu", who.gpu ? nlohmann::json(*who.gpu) : nlohmann::json(nullptr)},
                      {"gpu_uuid", who.uuid ? nlohmann::json(*who.uuid) : nlohmann::json(nullptr)},
                      {"figure", figure}};
  return j;
}

std::vector<std::vector<Pair>> round_robin(int n) {
  require(n >= 1, "round_robin: at least one rank");
  // Circle method: seat m = n rounded up to even; seat 0 stays, the others
  // rotate one place each round; seat m - 1 is the bye when n is odd.
  const int m = n + (n % 2);
  std::vector<int> seats(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) seats[i] = i;
  std::vector<std::vector<Pair>> rounds;
  for (int round = 0; round < m - 1; ++round) {
    std::vector<Pair> pairs;
    for (int i = 0; i < m / 2; ++i) {
      const int a = seats[i], b = seats[m - 1 - i];
      if (a < n && b < n) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(pairs.begin(), pairs.end());
    rounds.push_back(pairs);
    std::rotate(seats.begin() + 1, seats.end() - 1, seats.end());
  }
  return rounds;
}

std::vector<nlohmann::json> nodes_behind_links(const std::vector<RankIdentity>& who, const std::set<Pair>& named) {
  std::map<int, std::pair<int, int>> links_of;  // node: (its other-node links, named ones)
  std::set<int> nodes;
  for (const RankIdentity& w : who) nodes.insert(w.node);
  if (nodes.size() < 3) return {};
  for (size_t a = 0; a < who.size(); ++a)
    for (size_t b = a + 1; b < who.size(); ++b) {
      if (who[a].node == who[b].node) continue;
      const bool bad = named.count({static_cast<int>(a), static_cast<int>(b)}) > 0;
      for (int node : {who[a].node, who[b].node}) {
        ++links_of[node].first;
        links_of[node].second += bad ? 1 : 0;
      }
    }
  std::vector<nlohmann::json> out;
  for (const auto& [node, counts] : links_of) {
    if (counts.second < counts.first) continue;
    const RankIdentity& first =
        *std::find_if(who.begin(), who.end(), [&](const RankIdentity& w) { return w.node == node; });
    nlohmann::json j = suspect_json("slow_node", first, "other_node_links_named");
    j.erase("rank");
    j["gpu"] = nullptr;
    j["gpu_uuid"] = nullptr;
    j.update({{"value", counts.second},
              {"class_median", nullptr},
              {"class", "other_node"},
              {"rule", cat("every one of the node's ", counts.first, " links to other nodes is a suspect")}});
    out.push_back(j);
  }
  return out;
}

const FaultTable<ScreenFault, ScreenSite>& screen_faults() {
  static const FaultTable<ScreenFault, ScreenSite> table(
      "screen",
      {
          {ScreenFault::slow_rank, "slow_rank",
           "rank fault_rank (--set fault_rank=R, default the last) runs each kernel 1 + magnitude times per repeat",
           "screen/compute at 3 ranks or more: names that rank slow",
           [](const ScreenSite& s) { return s.case_name == "compute"; }, 4.0},
          {ScreenFault::slow_link, "slow_link",
           "messages between fault_rank and fault_peer (--set fault_peer=P) wait magnitude ms before they leave",
           "screen/links at 3 ranks or more: names that link slow",
           [](const ScreenSite& s) { return s.case_name == "links"; }, 5.0},
          {ScreenFault::slow_round, "slow_round",
           "as slow_link, but only in the tournament's rounds: not when the pair is measured again alone (a link "
           "slowed by what else ran in its round, not by itself)",
           "screen/links at 3 ranks or more: names nobody, since the link is healthy alone",
           [](const ScreenSite& s) { return s.case_name == "links"; }, 5.0},
          {ScreenFault::bitflip, "bitflip",
           "one mantissa bit (bit 20 of f32, bit 4 of bf16 or f16) of the gemm output's element a third of the way "
           "in flips on fault_rank after every gemm",
           "screen/compute at 2 ranks or more (3 for a majority): names that rank, the tensor and the element",
           [](const ScreenSite& s) { return s.case_name == "compute"; }},
      });
  return table;
}

std::vector<OptionSpec> screen_options(const std::vector<std::string>& figures) {
  std::vector<OptionSpec> out = {
      OptionSpec::integer("fault_rank", 0, 1 << 20, "the rank a planted screen fault acts on (default: the last)"),
      OptionSpec::integer("fault_peer", 0, 1 << 20,
                          "slow_link, slow_round: the other end (default: 0, or 1 when fault_rank is 0)")};
  for (OptionSpec& o : suspect_rule_options(figures)) out.push_back(std::move(o));
  return out;
}

int fault_rank(const CaseConfig& c) { return static_cast<int>(c.i("fault_rank")); }
int fault_peer(const CaseConfig& c) { return static_cast<int>(c.i("fault_peer")); }

void plant_fault_params(const SweepRequest& req, CaseConfig& c) {
  if (req.fault.empty()) return;
  const int64_t rank = req.get<int64_t>("fault_rank", req.ranks - 1);
  c.params["fault_rank"] = rank;
  c.params["fault_peer"] = req.get<int64_t>("fault_peer", rank == 0 ? 1 : 0);
}

void validate_fault_params(const CaseConfig& c) {
  if (c.fault.empty()) return;
  require(fault_rank(c) < c.ranks,
          cat("fault_rank ", fault_rank(c), " must name a rank of the group (below ", c.ranks, ")"));
  require(fault_peer(c) < c.ranks,
          cat("fault_peer ", fault_peer(c), " must name a rank of the group (below ", c.ranks, ")"));
  require(fault_peer(c) != fault_rank(c), cat("fault_peer ", fault_peer(c), " must differ from fault_rank"));
}

std::vector<CaseConfig> screen_configs(const SweepRequest& req, const nlohmann::json& params, DType dtype,
                                       const std::vector<std::string>& figures) {
  if (req.ranks < 2) return {};
  std::vector<CaseConfig> out;
  for (DType d : req.dtypes_or({dtype})) {
    CaseConfig c;
    c.params = params;
    for (const OptionSpec& o : suspect_rule_options(figures))
      if (req.has(o.name)) c.params[o.name] = req.get<double>(o.name, 0);
    c.parallel = ParallelConfig{1, 1, 1, req.ranks};
    c.ranks = req.ranks;
    c.dtype = d;
    plant_fault_params(req, c);
    out.push_back(c);
  }
  return out;
}

int64_t message_bytes(const SweepRequest& req, const std::string& option, int64_t qualify_gpu) {
  const int64_t fallback = req.profile == Profile::ci        ? 64 << 10
                           : req.profile == Profile::qualify ? (req.device == Device::cuda ? qualify_gpu : 4 << 20)
                                                             : 1 << 20;
  const int64_t bytes = req.get<int64_t>(option, fallback) / 4 * 4;
  require(bytes >= 4, cat(option, " ", bytes, " must be at least one f32 element (4 B)"));
  return bytes;
}

MemoryEstimate message_memory(const CaseConfig& c) {
  const double bytes = 3.0 * static_cast<double>(c.i("bytes"));
  return {bytes, c.device == Device::host ? 0 : 2 * bytes / 3};
}

float payload(int rank, int64_t i) { return static_cast<float>((rank * 131 + i * 7) % 9) - 4.0f; }

std::vector<double> without_warmup(const std::vector<double>& log, const TimeStats& t) {
  const size_t per_iteration = log.size() / static_cast<size_t>(std::max(1, t.warmup + t.iters));
  const size_t skip = std::min(log.size(), static_cast<size_t>(t.warmup) * per_iteration);
  return {log.begin() + static_cast<std::ptrdiff_t>(skip), log.end()};
}

nlohmann::json nulls_for_unmeasured(const std::vector<double>& figures) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : figures) out.push_back(v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v));
  return out;
}

Vote vote_by_class(const std::vector<std::string>& hashes, const std::vector<std::string>& classes) {
  require(hashes.size() == classes.size(), "vote_by_class: one class per hash");
  std::map<std::string, std::map<std::string, int>> votes;  // class: hash: ranks
  std::map<std::string, int> members;
  for (size_t q = 0; q < hashes.size(); ++q) {
    ++votes[classes[q]][hashes[q]];
    ++members[classes[q]];
  }
  Vote out;
  for (const auto& [cls, counts] : votes) {
    auto best = std::max_element(counts.begin(), counts.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (2 * best->second > members[cls]) out.majority[cls] = best->first;
    else out.no_majority.insert(cls);
  }
  return out;
}

std::string content_hash(const Tensor& host) {
  const auto* bytes = static_cast<const unsigned char*>(host.raw());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < host.nbytes(); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace sextant::screen
