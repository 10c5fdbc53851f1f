#include "kernels/ops/device_dispatch.h"

#include "harness/error.h"

namespace sextant::ops {

void no_cuda(const char* op) {
  throw UsageError(std::string("--device cuda: ") + op + " needs a CUDA build (this sextant was built without CUDA)");
}

}  // namespace sextant::ops
