#include "kernels/tensor_parallel/regions.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {

namespace {
constexpr int kSeqDim = 1;

void require_activation(const char* op, const Tensor& t) {
  if (!t.defined() || t.ndim() < 2) throw RuntimeError(cat(op, ": needs an activation [b, s, ...]"));
}
}  // namespace

Tensor gather_sequence(Communicator& group, const Tensor& shard) {
  require_activation("gather_sequence", shard);
  const int n = group.size();
  if (n == 1) return shard;
  Shape parts_shape{n};
  parts_shape.insert(parts_shape.end(), shard.shape().begin(), shard.shape().end());
  Tensor parts = Tensor::empty(parts_shape, shard.dtype(), shard.device());  // [n, b, s/n, ...]
  group.all_gather(shard, parts);
  return merge_front_into_dim(parts, kSeqDim);
}

Tensor reduce_scatter_sequence(Communicator& group, const Tensor& full, Fault fault) {
  require_activation("reduce_scatter_sequence", full);
  const int n = group.size();
  if (n == 1) return full;
  if (full.dim(kSeqDim) % n != 0)
    throw RuntimeError(
        cat("reduce_scatter_sequence: ", n, " ranks do not divide the sequence of ", shape_string(full.shape())));
  // The planted bug: the contiguous blocks are cut along the hidden dimension,
  // so rank r gets features [r h/n, (r+1) h/n) of every token, read as tokens.
  const int dim = fault == Fault::reduce_scatter_wrong_dim ? full.ndim() - 1 : kSeqDim;
  Tensor send = split_dim_to_front(full, dim, n);  // [n, b, s/n, ...]: block r goes to rank r
  Shape out_shape = full.shape();
  out_shape[kSeqDim] /= n;
  Tensor out = Tensor::empty(out_shape, full.dtype(), full.device());
  group.reduce_scatter(send, out);
  return out;
}

Tensor enter_region_forward(const TpGroup& g, const Tensor& x) { return g.sp() ? gather_sequence(g.comm, x) : x; }

Tensor enter_region_backward(const TpGroup& g, Tensor dx) {
  if (g.size() == 1) return dx;
  if (g.fault == Fault::skip_input_grad_reduce)  // the planted bug: this rank's partial sum is kept
    return g.sp() ? chunk(dx, kSeqDim, g.size(), g.rank()) : dx;
  if (g.sp()) return reduce_scatter_sequence(g.comm, dx, g.fault);
  g.comm.all_reduce(dx);
  return dx;
}

Tensor exit_region_forward(const TpGroup& g, Tensor y) {
  if (g.size() == 1) return y;
  if (g.sp()) return reduce_scatter_sequence(g.comm, y, g.fault);
  g.comm.all_reduce(y);
  return y;
}

Tensor exit_region_backward(const TpGroup& g, const Tensor& dy) { return g.sp() ? gather_sequence(g.comm, dy) : dy; }

void all_reduce_grads(Communicator& group, const std::vector<Tensor*>& grads) {
  if (group.size() == 1) return;
  for (Tensor* grad : grads)
    if (grad && grad->defined()) group.all_reduce(*grad);
}

void reduce_sequence_parallel_grads(const TpGroup& g, const std::vector<Tensor*>& replicated_grads) {
  if (g.sp()) all_reduce_grads(g.comm, replicated_grads);
}

}  // namespace sextant::tp
