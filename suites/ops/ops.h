// The ops suite: every compute op of kernels/ops (and the shared kernels the
// parallel suites build on) on one device, forward and backward, against the
// float64 reference at several shapes, including awkward ones (sizes that
// are not multiples of tile or vector widths, one-row inputs, odd head
// counts, GQA ratios, causal offsets). With --device cuda the CUDA ops run.
// Each op's outputs are held to its tolerance row's gate (harness/tolerance.h):
// here the baseline is the op itself. Each case records its throughput.
#pragma once

#include <string>
#include <vector>

#include "harness/case.h"

namespace sextant::ops_suite {

// Where the suite sits in listings and reports: first, under the others.
inline constexpr int kSuiteOrder = 10;

// One instance per shape and dtype, at one rank only (the ops have no
// parallel part). shapes: the params of each instance, per profile.
std::vector<CaseConfig> op_configs(const SweepRequest& req, const std::vector<nlohmann::json>& shapes,
                                   const std::vector<DType>& dtypes);

// A deterministic input in `dtype` on `device` (the float64 reference reads
// the same rounded values from the host copy).
Tensor input(const Shape& shape, DType dtype, const std::string& name, uint64_t seed, double scale = 1.0);
Tensor on_device(const Tensor& host, Device device);
Tensor on_host(const Tensor& t);

// Throughput of one timed region: GFLOP/s when flops > 0, GB/s of the bytes
// read and written.
Metrics rates(double flops, double bytes, const TimeStats& t);

// Memory of an op touching `elements` values: the inputs and outputs in 4
// bytes on the device, their float64 reference on the host.
MemoryEstimate op_memory(const CaseConfig& c, double elements);

}  // namespace sextant::ops_suite
