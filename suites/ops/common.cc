// What the op cases share: configs at one rank, inputs, rates.
#include "harness/rng.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {

namespace {
const MetricDef& kGflops = define_metric({"ops", "gflops", "GFLOP/s", Better::higher,
                                          "the op's floating-point operations / median time (forward and backward)"});
const MetricDef& kGBps = define_metric(
    {"ops", "GBps", "GB/s", Better::higher, "bytes the op reads and writes / median time (forward and backward)"});
}  // namespace

std::vector<CaseConfig> op_configs(const SweepRequest& req, const std::vector<nlohmann::json>& shapes,
                                   const std::vector<DType>& dtypes) {
  std::vector<CaseConfig> out;
  if (req.ranks != 1) return out;
  for (DType dtype : req.dtypes_or(dtypes))
    for (const nlohmann::json& shape : shapes) {
      CaseConfig c;
      c.params = shape;
      c.parallel = ParallelConfig{1, 1, 1, 1};
      c.ranks = 1;
      c.dtype = dtype;
      out.push_back(c);
    }
  return out;
}

Tensor input(const Shape& shape, DType dtype, const std::string& name, uint64_t seed, double scale) {
  return random_tensor(shape, dtype, {seed, tensor_id("ops." + name), scale});
}

Tensor on_device(const Tensor& host, Device device) { return host.device() == device ? host : host.to(device); }

Tensor on_host(const Tensor& t) { return !t.defined() || t.is_host() ? t : t.to(Device::host); }

Metrics rates(double flops, double bytes, const TimeStats& t) {
  Metrics m;
  if (t.median <= 0) return m;
  if (flops > 0) m.add(kGflops, flops / t.median / 1e9);
  if (bytes > 0) m.add(kGBps, bytes / t.median / 1e9);
  return m;
}

MemoryEstimate op_memory(const CaseConfig& c, double elements) {
  const double device = 4.0 * elements, reference = 8.0 * elements * 2;
  return {c.device == Device::host ? device + reference : reference, c.device == Device::host ? 0 : device};
}

}  // namespace sextant::ops_suite
