// Size presets of a run (--profile): every case picks its shapes and
// sweeps from it.
//   default  small: every suite at several rank counts on a CPU in minutes
//   ci       tiny: two shared cores, the test suites and CI
//   qualify  realistic: the sizes a vendor qualifies a cluster at (GPUs)
#pragma once

#include <string>
#include <vector>

namespace sextant {

enum class Profile { standard, ci, qualify };  // standard is the one named "default"

std::string profile_name(Profile p);  // "default", "ci", "qualify"
// UsageError "--profile 'x' must be default, ci or qualify".
Profile parse_profile(const std::string& name);
std::vector<std::string> profile_names();

}  // namespace sextant
