// cuDNN's fused scaled-dot-product attention (its flash-attention engines,
// built through cudnn-frontend's graph API) on one AttentionPiece of a block:
// forward with the softmax statistics (the LSE, f32, natural log) and
// backward from the final O and LSE. attention_cudnn.cc cuts blocks into
// pieces and merges them; this file builds, caches and runs the graphs.
//
// The library is loaded at run time (cudnn-frontend's dynamic loading), so
// the binary runs without cuDNN whenever attention_impl=own; load_library()
// says in one line where it looked when it is missing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/tensor.h"

namespace cudnn_frontend::graph {
class Graph;
}

namespace sextant::ops::cuda::cudnn {

// One fused call on contiguous BSHD tensors (a piece's rows are copied out
// of its block unless it is the whole block):
//   q, dq: [b, sq, hq, d];  k, dk: [b, sk, hk, d];  v, dv: [b, sk, hk, dv];
//   out, dout: [b, sq, hq, dv];
//   stats (the LSE, out of the forward and into the backward): [b, hq, sq] f32.
struct SdpaShape {
  DType dtype = DType::bf16;  // bf16 or f16 storage; f32 softmax and accumulation
  int64_t b = 0, hq = 0, hk = 0, d = 0;
  int64_t dv = 0;  // head dim of v, out, dout: d but for MLA (cuDNN's checks decide whether it takes d != dv)
  int64_t sq = 0, sk = 0;
  bool causal = false;  // top-left diagonal, sq == sk
  float scale = 1;      // of the scores: ops::attention_scale
  bool operator==(const SdpaShape&) const = default;
};

// What cuDNN's fused engines take: 16-bit storage, head_dim a multiple of 8
// up to 128 (Ampere and Hopper alike).
bool supports(DType dtype, int64_t head_dim);

// Graphs for a shape, validated (cuDNN's own checks of dims, strides and
// attributes) for a GPU architecture (sm_version 90: Hopper; 0: the current
// device's), not yet lowered to an execution plan, which needs a device.
std::shared_ptr<cudnn_frontend::graph::Graph> forward_graph(const SdpaShape& shape, int sm_version = 0);
std::shared_ptr<cudnn_frontend::graph::Graph> backward_graph(const SdpaShape& shape, int sm_version = 0);

// Loads libcudnn once: $SEXTANT_CUDNN_LIBRARY if set, else libcudnn.so.9 on
// the loader's path, else the CUDA toolkit's. Returns where it came from;
// throws RuntimeError in one line naming what was tried.
std::string load_library();
std::vector<std::string> library_candidates();
// dlopen of the first candidate that opens (where: its path), else the error above.
void* open_library(const std::vector<std::string>& candidates, std::string* where);
// cuDNN's version as the loaded library reports it (e.g. 91900).
int64_t library_version();

// Whether cuDNN builds an execution plan for the shape on this device (once
// per shape; where it does not, the reason is said once on stderr and the
// caller runs our kernels). Throws when cuDNN cannot be loaded at all.
bool takes(const SdpaShape& shape, bool backward);

// Device pointers of one call.
struct ForwardPointers {
  const void *q, *k, *v;
  void* o;       // [b, sq, hq, d] dtype
  float* stats;  // [b, hq, sq]
};
void run_forward(const SdpaShape& shape, const ForwardPointers& p);

struct BackwardPointers {
  const void *q, *k, *v, *o, *dout;
  const float* lse;  // [b, hq, sq]: the final LSE of the rows
  void *dq, *dk, *dv;
};
void run_backward(const SdpaShape& shape, const BackwardPointers& p);

}  // namespace sextant::ops::cuda::cudnn
