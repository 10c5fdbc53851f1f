// attention/dynamic_cp: a global batch of packed microbatches, whose
// sequence lengths come from a length distribution, run twice over the same
// pool of dp x cp ranks: static CP (every microbatch on a full CP group) and
// dynamic CP (the sequences re-packed into bins, each on the smallest
// power-of-two group that holds its longest sequence; kernels/attention/
// dynamic_cp.h). Both run the same attention (ring p2p, per-sequence zigzag,
// forward and backward) and are checked against the float64 reference of
// every sequence on its own; the metrics compare their time and how busy
// each rank is.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/case.h"
#include "kernels/attention/cp_attention.h"
#include "kernels/attention/cp_variants.h"
#include "kernels/attention/dynamic_cp.h"

namespace sextant::attention::dynamic {

// What a bin's CP group looks like to the planted CP faults (cp_faults.h): a
// p2p ring over zigzagged packed sequences, with this sliding window.
cp::FaultSite ring_site(int64_t window);

// The instance's problem, read from CaseConfig::params in one place.
struct Problem {
  int64_t seq = 0;           // tokens per static microbatch (= cp x capacity)
  int64_t microbatches = 0;  // in the global batch
  std::string seq_lens;      // per microbatch: "a,b,c" or "zipf:N" (drawn per microbatch)
  int64_t heads = 0, head_dim = 0;
  int64_t v_head_dim = 0;                          // of v and out (param "v_head_dim", MLA; absent: head_dim)
  int64_t window = ops::AttentionMask::kNoWindow;  // causal sliding window within each sequence (param "window")
  int cp = 1, dp = 1;                              // the static groups; the pool is cp x dp ranks
  double ring_step = 0;                            // the scheduler's cost of one ring step, in causal pairs
  ops::AttentionImpl attention_impl = ops::AttentionImpl::own;  // the block kernels on a GPU
  std::vector<std::vector<int64_t>> lengths;                    // [microbatch][sequence]

  static Problem of(const CaseConfig& config);
  int64_t capacity() const { return seq / cp; }  // tokens a rank holds
  int ranks() const { return cp * dp; }
  std::vector<int64_t> all_lengths() const;  // every sequence, microbatch after microbatch
  // The indices (into all_lengths) of every microbatch's sequences.
  std::vector<std::vector<int>> microbatch_sequences() const;
  int64_t tokens() const { return microbatches * seq; }
};

// One bin as this rank runs it.
struct BinRun {
  cp::Placement placement;
  int member = 0;                 // this rank's place in the group
  Communicator* group = nullptr;  // null: a group of one
  cp::Options options;
  std::vector<cp::Chunk> chunks;  // rows of the bin's packed stream this rank holds
  std::vector<int64_t> tokens;    // global token of each held row, -1 for padding
  Tensor q, k, v, dout;           // [1, rows, h, d]
  cp::Forward fwd;
  cp::Grads grads;
};

struct State {
  CaseConfig config;
  Problem problem;
  uint64_t seed = 0;
  Device device = Device::host;
  Communicator* host = nullptr;
  Communicator* self = nullptr;
  std::map<int, std::unique_ptr<Communicator>> blocks;  // group size -> this rank's aligned block
  cp::Schedule fixed, dynamic;                          // static and dynamic schedules
  std::vector<BinRun> fixed_runs, dynamic_runs;         // this rank's bins, in execution order
  cp::Fault fault = cp::Fault::none;
  std::map<std::string, cp::Stats> stats;  // per timed region, summed over runs
  std::map<std::string, int> runs;
};

std::vector<CaseConfig> sweep(const SweepRequest& req);
void validate(const CaseConfig& c);
State setup(CaseContext& ctx);
// Forward and backward of every bin, in execution order (collective over the pool).
void run(std::vector<BinRun>& bins, cp::Stats* stats);
void check(State& s, Checker& checker);
Metrics metrics(State& s, const RegionTimes& times);

}  // namespace sextant::attention::dynamic
