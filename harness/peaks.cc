#include "harness/peaks.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness/strings.h"

namespace sextant {

void to_json(nlohmann::json& j, const DeviceInfo& d) {
  j = {{"name", d.name},
       {"memory_bytes", d.memory_bytes},
       {"peak_tflops", d.peak_tflops},
       {"peak_source", d.peak_source}};
}

double gpu_peak_tflops(const std::string& name) {
  // Dense bf16 TFLOP/s, as torchtitan's get_peak_flops (torchtitan/tools/utils.py)
  // takes them from the vendors' data sheets (half the "with sparsity" figures):
  // NVIDIA H100 (SXM 989, PCIe 756), H200 (989), A100 (312), Blackwell B200
  // (2250); AMD Instinct MI300X (1300). H800: the H100 SXM figure (the same
  // tensor cores, less interconnect bandwidth). Order matters: "H100 PCIe"
  // before "H100".
  static const std::vector<std::pair<std::string, double>> table = {
      {"H100 PCIe", 756}, {"H100", 989}, {"H200", 989}, {"H800", 989}, {"A100", 312}, {"B200", 2250}, {"MI300X", 1300}};
  for (const auto& [key, peak] : table)
    if (name.find(key) != std::string::npos) return peak;
  return 0;
}

double gpu_fp8_peak_tflops(const std::string& name) {
  // Dense FP8 TFLOP/s from the same data sheets (half the "with sparsity"
  // figures): H100 SXM, H200 and H800 1979, H100 PCIe 1513, B200 4500,
  // MI300X 2615; A100 has no FP8 tensor cores.
  static const std::vector<std::pair<std::string, double>> table = {
      {"H100 PCIe", 1513}, {"H100", 1979}, {"H200", 1979}, {"H800", 1979}, {"B200", 4500}, {"MI300X", 2615}};
  for (const auto& [key, peak] : table)
    if (name.find(key) != std::string::npos) return peak;
  return 0;
}

DeviceInfo describe_host() {
  DeviceInfo d;
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  double mhz = 0;
  while (std::getline(in, line)) {
    if (d.name.empty() && line.rfind("model name", 0) == 0) d.name = line.substr(line.find(':') + 2);
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::stod(line.substr(line.find(':') + 2));
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  d.memory_bytes = static_cast<double>(pages) * static_cast<double>(page);
  // f32 FLOPs per cycle per core: 2 FMA units x vector lanes x 2.
  int per_cycle = flags.find(" avx512f") != std::string::npos ? 64 : flags.find(" fma") != std::string::npos ? 32 : 8;
  unsigned cores = std::thread::hardware_concurrency();
  d.peak_tflops = cores * mhz * 1e6 * per_cycle / 1e12;
  d.peak_source = cat("estimate: ", cores, " cores x ", mhz, " MHz x ", per_cycle, " f32 FLOP/cycle");
  return d;
}

std::vector<DeviceInfo> describe_devices(Device device) {
  if (device == Device::cuda) return describe_cuda_devices();
  return {describe_host()};
}

}  // namespace sextant
