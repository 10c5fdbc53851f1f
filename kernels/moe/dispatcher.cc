#include "kernels/moe/dispatcher.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/moe/dispatcher_common.h"

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

Tensor sum_blocks(const Tensor& parts, int n) {
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
