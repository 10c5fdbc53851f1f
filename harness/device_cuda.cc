// CUDA build: device memory through the CUDA runtime.
#include <cuda_runtime.h>

#include <fstream>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw RuntimeError(cat(what, ": ", cudaGetErrorString(status)));
}
}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

void* cuda_malloc(size_t bytes) {
  if (cuda_device_count() == 0) throw UsageError("--device cuda: no CUDA device is visible on this machine");
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, bytes > 0 ? bytes : 1), "cudaMalloc");
  return ptr;
}

void cuda_free(void* ptr) {
  if (ptr) cudaFree(ptr);
}

void cuda_copy(void* dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

void cuda_memset_zero(void* ptr, size_t bytes) {
  if (bytes) check(cudaMemset(ptr, 0, bytes), "cudaMemset");
}

void cuda_synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

bool is_device_pointer(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace sextant

#include <nccl.h>

#include "harness/peaks.h"

namespace sextant {

std::vector<DeviceInfo> describe_cuda_devices() {
  std::vector<DeviceInfo> out;
  int count = cuda_device_count();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.name = prop.name;
    d.memory_bytes = static_cast<double>(prop.totalGlobalMem);
    d.peak_tflops = gpu_peak_tflops(d.name);
    d.peak_source = d.peak_tflops > 0 ? "table: dense bf16 (REFERENCE.md)" : "unknown: pass --peak-tflops";
    out.push_back(d);
  }
  return out;
}

std::map<std::string, std::string> cuda_versions() {
  std::map<std::string, std::string> v;
  int driver = 0, runtime = 0, nccl = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    v["driver_cuda"] = cat(driver / 1000, ".", (driver % 1000) / 10);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    v["cuda_runtime"] = cat(runtime / 1000, ".", (runtime % 1000) / 10);
  if (ncclGetVersion(&nccl) == ncclSuccess) v["nccl"] = cat(nccl / 10000, ".", (nccl / 100) % 100, ".", nccl % 100);
  // The kernel driver version (e.g. 570.86.15) is in /proc when a driver is loaded.
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(in, line)) v["driver"] = line;
  return v;
}

}  // namespace sextant
