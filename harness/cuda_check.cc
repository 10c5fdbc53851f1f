#include "harness/cuda_check.h"

#include <filesystem>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky launch error so that the next check reports its own
  throw RuntimeError(cat(what, " failed at ", std::filesystem::path(file).filename().string(), ":", line, ": ",
                         cudaGetErrorString(status)));
}

}  // namespace sextant
