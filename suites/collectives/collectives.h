// The collectives suite, in the spirit of nccl-tests: each operation is a
// small table (CollectiveOp) of buffer sizes, run, expected values and bus
// bandwidth factor; the shared driver turns it into a sextant case.
//
// Inputs are small integers, so every sum is exact in f32 and bf16 and the
// check is bitwise: wrong elements are counted on every rank and summed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/comm.h"

namespace sextant::collectives {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 20;

// The state of one collective instance on one rank.
struct CollectiveState {
  std::unique_ptr<Communicator> faulty;  // set when a fault is planted
  Communicator* comm = nullptr;          // the group the op runs on
  int n = 1, rank = 0;
  int64_t elements = 0;  // nccl-tests "size" in elements (whole buffer)
  bool in_place = false;
  DType dtype = DType::f32;
  Device device = Device::host;
  Tensor send, recv;                                                       // recv undefined when in place
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;  // all_to_all_v
  void* send_ptr = nullptr;
  void* recv_ptr = nullptr;
  // Where the result lands: recv (or send when in place), from this offset.
  int64_t output_offset = 0, output_elements = 0;
  int group_nodes = 1;  // nodes the group spans (1: intra-node, more: inter-node)
};

// The exact input pattern: small integers in [-4, 4].
double pattern(int rank, int64_t index);
// Default input: pattern(rank, i).
double plain_input(const CollectiveState&, int rank, int64_t i);

// One operation. Sizes are in elements; `elements` is the whole buffer as
// nccl-tests reports it (all_gather: the output, reduce_scatter: the input).
struct CollectiveOp {
  const char* name = "";
  const char* summary = "";
  std::vector<CommOp> ops{};  // what it runs: the comm faults that can show (comm_wrappers.h)
  bool has_in_place = false;
  bool splits_over_ranks = false;  // elements must divide by the group size
  double (*busbw_factor)(int n) = nullptr;
  int64_t (*send_elements)(const CollectiveState&) = nullptr;
  int64_t (*recv_elements)(const CollectiveState&) = nullptr;  // 0: the op works in place only
  // Optional, after allocation: in-place pointers and output region, counts.
  void (*prepare)(CollectiveState&) = nullptr;
  void (*run)(CollectiveState&) = nullptr;
  // Expected value of output element i on this rank, given the inputs below.
  double (*expected)(const CollectiveState&, int64_t i) = nullptr;
  // Input element i of rank r's send buffer.
  double (*input)(const CollectiveState&, int rank, int64_t i) = plain_input;
};

double factor_all_reduce(int n);  // 2(n-1)/n
double factor_n_minus_1(int n);   // (n-1)/n
double factor_one(int n);         // 1

// Builds the case from its table.
CaseDef make_collective_case(const CollectiveOp& op);

// Each operation file provides one of these.

// Shared by the driver and the sp_identity case.
std::vector<CaseConfig> sweep_sizes(const SweepRequest& req, const CollectiveOp& op);
Communicator& group_for(CaseContext& ctx, std::unique_ptr<Communicator>& faulty);
// --group: the instance's ranks (world), or every group of one dimension at once.
inline constexpr const char* kWorldGroup = "world";
// The dimension a --group names; none for world (UsageError for a name that is neither).
std::optional<Dim> group_dim(const std::string& group);
// The comm faults that show in a case running these operations.
std::vector<FaultDoc> faults_of(const std::vector<CommOp>& ops);
void validate_sizes(const CaseConfig& c, const CollectiveOp& op);
// The options every collective case declares (--min-bytes, --group, ...).
std::vector<OptionSpec> collective_options();
// Send and receive buffers of the largest message, per rank.
MemoryEstimate collective_memory(const CaseConfig& c);

// The bandwidth metrics of one timed region (nccl-tests' convention).
struct BandwidthMetrics {
  const MetricDef& algbw;
  const MetricDef& busbw;
  const MetricDef& factor;
};
BandwidthMetrics collective_bandwidth();  // of the collective the case is named after
BandwidthMetrics all_reduce_bandwidth();  // sp_identity's all_reduce region
Metrics bandwidth(double bytes, double factor, const TimeStats& t,
                  const BandwidthMetrics& defs = collective_bandwidth());
// Nodes the case's group spans (collective over the instance's ranks), and
// the metrics that say so: group_nodes, and group_spans_nodes (0 or 1).
int group_nodes(CaseContext& ctx);
void add_group_kind(Metrics& m, int nodes);
int64_t count_wrong(const Tensor& got, const std::function<double(int64_t)>& expected);

}  // namespace sextant::collectives
