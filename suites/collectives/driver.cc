// The shared collective driver: sweep, setup, run, check and bandwidth.
#include <cmath>

#include "harness/comm_wrappers.h"
#include "harness/error.h"
#include "harness/strings.h"
#include "harness/topology.h"
#include "suites/collectives/collectives.h"

namespace sextant::collectives {

double pattern(int rank, int64_t index) { return static_cast<double>((rank * 131 + index * 7) % 9) - 4.0; }
double plain_input(const CollectiveState&, int rank, int64_t i) { return pattern(rank, i); }
double factor_all_reduce(int n) { return 2.0 * (n - 1) / n; }
double factor_n_minus_1(int n) { return static_cast<double>(n - 1) / n; }
// Nothing crosses ranks in a group of one: report no bus bandwidth there.
double factor_one(int n) { return n > 1 ? 1.0 : 0.0; }

std::optional<Dim> group_dim(const std::string& group) {
  if (group == std::string_view(kWorldGroup)) return std::nullopt;
  return parse_dim(group);
}

namespace {
int group_size_of(const SweepRequest& req) {
  const std::string group = req.get<std::string>("group", kWorldGroup);
  if (!group_dim(group)) return req.ranks;
  require(req.parallel.has_value(), cat("--group ", group, " needs a pinned parallel config, e.g. --tp 2 --cp 2"));
  RankGrid grid(*req.parallel, req.ranks);
  return static_cast<int>(grid.group(parse_dim(group), 0).size());
}
}  // namespace

std::vector<OptionSpec> collective_options() {
  constexpr int64_t kMaxMessage = int64_t{1} << 40;
  return {OptionSpec::bytes("min_bytes", 1, kMaxMessage, "smallest message per rank, e.g. 1K"),
          OptionSpec::bytes("max_bytes", 1, kMaxMessage, "largest message per rank, e.g. 64M"),
          OptionSpec::integer("step_factor", 2, 1024, "size multiplier between steps"),
          OptionSpec::choice("group", {"world", "tp", "cp", "dp", "pp", "ep", "etp", "edp", "dp_cp", "tp_cp"},
                             "run on every group of this dimension at once (needs a pinned config)")};
}

MemoryEstimate collective_memory(const CaseConfig& c) {
  // The receive side of a gather holds the group's messages; send + receive + the check's host copy.
  const double bytes = static_cast<double>(c.i("bytes")), n = static_cast<double>(c.i("group_size"));
  const double buffers = bytes * (n + 2);
  return {c.device == Device::host ? buffers : 2 * bytes, c.device == Device::host ? 0 : buffers};
}

std::vector<CaseConfig> sweep_sizes(const SweepRequest& req, const CollectiveOp& op) {
  const bool ci = req.profile == Profile::ci, qualify = req.profile == Profile::qualify;
  const int64_t min_bytes = req.get<int64_t>("min_bytes", 1024);
  const int64_t max_bytes = req.get<int64_t>("max_bytes", ci ? 64 * 1024 : qualify ? (int64_t{1} << 30) : 4 << 20);
  const int64_t factor = req.get<int64_t>("step_factor", ci ? 8 : qualify ? 2 : 4);
  require(min_bytes > 0, cat("--min-bytes ", min_bytes, " must be positive"));
  require(max_bytes >= min_bytes, cat("--max-bytes ", max_bytes, " must be at least --min-bytes ", min_bytes));
  require(factor >= 2, cat("--step-factor ", factor, " must be at least 2"));
  const std::string group = req.get<std::string>("group", "world");
  const int n = group_size_of(req);
  ParallelConfig parallel = req.parallel.value_or(ParallelConfig{1, 1, 1, req.ranks});
  std::vector<CaseConfig> out;
  for (DType dtype : req.dtypes_or({DType::f32, DType::bf16})) {
    const int64_t unit = static_cast<int64_t>(dtype_size(dtype)) * (op.splits_over_ranks ? n : 1);
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
      // User-given sizes must split exactly; default ones are rounded down.
      int64_t used = req.options.contains("min_bytes") ? bytes : std::max(unit, bytes / unit * unit);
      for (bool in_place : op.has_in_place ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        CaseConfig c;
        c.params = {{"bytes", used}, {"in_place", in_place}, {"group", group}, {"group_size", n}};
        c.parallel = parallel;
        c.ranks = req.ranks;
        c.dtype = dtype;
        out.push_back(c);
      }
    }
  }
  return out;
}

void validate_sizes(const CaseConfig& c, const CollectiveOp& op) {
  const int64_t n = c.i("group_size");
  const int64_t unit = static_cast<int64_t>(dtype_size(c.dtype)) * (op.splits_over_ranks ? n : 1);
  require(c.i("bytes") % unit == 0,
          cat("message size ", c.i("bytes"), " B must be a multiple of the element size ", dtype_size(c.dtype),
              op.splits_over_ranks ? cat(" times the group size ", n, " = ", unit) : std::string(), " for ", op.name));
}

Communicator& group_for(CaseContext& ctx, std::unique_ptr<Communicator>& faulty) {
  const std::string group = ctx.config.s("group");
  const std::optional<Dim> dim = group_dim(group);
  Communicator& base = dim ? ctx.grid.get(*dim) : ctx.comm;
  const CommFault fault = comm_faults().parse(ctx.config.fault);
  if (fault == CommFault::none) return base;
  faulty = std::make_unique<FaultyCommunicator>(base, fault);
  return *faulty;
}

std::vector<FaultDoc> faults_of(const std::vector<CommOp>& ops) { return comm_faults().docs_where({{ops, 2}}); }

BandwidthMetrics collective_bandwidth() {
  static const BandwidthMetrics defs{
      define_metric({"collectives", "algbw_GBps", "GB/s", Better::higher,
                     "algorithm bandwidth: the operation's bytes (nccl-tests' count convention) / median time"}),
      define_metric({"collectives", "busbw_GBps", "GB/s", Better::higher,
                     "bus bandwidth: algbw x busbw_factor, comparable across group sizes (nccl-tests)"}),
      define_metric({"collectives", "busbw_factor", "1", Better::neither,
                     "busbw / algbw: 2(n-1)/n all_reduce, (n-1)/n gather/scatter/all_to_all, 1 send/recv, broadcast"})};
  return defs;
}

BandwidthMetrics all_reduce_bandwidth() {
  static const BandwidthMetrics defs{
      define_metric({"collectives", "algbw_all_reduce_GBps", "GB/s", Better::higher,
                     "sp_identity: algbw of the all_reduce region, beside the reduce-scatter + all-gather pair"}),
      define_metric({"collectives", "busbw_all_reduce_GBps", "GB/s", Better::higher,
                     "sp_identity: busbw of the all_reduce region"}),
      define_metric({"collectives", "busbw_factor_all_reduce", "1", Better::neither,
                     "sp_identity: the all_reduce region's busbw factor, 2(n-1)/n"})};
  return defs;
}

namespace {
const MetricDef& kGroupNodes =
    define_metric({"collectives", "group_nodes", "1", Better::neither,
                   "nodes the group spans (MPI_COMM_TYPE_SHARED): 1 is an intra-node group, more an inter-node one"});
const MetricDef& kGroupSpansNodes =
    define_metric({"collectives", "group_spans_nodes", "1", Better::neither,
                   "1 when the group spans nodes (inter-node), 0 when it lies inside one node (intra-node)"});
}  // namespace

int group_nodes(CaseContext& ctx) {
  const NodeMap nodes = detect_nodes(ctx.host_comm);  // over the instance's ranks
  const std::optional<Dim> dim = group_dim(ctx.config.s("group"));
  if (!dim) return node_count(nodes);
  return nodes_spanned(nodes, ctx.grid.grid.group(*dim, ctx.grid.rank));
}

void add_group_kind(Metrics& m, int nodes) {
  m.add(kGroupNodes, nodes);
  m.add(kGroupSpansNodes, nodes > 1 ? 1 : 0);
}

namespace {
// Defined at start-up so that `sextant list --metrics` lists them.
const BandwidthMetrics kDefined[] = {collective_bandwidth(), all_reduce_bandwidth()};
}  // namespace

Metrics bandwidth(double bytes, double factor, const TimeStats& t, const BandwidthMetrics& defs) {
  Metrics m;
  double algbw = t.median > 0 ? bytes / t.median / 1e9 : 0;
  m.add(defs.algbw, algbw);
  m.add(defs.busbw, algbw * factor);
  m.add(defs.factor, factor);
  return m;
}

int64_t count_wrong(const Tensor& got, const std::function<double(int64_t)>& expected) {
  Tensor host = got.is_host() ? got : got.to(Device::host);
  int64_t wrong = 0;
  for (int64_t i = 0; i < host.numel(); ++i)
    if (host.at(i) != expected(i)) ++wrong;
  return wrong;
}

namespace {

CollectiveState setup(const CollectiveOp& op, CaseContext& ctx) {
  CollectiveState s;
  s.comm = &group_for(ctx, s.faulty);
  s.n = s.comm->size();
  s.rank = s.comm->rank();
  s.dtype = ctx.config.dtype;
  s.device = ctx.device;
  s.in_place = ctx.config.b("in_place");
  s.elements = ctx.config.i("bytes") / static_cast<int64_t>(dtype_size(s.dtype));
  s.send = Tensor::zeros({op.send_elements(s)}, s.dtype, s.device);
  s.send_ptr = s.send.raw();
  if (!s.in_place && op.recv_elements(s) > 0) {
    s.recv = Tensor::zeros({op.recv_elements(s)}, s.dtype, s.device);
    s.recv_ptr = s.recv.raw();
  }
  s.output_elements = s.recv.defined() ? s.recv.numel() : s.send.numel();
  if (op.prepare) op.prepare(s);  // in-place pointers, all_to_all_v counts
  s.group_nodes = group_nodes(ctx);
  return s;
}

// Fills the inputs, runs once, and counts wrong output elements on this rank.
void check(const CollectiveOp& op, CollectiveState& s, Checker& checker) {
  Tensor host = Tensor::empty(s.send.shape(), s.dtype);
  for (int64_t i = 0; i < host.numel(); ++i) host.set(i, op.input(s, s.rank, i));
  s.send.copy_from(host);
  if (s.recv.defined()) s.recv.zero();
  op.run(s);
  const Tensor& buffer = s.recv.defined() ? s.recv : s.send;
  Tensor out = narrow(buffer.to(Device::host), 0, s.output_offset, s.output_elements);
  checker.exact(op.name, count_wrong(out, [&](int64_t i) { return op.expected(s, i); }), out.numel());
}

}  // namespace

CaseDef make_collective_case(const CollectiveOp& op) {
  return make_case(CaseTable<CollectiveState>{
      .suite = "collectives",
      .name = op.name,
      .summary = op.summary,
      .options = collective_options(),
      .faults = faults_of(op.ops),
      .table_metrics = {"algbw_GBps", "busbw_GBps"},
      .configs = [&op](const SweepRequest& req) { return sweep_sizes(req, op); },
      .validate = [&op](const CaseConfig& c) { validate_sizes(c, op); },
      .memory = collective_memory,
      .setup = [&op](CaseContext& ctx) { return setup(op, ctx); },
      .timed = {{"run", [&op](CollectiveState& s) { op.run(s); }}},
      .check = [&op](CollectiveState& s, Checker& c) { check(op, s, c); },
      .metrics =
          [&op](CollectiveState& s, const RegionTimes& times) {
            Metrics m =
                bandwidth(static_cast<double>(s.elements) * dtype_size(s.dtype), op.busbw_factor(s.n), times.at("run"));
            add_group_kind(m, s.group_nodes);
            return m;
          },
  });
}

}  // namespace sextant::collectives
