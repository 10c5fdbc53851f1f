#include "app/commands.h"

#include "harness/error.h"

namespace sextant {

CommFactory make_comm_factory(Device device) {
  if (device == Device::host) return {};
  throw UsageError("--device cuda is not available yet in this build");
}

void add_extra_commands(CLI::App&) {}

int run_extra_command(CLI::App&) { return 0; }

}  // namespace sextant
