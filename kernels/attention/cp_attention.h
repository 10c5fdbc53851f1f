// Context-parallel attention: the sequence is sharded over the CP group and
// every query row still attends to every key row it may see. One entry point
// composes the variants from two stages:
//
//   1. Ulysses (a2a), optional: an all-to-all over the a2a group scatters
//      the heads and gathers the sequence, [b, n, h, d] -> [b, A n, h/A, d]
//      (DeepSpeed-Ulysses); the inverse all-to-all brings the output back.
//   2. KV exchange over the kv group, for the rows the rank now holds:
//        ring       p2p: K/V blocks travel around the ring with isend/irecv,
//                   the next block in flight while the current one is
//                   computed; partial results merge by LSE. Backward sends
//                   the dK/dV accumulators along with their blocks so they
//                   are home after a full turn (Liu et al. 2023; TE).
//        allgather  all-gather K/V, attend locally, reduce-scatter dK/dV
//                   (Llama 3).
//      With no kv group the rank attends to its own rows (local attention).
//
//   variant     a2a group      kv group
//   p2p         -              CP, ring
//   allgather   -              CP, allgather
//   a2a         CP             -
//   a2a+p2p     A consecutive  cp/A, ring      (cp = a2a_size x p2p_size)
//
// Causal masks use the global positions of the rows (layout.h), so the same
// code serves contiguous and zigzag shards. Packed variable-length sequences
// (THD, packing.h) add the sequence of every row to the mask: attention stays
// within each sequence, padding rows take no part, and the per-token LSE
// merges across blocks unchanged. Tensor parallelism composes from outside:
// each TP rank passes its own heads.
#pragma once

#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"
#include "kernels/attention/cp_faults.h"
#include "kernels/attention/cp_types.h"
#include "kernels/attention/layout.h"
#include "kernels/attention/packing.h"
#include "kernels/ops/attention_block.h"

namespace sextant::cp {

struct Options {
  bool causal = false;
  ops::Window window;  // sliding window (attention_mask.h); none by default
  Layout layout = Layout::contiguous;
  int64_t seq = 0;  // global sequence length (packed: packing.rows(), the padded stream)
  Packing packing;  // packed sequences (causal only); empty: one sequence
  KvExchange kv_exchange = KvExchange::ring;
  Fault fault = Fault::none;                                    // planted (cp_faults.h)
  double fault_magnitude = 0;                                   // its size, for a fault that has one (dkv_scale)
  ops::AttentionImpl attention_impl = ops::AttentionImpl::own;  // on a GPU: our kernels or cuDNN's
};

// The groups a rank runs in (null: stage absent). With a2a size A and kv size
// P the CP group has A*P ranks and CP rank c = (kv rank) * A + (a2a rank): an
// a2a group is A consecutive CP ranks.
struct Comms {
  Communicator* a2a = nullptr;
  Communicator* kv = nullptr;
};

struct Forward {
  Tensor out;  // [b, n, hq, dv] in the dtype of q
  Tensor lse;  // [b, hq, n] f32
};
struct Grads {
  Tensor dq;  // [b, n, hq, d] in the dtype of q
  Tensor dk;  // [b, n, hk, d]
  Tensor dv;  // [b, n, hk, dv]
};

// q: [b, n, hq, d]; k: [b, n, hk, d]; v: [b, n, hk, dv] — this rank's rows
// (layout order, n = seq / cp) and heads, all on one device (host, or cuda
// with a communicator on device buffers). dv is d but for multi-head latent
// attention (MLA), whose values are narrower than its queries and keys: every
// stage moves q, k and v as the tensors they are.
Forward cp_attention_forward(const Comms& comms, const Options& options, const Tensor& q, const Tensor& k,
                             const Tensor& v, Stats* stats = nullptr);

// out, lse from the forward; dout: [b, n, hq, dv].
Grads cp_attention_backward(const Comms& comms, const Options& options, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& dout,
                            Stats* stats = nullptr);

}  // namespace sextant::cp
