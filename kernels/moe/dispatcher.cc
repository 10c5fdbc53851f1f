#include "kernels/moe/dispatcher.h"

#include <algorithm>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/moe/dispatcher_common.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::moe {

std::string dispatcher_name(DispatcherKind kind) { return kind == DispatcherKind::alltoall ? "alltoall" : "allgather"; }

DispatcherKind parse_dispatcher(const std::string& name) {
  for (DispatcherKind k : {DispatcherKind::alltoall, DispatcherKind::allgather})
    if (dispatcher_name(k) == name) return k;
  throw UsageError(cat("--set dispatcher='", name, "' must be alltoall or allgather"));
}

std::unique_ptr<TokenDispatcher> make_dispatcher(DispatcherKind kind, const DispatchComms& comms, int experts,
                                                 const DispatchFaults& faults) {
  if (!comms.ep || !comms.etp) throw RuntimeError("moe dispatcher: the EP and ETP communicators are required");
  if (experts % comms.ep->size() != 0)
    throw RuntimeError(cat("moe dispatcher: ep ", comms.ep->size(), " must divide the experts ", experts));
  if (kind == DispatcherKind::alltoall) return make_alltoall_dispatcher(comms, experts, faults);
  return make_allgather_dispatcher(comms, experts, faults);
}

namespace {

// sum_blocks on the device: the same f32 sums in block order (add_into rounds each to f32, as the host loop).
Tensor sum_blocks_on_device(const Tensor& parts, int n) {
  const int64_t rows = parts.dim(0) / n;
  Tensor acc = Tensor::zeros({rows, parts.dim(1)}, DType::f32, parts.device());
  for (int b = 0; b < n; ++b) {
    const Tensor block = narrow(parts, 0, b * rows, rows);
    SEXTANT_CUDA_CALL(ops::cuda::add_into(acc, block.dtype() == DType::f32 ? block : block.to(DType::f32)));
  }
  return parts.dtype() == DType::f32 ? acc : acc.to(parts.dtype());
}

// values -> a device tensor, fn(device pointer), values <- it.
template <class Fn>
void staged(double* values, size_t count, Fn&& fn) {
  Tensor host = Tensor::empty({static_cast<int64_t>(count)}, DType::f64);
  std::copy_n(values, count, host.data<double>());
  Tensor device = host.to(Device::cuda);
  fn(device.raw());
  host = device.to(Device::host);
  std::copy_n(host.data<double>(), count, values);
}

}  // namespace

void small_all_reduce(Communicator& c, double* values, size_t count, ReduceOp op) {
  if (c.device() == Device::host) return c.all_reduce(values, values, count, DType::f64, op);
  staged(values, count, [&](void* d) { c.all_reduce(d, d, count, DType::f64, op); });
}

void small_all_to_all(Communicator& c, const double* send, double* recv, size_t count_per_peer) {
  if (c.device() == Device::host) return c.all_to_all(send, recv, count_per_peer, DType::f64);
  const size_t total = count_per_peer * static_cast<size_t>(c.size());
  std::vector<double> both(send, send + total);
  both.resize(2 * total);
  staged(both.data(), both.size(),
         [&](void* d) { c.all_to_all(d, static_cast<double*>(d) + total, count_per_peer, DType::f64); });
  std::copy_n(both.data() + total, total, recv);
}

void small_all_gather(Communicator& c, const double* send, double* recv, size_t count) {
  if (c.device() == Device::host) return c.all_gather(send, recv, count, DType::f64);
  const size_t total = count * static_cast<size_t>(c.size());
  std::vector<double> all(total);
  std::copy_n(send, count, all.data() + count * static_cast<size_t>(c.rank()));  // in place: send at rank's block
  staged(all.data(), total, [&](void* d) {
    double* base = static_cast<double*>(d);
    c.all_gather(base + count * static_cast<size_t>(c.rank()), base, count, DType::f64);
  });
  std::copy_n(all.data(), total, recv);
}

Tensor sum_blocks(const Tensor& parts, int n) {
  if (!parts.is_host()) return sum_blocks_on_device(parts, n);
  const int64_t rows = parts.dim(0) / n, h = parts.dim(1), block = rows * h;
  Tensor acc = Tensor::zeros({rows, h}, DType::f32);
  float* out = acc.data<float>();
  dispatch(parts.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = parts.data<T>();
    for (int b = 0; b < n; ++b)
      for (int64_t i = 0; i < block; ++i) out[i] += static_cast<float>(to_float(in[b * block + i]));
  });
  return parts.dtype() == DType::f32 ? acc : acc.to(parts.dtype());
}

}  // namespace sextant::moe
