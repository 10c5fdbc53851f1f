#include "harness/comm_values.h"

#include <algorithm>
#include <vector>

#include "harness/tensor.h"

namespace sextant {

namespace {

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

}  // namespace sextant
