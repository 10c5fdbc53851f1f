// The few device-memory primitives the harness needs. Implemented with the
// CUDA runtime in CUDA builds (device_cuda.cc) and as clear errors otherwise
// (device_none.cc), so host code never includes CUDA headers.
#pragma once

#include <cstddef>
#include <string>

#include "harness/dtype.h"

namespace sextant {

enum class Device { host, cuda };

std::string device_name(Device device);        // "host", "cuda"
Device parse_device(const std::string& name);  // throws UsageError

bool cuda_built();          // compiled with the CUDA path
int cuda_device_count();    // 0 when not built or no GPU/driver
double cuda_free_memory();  // bytes free on the current device (cudaMemGetInfo); 0 when unknown
// Device memory. By default cudaMalloc / cudaFree (whose free waits for the
// whole device). SEXTANT_CUDA_ALLOC=async switches the process to
// stream-ordered allocations on the compute stream from a pool that keeps
// its memory (cudaMallocAsync / cudaFreeAsync): no device-wide wait per
// temporary. Opt-in until measured on a GPU; it relies on what the
// communicators already do: the compute stream waits for a transfer before
// its request completes, so a buffer is only freed once no stream uses it.
void* cuda_malloc(size_t bytes);
void cuda_free(void* ptr);
bool cuda_async_allocation();  // SEXTANT_CUDA_ALLOC=async
// The device's own view of memory, beside sextant's tensor accounting
// (memory_use.h), which misses library workspaces: bytes in use on the
// current device now (cudaMemGetInfo: total - free, every process and the
// context included), and the most the allocation pool has handed out since
// the last reset (cudaMemPoolAttrUsedMemHigh; -1 with cudaMalloc, which
// keeps no peak). Both -1 where unknown (no CUDA).
double cuda_used_memory();
double cuda_pool_peak_memory();
void cuda_reset_pool_peak();
void cuda_copy(void* dst, const void* src, size_t bytes);  // any direction, synchronous
// Copies `height` rows of `width` bytes, row i from src + i * src_pitch to
// dst + i * dst_pitch (cudaMemcpy2D), either side on the host or the device:
// the strided copy behind narrow / write_slice of device tensors. Device to
// device it is queued on the compute stream (ordered with the ops, no host
// wait); with a host side it returns when the copy is done.
void cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height);
// Converts n device elements from src_dtype to dst_dtype on the compute
// stream, rounding as the host's Tensor::to does (through double, then
// float for the 16-bit types, each step to nearest even). device_convert.cu.
void cuda_convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, size_t n);
void cuda_memset_zero(void* ptr, size_t bytes);
void cuda_synchronize();
// Whether ptr is device memory (false in host-only builds).
bool is_device_pointer(const void* ptr);

// The GPU this process uses (cudaSetDevice); one per process, chosen before
// the first allocation (app/commands.cc: node-local rank % visible GPUs).
void cuda_set_device(int index);
int cuda_current_device();
// The 16-byte UUID of the current device (tells physical GPUs apart when
// each rank sees a different CUDA_VISIBLE_DEVICES).
std::string cuda_device_uuid();

// Streams, as opaque cudaStream_t handles so host code needs no CUDA header.
// The compute stream (per thread, current device) is where every op runs
// (kernels/ops/cuda/cuda_common.h wraps it). It is a blocking stream, so the
// synchronous copies of the harness (legacy default stream) order with it.
void* cuda_compute_stream();
// Side streams (a communicator's own stream) whose work a timed region must
// include. cuda_join_side_streams makes the compute stream wait for all work
// issued on them so far (no host wait).
void cuda_register_side_stream(void* stream);
void cuda_unregister_side_stream(void* stream);
void cuda_join_side_streams();

// A CUDA event recorded now on the compute stream (an opaque cudaEvent_t);
// the seconds between two recorded events, waiting for the later one; its
// release. Throw in builds without CUDA.
void* cuda_record_event();
double cuda_event_seconds(void* from, void* to);
void cuda_destroy_event(void* event);

// Times one region of GPU work with a pair of CUDA events on the compute
// stream. stop() first joins
// the side streams, so communication issued in the region is counted, then
// waits for the end event; with join_side_streams false it times the compute
// stream's own work only (a kernel's compute time while communication is in
// flight beside it). Throws in builds without CUDA.
class CudaRegionTimer {
 public:
  explicit CudaRegionTimer(bool join_side_streams = true);
  ~CudaRegionTimer();
  CudaRegionTimer(const CudaRegionTimer&) = delete;
  CudaRegionTimer& operator=(const CudaRegionTimer&) = delete;
  void start();
  double stop();  // seconds from start() until all work issued since is done

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
  bool join_side_streams_ = true;
};

}  // namespace sextant
