// The tensor-parallel group a layer runs on, and how it runs there
// (Megatron's scheme; Shoeybi et al. 2019, Korthikanti et al. 2022).
//
// Every function of kernels/tensor_parallel takes its TpGroup explicitly:
// the TP communicator (ctx.grid.get(Dim::tp)), whether sequence parallelism
// is on, and whether column-parallel linears keep only their input shard.
// A TpGroup of size 1 runs the same code with no communication.
//
// Weight layout: W is [in, out] and y = x W + b (the paper's Y = X A; the
// transpose of torch's [out, in] storage). Column-parallel splits W along
// out, row-parallel along in; see linear.h.
#pragma once

#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/fault_table.h"

namespace sextant::tp {

// Planted faults (docs/CONFORMANCE.md): each makes one piece of the TP/SP machinery
// wrong the way a real bug would; suites/tp_sp proves its check catches every
// one. They are off unless a conformance run plants them.
enum class Fault {
  none,
  skip_input_grad_reduce,    // column-parallel backward: dx stays a partial sum (no all-reduce / reduce-scatter)
  reduce_scatter_wrong_dim,  // SP reduce-scatter splits the hidden dimension instead of the sequence
  layernorm_wrong_axis,      // SP LayerNorm: statistics over the shard's tokens per feature, not over the hidden dim
  cross_entropy_local_max,   // vocab-parallel cross-entropy: each rank shifts by its own max (no max all-reduce)
  fp8_amax_not_reduced_over_tp,  // FP8 linears: each rank scales its shard by its own amax (no max all-reduce over TP)
};
// What a TP config looks like to the faults: its size, SP, whether the
// block holds a LayerNorm or the vocab-parallel loss, and whether its
// linears run in FP8 with per-tensor scales.
struct FaultSite {
  int tp = 1;
  bool sp = false;
  bool layernorm = false;
  bool vocab = false;
  bool fp8_per_tensor = false;
};
inline const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "tensor-parallel",
      {
          {Fault::skip_input_grad_reduce, "skip_input_grad_reduce",
           "column-parallel backward: dx stays a partial sum (no all-reduce / reduce-scatter)", "TP of 2+",
           [](const FaultSite& s) { return s.tp > 1; }},
          {Fault::reduce_scatter_wrong_dim, "reduce_scatter_wrong_dim",
           "the SP reduce-scatter splits the hidden dimension instead of the sequence", "TP of 2+ with SP",
           [](const FaultSite& s) { return s.tp > 1 && s.sp; }},
          {Fault::layernorm_wrong_axis, "layernorm_wrong_axis",
           "SP LayerNorm: statistics over the shard's tokens per feature, not over the hidden dim",
           "a LayerNorm under TP of 2+ with SP", [](const FaultSite& s) { return s.tp > 1 && s.sp && s.layernorm; }},
          {Fault::cross_entropy_local_max, "cross_entropy_local_max",
           "vocab-parallel cross-entropy: each rank shifts by its own max (no max all-reduce)",
           "the vocab-parallel loss under TP of 2+", [](const FaultSite& s) { return s.tp > 1 && s.vocab; }},
          {Fault::fp8_amax_not_reduced_over_tp, "fp8_amax_not_reduced_over_tp",
           "FP8 linears: each rank scales its shard of a weight, input or gradient by its own amax (no max "
           "all-reduce over TP)",
           "FP8 linears with per-tensor scales (delayed, current) under TP of 2+",
           [](const FaultSite& s) { return s.tp > 1 && s.fp8_per_tensor; }},
      });
  return table;
}

// Weight gradients are "main grads" in f32 for 16-bit parameters (Megatron
// sets accumulate_allreduce_grads_in_fp32 with bf16), so that their TP and
// DP reductions add no rounding; f32 and f64 parameters keep their dtype.
inline DType grad_dtype(DType param) { return param == DType::bf16 || param == DType::f16 ? DType::f32 : param; }

struct TpGroup {
  Communicator& comm;              // the TP group: ranks that share one layer's weight shards
  bool sequence_parallel = false;  // activations outside the TP region sharded along the sequence
  // SP only: column-parallel linears save their input's sequence shard and
  // all-gather it again in backward for the weight gradient (Megatron's
  // default; Korthikanti et al. 4.2.2): one more all-gather, TP-fold smaller
  // saved input. false saves the gathered input.
  bool regather_input = true;
  Fault fault = Fault::none;
  // FP8 linears: the data-parallel group their amaxes are reduced over after
  // TP (fp8_linear.h); none for a group that holds every token.
  Communicator* amax_dp = nullptr;

  int size() const { return comm.size(); }
  int rank() const { return comm.rank(); }
  bool sp() const { return sequence_parallel && comm.size() > 1; }
  // Tokens per sequence this rank holds outside the TP region.
  int64_t local_seq(int64_t seq) const { return sp() ? seq / size() : seq; }
};

}  // namespace sextant::tp
