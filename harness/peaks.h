// Device descriptions and peak FLOP/s for MFU. GPU peaks (dense bf16) come
// from a table (torchtitan / vendor data sheets); the host peak is an
// estimate from core count, clock and vector width, labeled as such.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/device.h"

namespace sextant {

struct DeviceInfo {
  std::string name;
  double memory_bytes = 0;
  double peak_tflops = 0;   // dense bf16 for GPUs; f32 FMA for the host
  std::string peak_source;  // "table: ...", "estimate: ...", "unknown"
};
void to_json(nlohmann::json& j, const DeviceInfo& d);

// Peak dense bf16 TFLOP/s of a GPU by name ("NVIDIA H200" -> 989), 0 if unknown.
double gpu_peak_tflops(const std::string& device_name);
// Peak dense FP8 TFLOP/s of a GPU by name ("NVIDIA H200" -> 1979), 0 if
// unknown or without FP8 tensor cores.
double gpu_fp8_peak_tflops(const std::string& device_name);
// Estimated f32 peak of this host (all cores) and how it was estimated.
DeviceInfo describe_host();
// The devices this rank uses (the host; or each visible GPU in CUDA builds).
std::vector<DeviceInfo> describe_devices(Device device);
// Driver / runtime / NCCL versions (empty in host-only builds).
std::map<std::string, std::string> cuda_versions();
// CUDA-side descriptions (implemented in device_cuda.cc / device_none.cc).
std::vector<DeviceInfo> describe_cuda_devices();

}  // namespace sextant
