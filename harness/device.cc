#include "harness/device.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

std::string device_name(Device device) { return device == Device::host ? "host" : "cuda"; }

Device parse_device(const std::string& name) {
  if (name == "host" || name == "cpu") return Device::host;
  if (name == "cuda" || name == "gpu") return Device::cuda;
  throw UsageError(cat("--device '", name, "' must be host or cuda"));
}

}  // namespace sextant
