// The tp_sp suite: tensor and sequence parallelism (kernels/tensor_parallel)
// on three blocks -- the pre-LN MLP, the attention projections, and the
// vocabulary-parallel embedding + LM head + cross-entropy -- at tp 1, 2, 4
// (times dp to fill the ranks), SP off and on, f32 and bf16.
//
// The MLP block and the attention projections also run their linears in
// FP8 (kernels/tensor_parallel/fp8_linear.h) under each scaling recipe,
// with bf16 activations.
//
// Every instance runs one forward + backward on its shards, gathers the
// output and every gradient (input and all weights) on rank 0, and compares
// them with the float64 reference and the same kernels on one rank (the
// baseline). Data parallelism splits the batch; weight gradients are summed
// over DP, and under SP the replicated parameters' gradients over TP first.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/assemble.h"
#include "harness/case.h"
#include "harness/fp8_scales.h"
#include "harness/tolerance.h"
#include "kernels/ops/fp8_recipe.h"
#include "kernels/tensor_parallel/fp8_linear.h"
#include "kernels/tensor_parallel/tp_group.h"

namespace sextant::tp_sp {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 30;

// One instance's problem, from its params and parallel config.
// The size that shapes a block's own matrices beside hidden: the MLP's
// ffn, the attention projection's heads, or the vocabulary.
enum class BlockWidth { ffn, heads, vocab };

// What the shared driver needs of a block case: its name, what it holds
// (a LayerNorm, the vocab-parallel loss: its faults), its width and whether
// its linears run FP8 cases.
struct BlockKind {
  std::string name;
  tp::FaultSite parts;
  BlockWidth width;
  bool fp8_linears = false;
};

struct Problem {
  std::string block;  // mlp, attn_proj, vocab
  BlockWidth width = BlockWidth::ffn;
  bool sp = false, regather = true;
  int64_t batch = 0, seq = 0, hidden = 0, heads = 0, ffn = 0, vocab = 0;  // global sizes; unused ones 0
  int tp = 1, dp = 1;
  std::optional<ops::Fp8Recipe> fp8;  // the linears' FP8 recipe; none: in the test dtype
  int64_t tokens() const { return batch * seq; }
};
Problem problem_of(const CaseConfig& c);
// The blocks' shared options, and the FP8 recipe's for a block with FP8 linears.
std::vector<OptionSpec> block_options(bool fp8_linears);
MemoryEstimate block_memory(const CaseConfig& c);

// Where this rank's data lies in the global [batch, seq, ...] activations.
struct Placement {
  int tp_rank = 0, dp_rank = 0;
  int64_t batch = 0, batch_offset = 0;  // this DP rank's samples
  int64_t seq = 0, seq_offset = 0;      // tokens held outside the TP region (a shard under SP)
  Shape offset() const { return {batch_offset, seq_offset, 0}; }
};
Placement placement_of(const CaseContext& ctx, const Problem& p);

// The communicators and knobs every instance needs.
struct Env {
  Problem p;
  Placement at;
  std::unique_ptr<tp::TpGroup> tp;  // the distributed run (carries the planted fault)
  Communicator* dp = nullptr;       // data-parallel group: weight gradients are summed over it
  Communicator* self = nullptr;     // this rank alone: the one-rank baseline
  uint64_t seed = 0;
  DType dtype = DType::f32;
  Device device = Device::host;  // where shards, activations and the baseline live
};
Env make_env(CaseContext& ctx);
// The baseline's group: this rank alone, no SP, no fault.
tp::TpGroup baseline_group(const Env& env);

// Sweep (tp in {1, 2, 4} dividing the ranks, dp = ranks / tp; SP off, and on
// with and without regather) and the bad-input rules. A block with FP8
// linears also runs each recipe at TransformerEngine's defaults, at bf16
// unless --dtype says; --set fp8_recipe runs that recipe alone.
// With a planted fault, only the configs where it shows (kind.parts: block_faults).
std::vector<CaseConfig> sweep(const SweepRequest& req, const BlockKind& kind);
void validate_problem(const CaseConfig& c);

// Collective over the checker's group: assembles `blocks` on root and
// compares the result with base (one rank, test dtype) and ref (f64) there;
// replicas that disagree bit for bit fail the case.
void check_gathered(Checker& checker, const std::string& name, const Bound& bound, const std::vector<Block>& blocks,
                    const Shape& global, const Tensor& base, const Tensor& ref);
void check_gathered(Checker& checker, const std::string& name, OpClass op, const std::vector<Block>& blocks,
                    const Shape& global, const Tensor& base, const Tensor& ref);

// The FP8 casts on a checked tensor's path (kernels/tensor_parallel/fp8_linear.h).
using tp::fp8_path;
using tp::Fp8Casts;
using tp::kFp8Dgrad;
using tp::kFp8Forward;
using tp::kFp8Wgrad;

// What a checked tensor is held to: its op's row, or under FP8 linears the
// FP8 row of its op over the casts on its path (tolerance.h fp8_bound).
Bound tensor_bound(const Env& env, OpClass op, const Fp8Casts& casts);

// How many steps a check runs from fresh FP8 state, the baseline as many:
// delayed scaling's third step quantizes with scales from two steps of
// history; every other run is one step.
int checked_steps(const Problem& p);
// The per-tensor decode scales of the last step of a block's FP8 linears,
// named "linear.operand" ("fc1.weight"), for check_fp8_scales (every rank
// holds all of them).
Fp8Scales fp8_scales(const std::vector<std::pair<std::string, const tp::Fp8LinearState*>>& linears);

// The metrics of METRICS.md's tp_sp row. flops: matrix-product FLOPs of the
// global forward + backward; replicated_grad_bytes: bytes of the gradients
// all-reduced over TP under SP; regathered_bytes: bytes of the full inputs
// re-all-gathered in backward under SP + regather.
Metrics block_metrics(const Env& env, const RegionTimes& times, double flops, size_t activation_bytes,
                      size_t layernorm_bytes, size_t replicated_grad_bytes, size_t regathered_bytes,
                      bool has_layernorm);

// Bytes of the tensors in the list.
size_t bytes_of(const std::vector<Tensor*>& tensors);

// t in host memory (a copy of a device tensor), where the checker compares.
Tensor on_host(const Tensor& t);
// t on `device`: itself when it is there already, else a copy.
Tensor on_device(const Tensor& t, Device device);
// Every defined tensor of the list moved to host memory, in place.
void move_to_host(const std::vector<Tensor*>& tensors);

// The planted faults (kernels/tensor_parallel/tp_group.h) that show in a
// block with these parts (tp and sp of `parts` ignored).
std::vector<FaultDoc> block_faults(const tp::FaultSite& parts, bool fp8_linears);

// What a block case names; make_block_case adds what every block shares: the
// sweep over tp and SP, its options, the bad-input rules, the memory estimate
// and one timed region, fwd_bwd (forward, backward and the gradient reductions).
template <class State>
struct BlockCase {
  const char* name = "";
  const char* summary = "";
  tp::FaultSite parts{};  // what the block holds (a LayerNorm, the vocab-parallel loss): its faults
  BlockWidth width = BlockWidth::ffn;
  bool fp8_linears = false;  // the block's linears also run in FP8 (fp8_linear.h)
  std::vector<KernelFault> kernel_faults{};
  std::vector<std::string> table_metrics{};
  State (*setup)(CaseContext&) = nullptr;
  void (*fwd_bwd)(State&) = nullptr;
  void (*check)(State&, Checker&) = nullptr;
  Metrics (*metrics)(State&, const RegionTimes&) = nullptr;
};

template <class State>
CaseDef make_block_case(const BlockCase<State>& b) {
  const std::string block = b.name;
  return make_case(CaseTable<State>{
      .suite = "tp_sp",
      .name = block,
      .summary = b.summary,
      .options = block_options(b.fp8_linears),
      .faults = block_faults(b.parts, b.fp8_linears),
      .kernel_faults = b.kernel_faults,
      .table_metrics = b.table_metrics,
      .configs = [kind = BlockKind{block, b.parts, b.width, b.fp8_linears}](
                     const SweepRequest& req) { return sweep(req, kind); },
      .validate = validate_problem,
      .memory = block_memory,
      .setup = b.setup,
      .timed = {{"fwd_bwd", b.fwd_bwd}},
      .check = b.check,
      .metrics = b.metrics,
  });
}

}  // namespace sextant::tp_sp
