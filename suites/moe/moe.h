// The moe suite: the expert-parallel MoE layer (kernels/moe) against a
// float64 reference that loops over tokens and their experts, forward and
// backward, over dispatcher (alltoall, allgather) x ep x etp x top-k x
// experts x routing (uniform, skewed) x dropless / capacity, f32 and bf16.
//
// Every rank of the instance holds tokens/ranks distinct tokens (rank r the
// rows r*T/ranks onward); experts are sharded over EP, their FFN over ETP,
// and replicated over EDP (the rank grid's expert layout).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/case.h"
#include "kernels/moe/moe_layer.h"

namespace sextant::moe_suite {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 50;

// The instance's problem, read from CaseConfig::params.
struct Problem {
  moe::DispatcherKind dispatcher = moe::DispatcherKind::alltoall;
  moe::Transport transport = moe::Transport::peer_memory;  // alltoall without ETP
  int experts = 8, topk = 2;
  bool skewed = false;  // routing: uniform, or skewed (the hot experts' router columns scaled up)
  int hot_experts = 1;  // skewed: experts 0..hot-1 (on EP rank 0) get `skew` x larger router columns
  double skew = 3.0;
  moe::DropPolicy drop = moe::DropPolicy::none;
  double capacity_factor = 0;  // 0 when dropless
  bool pre_softmax = false;
  int64_t tokens = 0, hidden = 0, ffn = 0;  // tokens: the whole batch
  double aux_coeff = 0, z_coeff = 0;

  static Problem of(const CaseConfig& config);
  moe::RouterOptions router(int64_t capacity_group) const;
};

// One rank's view of the instance.
struct State {
  CaseConfig config;
  Problem problem;
  uint64_t seed = 0;
  Device device = Device::host;    // where the layer runs (x, dy, weights, results)
  Communicator* host = nullptr;    // checks and metrics
  Communicator* self = nullptr;    // the one-rank baseline
  Communicator* tokens = nullptr;  // the instance's ranks (kernel backend)
  Communicator *ep = nullptr, *etp = nullptr, *edp = nullptr;
  int64_t token0 = 0, local_tokens = 0;  // this rank's rows of the batch
  int64_t redrawn_rows = 0;              // x rows drawn again for resolvable routing (this rank)
  Tensor router;                         // [h, E], replicated
  Tensor x, dy;                          // [T / ranks, h] on `device`
  std::unique_ptr<moe::MoeLayer> layer;
  Tensor y;                            // the last forward's output
  moe::MoeGrads grads;                 // and backward's gradients
  std::vector<moe::MoeTimes> history;  // one entry per forward + backward
};

// sweep.cc
std::vector<OptionSpec> moe_options();
MemoryEstimate moe_memory(const CaseConfig& c);
std::vector<CaseConfig> sweep(const SweepRequest& req);
void validate(const CaseConfig& c);
// Whether a planted fault can change this instance's results at all.
bool fault_visible(const std::string& fault, const CaseConfig& c);

// inputs.cc: deterministic inputs (random_block / random_tensor specs).
Tensor token_block(const Problem& p, const char* name, int64_t row0, int64_t rows, DType dtype, uint64_t seed);
Tensor expert_block(const Problem& p, bool second, int expert, int slice, int slices, DType dtype, uint64_t seed);
Tensor router_weights(const Problem& p, DType dtype, uint64_t seed);
// Rows (within x, one capacity group) whose routing f32 rounding could change:
// the top-k set, or under the probability policy a capacity cut.
std::vector<int64_t> unresolvable_rows(const Problem& p, const Tensor& x, const Tensor& router);
// The x rows [row0, row0 + rows) of one capacity group: random rows, each
// unresolvable one drawn again until none is left; `redrawn` counts them.
Tensor token_rows(const Problem& p, int64_t row0, int64_t rows, const Tensor& router, DType dtype, uint64_t seed,
                  int64_t* redrawn = nullptr);

// driver.cc
Tensor on_device(const Tensor& t, Device device);  // t itself when it is there already
State setup(CaseContext& ctx);
void run_forward_backward(State& s);
// check.cc
void check(State& s, Checker& checker);
// metrics.cc
Metrics metrics(State& s, const RegionTimes& times);

}  // namespace sextant::moe_suite
