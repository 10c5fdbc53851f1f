// Host-only build: every CUDA request is a clear error instead of a crash.
#include "harness/device.h"
#include "harness/error.h"

namespace sextant {

namespace {
[[noreturn]] void no_cuda() {
  throw UsageError("--device cuda needs a CUDA build: this sextant was built without CUDA (SEXTANT_CUDA=OFF or no nvcc)");
}
}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
void* cuda_malloc(size_t) { no_cuda(); }
void cuda_free(void*) {}
void cuda_copy(void*, const void*, size_t) { no_cuda(); }
void cuda_memset_zero(void*, size_t) { no_cuda(); }
void cuda_synchronize() {}
bool is_device_pointer(const void*) { return false; }

}  // namespace sextant

#include "harness/peaks.h"

namespace sextant {
std::vector<DeviceInfo> describe_cuda_devices() { return {}; }
std::map<std::string, std::string> cuda_versions() { return {}; }
}  // namespace sextant
