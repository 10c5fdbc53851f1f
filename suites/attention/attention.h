// The attention suite: context-parallel attention (kernels/attention) against
// a float64 whole-sequence reference, forward and backward. One case per CP
// variant (p2p, a2a, allgather, a2a+p2p); each sweeps causal / non-causal,
// contiguous / zigzag layout, MHA / GQA, f32 / bf16 and the CP (x TP) sizes
// of the rank count. The shared driver (driver.cc) turns a Variant into a
// case, like the collectives suite turns a CollectiveOp into one.
//
// Packed sequences (--set seq_lens=40,8,16 or zipf:N): one batch row holds
// several sequences summing to --seq (THD); every variant then attends within
// each sequence, per-sequence zigzag or contiguous. Padding rows (each
// sequence rounded up to 2 cp rows) are recorded, masked out, and left out of
// the checks and the FLOPs. dynamic_cp.cc runs packed microbatches on CP
// groups sized per microbatch.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/case.h"
#include "kernels/attention/cp_attention.h"
#include "kernels/attention/cp_variants.h"

namespace sextant::attention {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 40;

// One CP variant (kernels/attention/cp_variants.h) as a case.
using Variant = cp::VariantInfo;

// Which query rows the float64 reference covers: every one, or a sample
// (sizes too large for the host); the `reference` param names it.
enum class ReferenceRows { full, spot };
const char* reference_rows_name(ReferenceRows r);             // "full", "spot"
ReferenceRows parse_reference_rows(const std::string& name);  // UsageError

// The instance's problem, read from CaseConfig::params.
struct Problem {
  cp::Variant variant = cp::Variant::p2p;
  cp::Layout layout = cp::Layout::contiguous;
  bool causal = false;
  // Sliding window: params "window" (left) and "window_right" (right; no
  // causal mask); an absent param leaves its side unbounded.
  ops::Window window;
  int64_t seq = 0, batch = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t v_head_dim = 0;          // of v, out, dout (param "v_head_dim", MLA; absent: head_dim)
  int a2a_size = 1, p2p_size = 1;  // cp = a2a_size x p2p_size
  ReferenceRows reference = ReferenceRows::full;
  // Packed sequences: tokens of each, summing to seq; empty: one sequence.
  std::vector<int64_t> seq_lens;
  bool thd_padding = true;   // pad each sequence to a multiple of 2 cp rows (else they must split)
  int64_t tail_padding = 0;  // rows of padding after the last sequence (before rounding)
  ops::AttentionImpl attention_impl = ops::AttentionImpl::own;  // the block kernels on a GPU
  cp::Packing packing;  // seq_lens as the packed stream holds them at this config's cp

  static Problem of(const CaseConfig& config);
  bool packed() const { return packing.packed(); }
  // Rows of a batch row as the ranks hold it: seq, plus padding when packed.
  int64_t rows() const { return packed() ? packing.rows() : seq; }
  // Forward FLOPs of the real tokens: 2 b s^2 h (d + d_v) (Q K^T and P V),
  // halved when causal; packed: the sum over sequences of b L^2 h (d + d_v);
  // windowed: 2 b h (d + d_v) x the visible pairs, sum over each sequence's
  // query i of the keys in [i - left, i + right] (causal: [i - left, i]).
  double flops_forward() const;
};

// Padding rows take no part: their out, dq, dk and dv must be exactly 0 and
// their LSE -inf (a row that sees no key), whatever the kernels did around
// them. One exact check per tensor (named `what` + its name) over `rows` of
// out, dq, dk, dv [b, s, h, d | dv] (dim 1) and lse [b, h, s] (dim 2); any rank.
void check_padding_rows(Checker& checker, const std::string& what, const std::vector<int64_t>& rows, const Tensor& out,
                        const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv);

// The shapes the sweeps add on their own (sweep.cc; dynamic_cp.cc too):
//   padded_stream_spec: five sequences of one token, none, 5/8 of seq less
//   one, 1/8 and 2/8 ("" where seq is not a multiple of 8 of at least 16);
//   mla_qk_head_dim: DeepSeek-V3's proportions, q/k 3/2 of a v head dim (0
//   where it is odd).
std::string padded_stream_spec(int64_t seq);
int64_t mla_qk_head_dim(int64_t v_head_dim);

// --set window=LEFT[,RIGHT] as given (right kNoWindow when absent; a lone
// LEFT arrives as a JSON number), or none; UsageError when malformed.
std::optional<ops::Window> window_option(const SweepRequest& req);

// The packing of seq_lens for a CP size (padded to 2 cp rows or not).
cp::Packing packing_for(const std::vector<int64_t>& seq_lens, bool thd_padding, int cp, int64_t tail_padding = 0);

// What one rank holds: its batch rows (DP), heads (TP) and sequence chunks (CP).
struct Shard {
  int64_t batch0 = 0, batch = 0;
  int64_t head0 = 0, heads = 0, kv_head0 = 0, kv_heads = 0;
  std::vector<cp::Chunk> chunks;
  int64_t rows = 0;  // sum of the chunk lengths
};
Shard shard_of(const Problem& p, const ParallelConfig& parallel, const RankCoords& coords);

// The four inputs, as a rank's shard or (shard = whole problem) globally,
// generated on `device` (the same values on either: kernels/ops/random.h).
struct Inputs {
  Tensor q, k, v, dout;  // [b, n, h, d], [b, n, hk, d], [b, n, hk, dv], [b, n, h, dv]
};
Inputs make_inputs(const Problem& p, const Shard& shard, DType dtype, uint64_t seed, Device device = Device::host);
Inputs to_device(const Inputs& in, Device device);
Shard whole(const Problem& p);
// The token rows of a stream tensor (dim 1, or dim 2 for a [b, h, rows]
// statistic): padding rows dropped. Unpacked: t itself.
Tensor token_rows(const Problem& p, const Tensor& t, int dim);

// Per timed region: what the kernels reported, summed over the runs.
struct RegionStats {
  cp::Stats kernel;
  int runs = 0;
};

struct State {
  const Variant* variant = nullptr;
  CaseConfig config;
  Problem problem;
  Shard shard;
  uint64_t seed = 0;
  Device device = Device::host;  // where the kernels run (inputs, results, the baseline)
  Communicator* host = nullptr;  // checks and metrics
  Communicator* self = nullptr;  // the one-rank baseline
  Communicator* cp_comm = nullptr;
  std::unique_ptr<Communicator> a2a_owned, kv_owned;  // a2a+p2p: the two sub-groups of CP
  std::unique_ptr<Communicator> a2a_loop, kv_loop;    // compute_only: groups that move nothing
  cp::Comms comms, loop_comms;
  cp::Options options;  // with the planted fault, if any
  Inputs in;
  cp::Forward fwd;
  cp::Grads grads;
  std::map<std::string, RegionStats> regions;
};

// Driver pieces (driver.cc, check.cc, metrics.cc, sweep.cc).
std::vector<OptionSpec> attention_options();
MemoryEstimate attention_memory(const CaseConfig& c);
std::vector<CaseConfig> sweep(const Variant& v, const SweepRequest& req);
void validate(const Variant& v, const CaseConfig& c);
State setup(const Variant& v, CaseContext& ctx);
void run_forward(State& s, const std::string& region);
void run_forward_backward(State& s, const std::string& region, bool compute_only);
void check(State& s, Checker& checker);
Metrics metrics(State& s, const RegionTimes& times);
// Traffic of the variant's formula, bytes per rank per iteration.
double bytes_formula(const State& s, bool backward_too);

// The planted faults that can show in some config of the variant.
std::vector<FaultDoc> variant_faults(const Variant& v);
CaseDef make_attention_case(const Variant& v);

}  // namespace sextant::attention
