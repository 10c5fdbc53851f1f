// The few device-memory primitives the harness needs. Implemented with the
// CUDA runtime in CUDA builds (device_cuda.cc) and as clear errors otherwise
// (device_none.cc), so host code never includes CUDA headers.
#pragma once

#include <cstddef>
#include <string>

namespace sextant {

enum class Device { host, cuda };

std::string device_name(Device device);           // "host", "cuda"
Device parse_device(const std::string& name);     // throws UsageError

bool cuda_built();          // compiled with the CUDA path
int cuda_device_count();    // 0 when not built or no GPU/driver
void* cuda_malloc(size_t bytes);
void cuda_free(void* ptr);
void cuda_copy(void* dst, const void* src, size_t bytes);  // any direction, synchronous
void cuda_memset_zero(void* ptr, size_t bytes);
void cuda_synchronize();
// Whether ptr is device memory (false in host-only builds).
bool is_device_pointer(const void* ptr);

}  // namespace sextant
