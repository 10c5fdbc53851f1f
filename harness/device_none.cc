// Host-only build: every CUDA request is a clear error instead of a crash.
#include "harness/device.h"
#include "harness/error.h"

namespace sextant {

namespace {
[[noreturn]] void no_cuda() {
  throw UsageError(
      "--device cuda needs a CUDA build: this sextant was built without CUDA (SEXTANT_CUDA=OFF or no nvcc)");
}
}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
double cuda_free_memory() { return 0; }
double cuda_used_memory() { return -1; }
double cuda_pool_peak_memory() { return -1; }
void cuda_reset_pool_peak() {}
void* cuda_malloc(size_t) { no_cuda(); }
void cuda_free(void*) {}
bool cuda_async_allocation() { return false; }
void cuda_copy(void*, const void*, size_t) { no_cuda(); }
void cuda_copy_2d(void*, size_t, const void*, size_t, size_t, size_t) { no_cuda(); }
void cuda_convert(void*, DType, const void*, DType, size_t) { no_cuda(); }
void cuda_memset_zero(void*, size_t) { no_cuda(); }
void cuda_synchronize() {}
bool is_device_pointer(const void*) { return false; }
void cuda_set_device(int) { no_cuda(); }
int cuda_current_device() { no_cuda(); }
std::string cuda_device_uuid() { no_cuda(); }
void* cuda_compute_stream() { no_cuda(); }
void cuda_register_side_stream(void*) { no_cuda(); }
void cuda_unregister_side_stream(void*) {}
void cuda_join_side_streams() {}
void* cuda_record_event() { no_cuda(); }
double cuda_event_seconds(void*, void*) { no_cuda(); }
void cuda_destroy_event(void*) {}
CudaRegionTimer::CudaRegionTimer(bool) { no_cuda(); }
CudaRegionTimer::~CudaRegionTimer() = default;
void CudaRegionTimer::start() { no_cuda(); }
double CudaRegionTimer::stop() { no_cuda(); }

}  // namespace sextant

#include "harness/peaks.h"

namespace sextant {
std::vector<DeviceInfo> describe_cuda_devices() { return {}; }
std::map<std::string, std::string> cuda_versions() { return {}; }
}  // namespace sextant
