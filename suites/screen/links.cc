// screen/links: point-to-point bandwidth and latency of every pair of ranks.
//
// A round-robin tournament: n - 1 rounds (n rounds for odd n), each of n / 2
// disjoint pairs that measure at once, so every pair meets exactly once and
// the whole screen costs n - 1 pair measurements, not n (n - 1) / 2. In each
// pair: a ping-pong of one small message (latency: half the round trip), then
// one large message each way with a one-element acknowledgement (bandwidth:
// the message over the time until the acknowledgement is back). Links are
// judged against their class: same node or other node. A link the rules name
// is measured again with its pair alone, and named only if it breaks a rule
// again: a round's slowdown is not the link's.
#include <chrono>
#include <set>
#include <thread>

#include "harness/device.h"
#include "harness/strings.h"
#include "suites/screen/screen.h"

namespace sextant::screen {
namespace {

const MetricDef& kMatrix = define_metric(
    {"screen", "link_matrix", "json", Better::neither,
     "links: bandwidth_GBps and latency_us [sender][receiver] (null on the diagonal), class, hosts, rounds"});

// What names a slow link: its bandwidth, else its latency.
const std::vector<std::string> kFigures = {"p2p_bandwidth_GBps", "p2p_latency_us"};

struct State {
  Communicator* comm = nullptr;  // the kernel backend: what the links carry
  Communicator* host = nullptr;
  Device device = Device::host;
  std::vector<RankIdentity> who;
  std::vector<std::vector<Pair>> rounds;
  int64_t bytes = 0;
  int latency_reps = 0, bandwidth_reps = 0;
  Tensor send, recv, ping, pong;        // send holds payload(rank, i); ping/pong: 2 elements
  bool delayed_pair = false;            // slow_link or slow_round planted on one of this rank's links
  bool delayed_in_rounds_only = false;  // slow_round: not while a pair is re-tested alone
  bool retesting = false;
  int delayed_peer = -1;
  double delay_ms = 0;
  std::vector<std::vector<double>> latency, bandwidth;  // [peer] samples: us, GB/s
  std::vector<SuspectRule> rules;                       // of kFigures, in order
};

double elapsed_since(double start, Device device) {
  if (device == Device::cuda) cuda_synchronize();
  return now_seconds() - start;
}

void send_to(State& s, const Tensor& t, int peer) {
  if (s.delayed_pair && peer == s.delayed_peer && !(s.delayed_in_rounds_only && s.retesting))
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(s.delay_ms));
  s.comm->group_start();
  RequestPtr r = s.comm->isend(t.raw(), static_cast<size_t>(t.numel()), t.dtype(), peer, 0);
  s.comm->group_end();
  r->wait();
}
void receive_from(State& s, Tensor& t, int peer) {
  s.comm->group_start();
  RequestPtr r = s.comm->irecv(t.raw(), static_cast<size_t>(t.numel()), t.dtype(), peer, 0);
  s.comm->group_end();
  r->wait();
}

// One pair's measurement; the lower rank leads. Returns the wrong payload
// elements this rank received (checked only when `verify`).
int64_t measure_pair(State& s, int peer, bool verify) {
  const int me = s.comm->rank();
  const bool lead = me < peer;
  // Every round trip is a sample: on shared cores one descheduled rank
  // delays a single trip, which the median then ignores.
  for (int i = 0; i < s.latency_reps; ++i) {
    const double start = now_seconds();
    if (lead) {
      send_to(s, s.ping, peer);
      receive_from(s, s.pong, peer);
    } else {
      receive_from(s, s.pong, peer);
      send_to(s, s.ping, peer);
    }
    s.latency[peer].push_back(elapsed_since(start, s.device) / 2 * 1e6);
  }
  int64_t wrong = 0;
  // Both directions: the lead sends first.
  for (bool my_turn : {lead, !lead})
    for (int i = 0; i < s.bandwidth_reps; ++i) {
      if (my_turn) {
        const double t0 = now_seconds();
        send_to(s, s.send, peer);
        receive_from(s, s.pong, peer);
        s.bandwidth[peer].push_back(static_cast<double>(s.bytes) / elapsed_since(t0, s.device) / 1e9);
      } else {
        receive_from(s, s.recv, peer);
        send_to(s, s.ping, peer);
        if (verify && i == 0) {
          const Tensor got = s.recv.to(Device::host);
          for (int64_t e = 0; e < got.numel(); ++e)
            if (got.data<float>()[e] != payload(peer, e)) ++wrong;
        }
      }
    }
  return wrong;
}

// The whole tournament; the rounds are separated by barriers so that only
// one round's pairs share the network at a time.
std::vector<std::pair<int, int64_t>> tournament(State& s, bool verify) {
  const int me = s.comm->rank();
  std::vector<std::pair<int, int64_t>> wrong;  // (peer, wrong elements received)
  for (const std::vector<Pair>& round : s.rounds) {
    for (const auto& [a, b] : round)
      if (a == me || b == me) {
        const int peer = a == me ? b : a;
        wrong.emplace_back(peer, measure_pair(s, peer, verify));
      }
    s.host->barrier();
  }
  return wrong;
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  State s;
  s.comm = &ctx.comm;
  s.host = &ctx.host_comm;
  s.device = ctx.device;
  s.who = identify_ranks(ctx);
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  s.rounds = round_robin(n);
  s.bytes = c.i("bytes");
  s.latency_reps = static_cast<int>(c.i("latency_reps"));
  s.bandwidth_reps = static_cast<int>(c.i("bandwidth_reps"));
  const int64_t elements = s.bytes / 4;
  Tensor mine = Tensor::empty({elements}, DType::f32);
  for (int64_t i = 0; i < elements; ++i) mine.data<float>()[i] = payload(me, i);
  s.send = mine.to(ctx.device);
  s.recv = Tensor::zeros({elements}, DType::f32, ctx.device);
  s.ping = Tensor::zeros({2}, DType::f32, ctx.device);
  s.pong = Tensor::zeros({2}, DType::f32, ctx.device);
  const ScreenFault fault = screen_faults().parse(c.fault);
  if (fault == ScreenFault::slow_link || fault == ScreenFault::slow_round) {
    const int a = fault_rank(c), b = fault_peer(c);
    s.delayed_pair = me == a || me == b;
    s.delayed_in_rounds_only = fault == ScreenFault::slow_round;
    s.delayed_peer = me == a ? b : a;
    s.delay_ms = c.fault_magnitude > 0 ? c.fault_magnitude : screen_faults().row(fault).magnitude;
  }
  for (const std::string& figure : kFigures) s.rules.push_back(configured_rule(figure, ctx.device, c.params));
  s.latency.assign(static_cast<size_t>(n), {});
  s.bandwidth.assign(static_cast<size_t>(n), {});
  return s;
}

void check(State& s, Checker& checker) {
  for (const auto& [peer, wrong] : tournament(s, true)) {
    checker.exact(cat("payload ", peer, " -> ", s.comm->rank()), wrong, s.bytes / 4);
    if (wrong > 0)
      checker.fail(cat("link ", peer, " (", s.who[peer].host, ") -> ", s.comm->rank(), " (", s.who[s.comm->rank()].host,
                       "): ", wrong, " of ", s.bytes / 4, " elements arrived wrong"));
  }
  for (auto& v : s.latency) v.clear();  // the check's samples are not the timed ones
  for (auto& v : s.bandwidth) v.clear();
}

using Matrix = std::vector<std::vector<double>>;

// [sender][receiver] of every rank's row; negative where unmeasured.
Matrix gather_matrix(State& s, const std::vector<std::vector<double>>& samples) {
  const size_t n = samples.size();
  std::vector<double> row(n, -1.0), all(n * n);
  for (size_t p = 0; p < n; ++p)
    if (!samples[p].empty()) row[p] = percentile_of(samples[p], 0.5);
  s.host->all_gather(row.data(), all.data(), n, DType::f64);
  Matrix m(n);
  for (size_t r = 0; r < n; ++r) m[r].assign(all.begin() + r * n, all.begin() + (r + 1) * n);
  return m;
}

nlohmann::json matrix_json(const Matrix& m) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : m) out.push_back(nulls_for_unmeasured(row));
  return out;
}

std::string link_class(const State& s, size_t a, size_t b) {
  return s.who[a].node == s.who[b].node ? "same_node" : "other_node";
}

// Every directed link's figures, in one order: edges[i] is (sender,
// receiver), judged within classes[i].
struct LinkFigures {
  std::vector<Pair> edges;
  std::vector<std::string> classes;
  std::vector<double> bandwidth, latency;  // GB/s, us; negative: unmeasured
};

LinkFigures link_figures(const State& s, const Matrix& bandwidth, const Matrix& latency) {
  LinkFigures f;
  const size_t n = bandwidth.size();
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      f.edges.emplace_back(static_cast<int>(a), static_cast<int>(b));
      f.classes.push_back(link_class(s, a, b));
      f.bandwidth.push_back(bandwidth[a][b]);
      f.latency.push_back(latency[a][b]);
    }
  return f;
}

struct Finding {
  const SuspectRule* rule = nullptr;
  Outlier outlier;
  Pair direction;  // (sender, receiver) of the figure that broke the rule
};

// The links some rule names, each once, by the first of its figures that
// breaks a rule.
std::map<Pair, Finding> judge(const State& s, const LinkFigures& f) {
  std::map<Pair, Finding> named;
  for (const SuspectRule& r : s.rules) {
    const bool is_bandwidth = r.figure == kFigures[0];
    for (const Outlier& o : outliers(is_bandwidth ? f.bandwidth : f.latency, f.classes, r)) {
      const auto [from, to] = f.edges[o.index];
      const Pair link{std::min(from, to), std::max(from, to)};
      if (!named.count(link)) named[link] = {&r, o, {from, to}};
    }
  }
  return named;
}

// Each link in `links` measured again, its pair alone while every other rank
// waits at the barrier, kRetestRepeats times. A link slow in its round but not
// alone was slowed by the round (a rank descheduled on shared cores, a busy
// switch), not by itself; alone it is also at least as fast as beside other
// pairs, so one that still breaks the rule is slow.
constexpr int kRetestRepeats = 3;
struct LinkMatrices {
  Matrix bandwidth, latency;  // [sender][receiver]; negative: unmeasured
};
LinkMatrices retest(State& s, const std::vector<Pair>& links) {
  for (auto* samples : {&s.latency, &s.bandwidth})
    for (std::vector<double>& v : *samples) v.clear();
  const int me = s.comm->rank();
  s.retesting = true;
  for (const auto& [a, b] : links) {
    if (a == me || b == me)
      for (int i = 0; i < kRetestRepeats; ++i) measure_pair(s, a == me ? b : a, false);
    s.host->barrier();
  }
  s.retesting = false;
  return {gather_matrix(s, s.bandwidth), gather_matrix(s, s.latency)};
}

// More suspects than ranks is a broken fabric, not a few bad links: only the
// first n are re-tested, so the re-test costs at most kRetestRepeats x n pair
// measurements; the rest are named from the tournament alone.
std::vector<Pair> links_to_retest(const std::map<Pair, Finding>& candidates, size_t n) {
  std::vector<Pair> out;
  for (auto it = candidates.begin(); it != candidates.end() && out.size() < n; ++it) out.push_back(it->first);
  return out;
}

nlohmann::json link_suspect(const State& s, const Pair& link, const Finding& f, double tournament_value,
                            bool retested) {
  nlohmann::json j = suspect_json("slow_link", s.who[link.first], f.rule->figure);
  // A link has two ends: their nodes, and no single GPU.
  j.erase("rank");
  j.erase("node");
  j["gpu"] = nullptr;
  j["gpu_uuid"] = nullptr;
  j["ranks"] = {link.first, link.second};
  j["nodes"] = {s.who[link.first].node, s.who[link.second].node};
  j["host"] = cat(s.who[link.first].host, "<->", s.who[link.second].host);
  j.update({{"value", f.outlier.value},
            {"class_median", f.outlier.class_median},
            {"class", f.outlier.class_name},
            {"direction", cat(f.direction.first, " -> ", f.direction.second)},
            {"retested", retested},
            {"tournament_value", tournament_value},
            {"rule", describe_rule(*f.rule)}});
  return j;
}

Metrics metrics(State& s, const RegionTimes& times) {
  // Each peer's samples of the timed tournaments only.
  for (auto* samples : {&s.latency, &s.bandwidth})
    for (std::vector<double>& v : *samples) v = without_warmup(v, times.at("tournament"));
  const auto bandwidth = gather_matrix(s, s.bandwidth), latency = gather_matrix(s, s.latency);
  const size_t n = bandwidth.size();
  const LinkFigures tournament_figures = link_figures(s, bandwidth, latency);
  const std::map<Pair, Finding> candidates = judge(s, tournament_figures);

  // The candidates' figures replaced by their re-test's, then judged again
  // against the same classes.
  const std::vector<Pair> retested = links_to_retest(candidates, n);
  const LinkMatrices again_alone = retest(s, retested);
  LinkFigures confirm = tournament_figures;
  const std::set<Pair> retested_set(retested.begin(), retested.end());
  for (size_t i = 0; i < confirm.edges.size(); ++i) {
    const auto [from, to] = confirm.edges[i];
    if (!retested_set.count({std::min(from, to), std::max(from, to)})) continue;
    confirm.bandwidth[i] = again_alone.bandwidth[from][to];
    confirm.latency[i] = again_alone.latency[from][to];
  }
  const std::map<Pair, Finding> confirmed = judge(s, confirm);

  nlohmann::json suspects = nlohmann::json::array();
  std::set<Pair> named_links;
  for (const auto& [link, finding] : candidates) {
    const bool was_retested = retested_set.count(link) > 0;
    const auto again = confirmed.find(link);
    if (was_retested && again == confirmed.end()) continue;
    const Finding& f = was_retested ? again->second : finding;
    const std::vector<double>& values =
        f.rule->figure == kFigures[0] ? tournament_figures.bandwidth : tournament_figures.latency;
    suspects.push_back(link_suspect(s, link, f, values[f.outlier.index], was_retested));
    named_links.insert(link);
  }
  for (nlohmann::json& j : nodes_behind_links(s.who, named_links)) suspects.push_back(j);

  nlohmann::json class_matrix = nlohmann::json::array(), hosts = nlohmann::json::array();
  for (size_t a = 0; a < n; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (size_t b = 0; b < n; ++b)
      row.push_back(a == b ? nlohmann::json(nullptr) : nlohmann::json(link_class(s, a, b)));
    class_matrix.push_back(row);
  }
  for (const RankIdentity& w : s.who) hosts.push_back(w.host);
  nlohmann::json retested_json = nlohmann::json::array();
  for (const auto& [a, b] : retested) retested_json.push_back({a, b});
  Metrics out;
  out.add_json(kMatrix, {{"ranks", n},
                         {"bytes", s.bytes},
                         {"bandwidth_GBps", matrix_json(bandwidth)},
                         {"latency_us", matrix_json(latency)},
                         {"class", class_matrix},
                         {"hosts", hosts},
                         {"rounds", s.rounds.size()},
                         {"retested", retested_json},
                         {"retest_bandwidth_GBps", matrix_json(again_alone.bandwidth)},
                         {"retest_latency_us", matrix_json(again_alone.latency)}});
  out.add_json(suspects_metric(), suspects);
  return out;
}

CaseDef links_case() {
  std::vector<OptionSpec> options = screen_options(kFigures);
  options.push_back(OptionSpec::bytes("link_bytes", 4, int64_t{1} << 32, "links: the bandwidth message, e.g. 1M"));
  return make_case(CaseTable<State>{
      .suite = "screen",
      .name = "links",
      .summary = "every pair of ranks in a round-robin tournament: point-to-point bandwidth and latency",
      .runs_first = true,
      .options = options,
      .faults = screen_faults().docs_where({{"links"}}),
      .configs =
          [](const SweepRequest& req) {
            const int64_t bytes = message_bytes(req, "link_bytes", int64_t{64} << 20);
            return screen_configs(req, {{"bytes", bytes}, {"latency_reps", 10}, {"bandwidth_reps", 3}}, DType::f32,
                                  kFigures);
          },
      .validate = validate_fault_params,
      .memory = message_memory,
      .setup = setup,
      .timed = {{"tournament", [](State& s) { tournament(s, false); }}},
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, links_case);

}  // namespace
}  // namespace sextant::screen
