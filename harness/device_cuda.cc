// CUDA build: device memory through the CUDA runtime.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "harness/cuda_check.h"
#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

double cuda_free_memory() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<double>(free);
}

bool cuda_async_allocation() {
  static const bool on = [] {
    const char* v = std::getenv("SEXTANT_CUDA_ALLOC");
    if (v && *v && std::string(v) != "async" && std::string(v) != "sync")
      throw UsageError(cat("SEXTANT_CUDA_ALLOC='", v, "' must be async or sync"));
    return v && std::string(v) == "async";
  }();
  return on;
}

namespace {
// The current device's default pool, told to keep freed memory (the default
// release threshold, 0, hands it back at every synchronize).
void keep_pool_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    int device = 0;
    SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
    cudaMemPool_t pool = nullptr;
    SEXTANT_CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;
    SEXTANT_CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  });
}
}  // namespace

double cuda_used_memory() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<double>(total - free);
}

namespace {
cudaMemPool_t default_pool() {
  int device = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  SEXTANT_CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
  return pool;
}
}  // namespace

double cuda_pool_peak_memory() {
  if (!cuda_async_allocation() || cuda_device_count() == 0) return -1;
  uint64_t high = 0;
  SEXTANT_CHECK_CUDA(cudaMemPoolGetAttribute(default_pool(), cudaMemPoolAttrUsedMemHigh, &high));
  return static_cast<double>(high);
}

void cuda_reset_pool_peak() {
  if (!cuda_async_allocation() || cuda_device_count() == 0) return;
  uint64_t zero = 0;  // the only value the attribute takes: it restarts from what is in use
  SEXTANT_CHECK_CUDA(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrUsedMemHigh, &zero));
}

void* cuda_malloc(size_t bytes) {
  if (cuda_device_count() == 0) throw UsageError("--device cuda: no CUDA device is visible on this machine");
  void* ptr = nullptr;
  if (cuda_async_allocation()) {
    keep_pool_memory();
    SEXTANT_CHECK_CUDA(cudaMallocAsync(&ptr, bytes > 0 ? bytes : 1, static_cast<cudaStream_t>(cuda_compute_stream())));
    return ptr;
  }
  SEXTANT_CHECK_CUDA(cudaMalloc(&ptr, bytes > 0 ? bytes : 1));
  return ptr;
}

void cuda_free(void* ptr) {
  if (!ptr) return;
  if (cuda_async_allocation()) cudaFreeAsync(ptr, static_cast<cudaStream_t>(cuda_compute_stream()));
  else cudaFree(ptr);
}

void cuda_copy(void* dst, const void* src, size_t bytes) {
  if (bytes) SEXTANT_CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

void cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height) {
  if (width == 0 || height == 0) return;
  if (is_device_pointer(dst) && is_device_pointer(src)) {
    SEXTANT_CHECK_CUDA(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDeviceToDevice,
                                         static_cast<cudaStream_t>(cuda_compute_stream())));
    return;
  }
  SEXTANT_CHECK_CUDA(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault));
}

void cuda_memset_zero(void* ptr, size_t bytes) {
  if (bytes) SEXTANT_CHECK_CUDA(cudaMemset(ptr, 0, bytes));
}

void cuda_synchronize() { SEXTANT_CHECK_CUDA(cudaDeviceSynchronize()); }

void cuda_set_device(int index) {
  int count = cuda_device_count();
  if (count == 0) throw UsageError("--device cuda: no CUDA device is visible on this machine");
  if (index < 0 || index >= count) throw RuntimeError(cat("cuda_set_device: device ", index, " of ", count));
  SEXTANT_CHECK_CUDA(cudaSetDevice(index));
}

int cuda_current_device() {
  int index = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&index));
  return index;
}

std::string cuda_device_uuid() {
  cudaDeviceProp prop{};
  SEXTANT_CHECK_CUDA(cudaGetDeviceProperties(&prop, cuda_current_device()));
  return std::string(prop.uuid.bytes, sizeof prop.uuid.bytes);
}

void* cuda_compute_stream() {
  thread_local cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    // Blocking (not cudaStreamNonBlocking): it orders with the legacy default
    // stream of cudaMemcpy / cudaMemset, so a harness copy never reads an
    // unfinished result and a kernel never reads a half-copied input.
    SEXTANT_CHECK_CUDA(cudaStreamCreate(&s));
    return s;
  }();
  return stream;
}

namespace {
// Registered side streams, each with the event used to join it.
struct SideStreams {
  std::mutex mutex;
  std::map<cudaStream_t, cudaEvent_t> events;
};
SideStreams& side_streams() {
  static SideStreams s;
  return s;
}
}  // namespace

void cuda_register_side_stream(void* stream) {
  cudaEvent_t event = nullptr;
  SEXTANT_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  SideStreams& s = side_streams();
  std::lock_guard lock(s.mutex);
  s.events[static_cast<cudaStream_t>(stream)] = event;
}

void cuda_unregister_side_stream(void* stream) {
  SideStreams& s = side_streams();
  std::lock_guard lock(s.mutex);
  auto it = s.events.find(static_cast<cudaStream_t>(stream));
  if (it == s.events.end()) return;
  cudaEventDestroy(it->second);
  s.events.erase(it);
}

void cuda_join_side_streams() {
  auto compute = static_cast<cudaStream_t>(cuda_compute_stream());
  SideStreams& s = side_streams();
  std::lock_guard lock(s.mutex);
  for (auto& [stream, event] : s.events) {
    SEXTANT_CHECK_CUDA(cudaEventRecord(event, stream));
    SEXTANT_CHECK_CUDA(cudaStreamWaitEvent(compute, event, 0));
  }
}

CudaRegionTimer::CudaRegionTimer(bool join_side_streams) : join_side_streams_(join_side_streams) {
  cudaEvent_t a = nullptr, b = nullptr;
  SEXTANT_CHECK_CUDA(cudaEventCreate(&a));
  SEXTANT_CHECK_CUDA(cudaEventCreate(&b));
  start_ = a;
  stop_ = b;
}

CudaRegionTimer::~CudaRegionTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void CudaRegionTimer::start() {
  SEXTANT_CHECK_CUDA(
      cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(cuda_compute_stream())));
}

double CudaRegionTimer::stop() {
  if (join_side_streams_) cuda_join_side_streams();
  auto end = static_cast<cudaEvent_t>(stop_);
  SEXTANT_CHECK_CUDA(cudaEventRecord(end, static_cast<cudaStream_t>(cuda_compute_stream())));
  SEXTANT_CHECK_CUDA(cudaEventSynchronize(end));
  float ms = 0;
  SEXTANT_CHECK_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), end));
  return 1e-3 * ms;
}

void* cuda_record_event() {
  cudaEvent_t event = nullptr;
  SEXTANT_CHECK_CUDA(cudaEventCreate(&event));
  SEXTANT_CHECK_CUDA(cudaEventRecord(event, static_cast<cudaStream_t>(cuda_compute_stream())));
  return event;
}

double cuda_event_seconds(void* from, void* to) {
  SEXTANT_CHECK_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(to)));
  float ms = 0;
  SEXTANT_CHECK_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
  return 1e-3 * ms;
}

void cuda_destroy_event(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

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
    d.peak_source = d.peak_tflops > 0 ? "table: dense bf16 (vendor data sheets)" : "unknown: pass --peak-tflops";
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
