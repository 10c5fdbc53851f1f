#include "harness/device.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

std::string device_name(Device device) { return device == Device::host ? "host" : "cuda"; }

Device parse_device(const std::string& name) {
  // cpu and gpu are accepted as the same devices.
  if (std::optional<Device> d = find_named<Device>(
          {{"host", Device::host}, {"cpu", Device::host}, {"cuda", Device::cuda}, {"gpu", Device::cuda}}, name))
    return *d;
  throw UsageError(cat("--device '", name, "' must be host or cuda"));
}

}  // namespace sextant
