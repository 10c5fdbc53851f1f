// screen/nodes: all_reduce inside each node, every node at once (as
// nccl-tests' NCCL_TESTS_SPLIT runs one test per node). A node whose bus
// bandwidth falls below the other nodes of its size is a suspect: its
// intra-node fabric (NVLink, PCIe, shared memory) is slow.
#include "harness/device.h"
#include "harness/strings.h"
#include "harness/topology.h"
#include "suites/screen/screen.h"

namespace sextant::screen {
namespace {

const MetricDef& kNodeBusbw = define_metric({"screen", "node_busbw_GBps", "json", Better::neither,
                                             "nodes: each node's all_reduce bus bandwidth, 2(k-1)/k x bytes / time"});
const MetricDef& kNodeHosts =
    define_metric({"screen", "node_hosts", "json", Better::neither, "nodes: the host of each node, in node order"});

const char* const kFigure = "node_busbw_GBps";

struct State {
  Communicator* host = nullptr;
  std::unique_ptr<Communicator> node;  // this rank's node, kernel backend
  Device device = Device::host;
  std::vector<RankIdentity> who;
  int64_t bytes = 0;
  int reps = 0;
  Tensor buffer, input;  // input: payload(rank in node, i)
  std::vector<double> seconds;
  SuspectRule rule;  // what names a slow node
};

State setup(CaseContext& ctx) {
  State s;
  s.host = &ctx.host_comm;
  s.device = ctx.device;
  s.who = identify_ranks(ctx);
  const RankIdentity& me = s.who.at(static_cast<size_t>(ctx.host_comm.rank()));
  s.node = ctx.comm.split(me.node, me.rank);
  s.bytes = ctx.config.i("bytes");
  s.reps = static_cast<int>(ctx.config.i("reps"));
  s.rule = configured_rule(kFigure, ctx.device, ctx.config.params);
  const int64_t elements = s.bytes / 4;
  Tensor in = Tensor::empty({elements}, DType::f32);
  for (int64_t i = 0; i < elements; ++i) in.data<float>()[i] = payload(s.node->rank(), i);
  s.input = in.to(ctx.device);
  s.buffer = Tensor::zeros({elements}, DType::f32, ctx.device);
  return s;
}

void all_reduce_once(State& s) {
  s.node->all_reduce(s.input.raw(), s.buffer.raw(), static_cast<size_t>(s.buffer.numel()), DType::f32, ReduceOp::sum);
  if (s.device == Device::cuda) cuda_synchronize();
}

void run(State& s) {
  for (int i = 0; i < s.reps; ++i) {
    const double start = now_seconds();
    all_reduce_once(s);
    s.seconds.push_back(now_seconds() - start);
  }
}

void check(State& s, Checker& checker) {
  all_reduce_once(s);
  const Tensor got = s.buffer.to(Device::host);
  int64_t wrong = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double expected = 0;
    for (int r = 0; r < s.node->size(); ++r) expected += payload(r, i);
    if (got.data<float>()[i] != expected) ++wrong;
  }
  checker.exact(cat("node ", s.who[s.host->rank()].node, " all_reduce"), wrong, got.numel());
}

Metrics metrics(State& s, const RegionTimes& times) {
  const TimeStats& t = times.at("all_reduce");
  // The timed iterations' all_reduces, without the warm-up's.
  const std::vector<double> timed = without_warmup(s.seconds, t);
  const int k = s.node->size();
  const double median = percentile_of(timed, 0.5);
  const double busbw = k > 1 && median > 0 ? 2.0 * (k - 1) / k * static_cast<double>(s.bytes) / median / 1e9 : -1;
  const int n = s.host->size();
  std::vector<double> all(static_cast<size_t>(n));
  s.host->all_gather(&busbw, all.data(), 1, DType::f64);
  // One figure per node: its first rank's (every rank of a node times the same all_reduce).
  std::vector<double> per_node;
  std::vector<std::string> classes, hosts;
  std::vector<int> first_rank;
  for (int r = 0; r < n; ++r)
    if (static_cast<int>(per_node.size()) == s.who[r].node) {
      per_node.push_back(all[r]);
      first_rank.push_back(r);
      hosts.push_back(s.who[r].host);
    }
  const std::vector<int> sizes = ranks_per_node([&] {
    NodeMap m;
    for (const RankIdentity& w : s.who) m.push_back(w.node);
    return m;
  }());
  for (int size : sizes) classes.push_back(cat("nodes of ", size, " ranks"));
  const SuspectRule& r = s.rule;
  nlohmann::json suspects = nlohmann::json::array();
  for (const Outlier& o : outliers(per_node, classes, r)) {
    nlohmann::json j = suspect_json("slow_node", s.who[first_rank[o.index]], r.figure);
    j.erase("rank");
    j["gpu"] = nullptr;
    j["gpu_uuid"] = nullptr;
    j.update(
        {{"value", o.value}, {"class_median", o.class_median}, {"class", o.class_name}, {"rule", describe_rule(r)}});
    suspects.push_back(j);
  }
  Metrics out;
  out.add_json(kNodeBusbw, nulls_for_unmeasured(per_node));
  out.add_json(kNodeHosts, hosts);
  out.add_json(suspects_metric(), suspects);
  return out;
}

CaseDef nodes_case() {
  std::vector<OptionSpec> options = screen_options({kFigure});
  options.push_back(OptionSpec::bytes("node_bytes", 4, int64_t{1} << 34, "nodes: the all_reduce message, e.g. 1M"));
  return make_case(CaseTable<State>{
      .suite = "screen",
      .name = "nodes",
      .summary = "all_reduce inside each node, all nodes at once: bus bandwidth per node",
      .runs_first = true,
      .options = options,
      .faults = screen_faults().docs_where({{"nodes"}}),
      .configs =
          [](const SweepRequest& req) {
            const int64_t bytes = message_bytes(req, "node_bytes", int64_t{256} << 20);
            return screen_configs(req, {{"bytes", bytes}, {"reps", 3}}, DType::f32, {kFigure});
          },
      .validate = validate_fault_params,
      .memory = message_memory,
      .setup = setup,
      .timed = {{"all_reduce", run}},
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, nodes_case);

}  // namespace
}  // namespace sextant::screen
