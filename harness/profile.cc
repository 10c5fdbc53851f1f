#include "harness/profile.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
constexpr Profile kProfiles[] = {Profile::standard, Profile::ci, Profile::qualify};
}  // namespace

std::string profile_name(Profile p) {
  switch (p) {
    case Profile::standard: return "default";
    case Profile::ci: return "ci";
    case Profile::qualify: return "qualify";
  }
  return "?";
}

std::vector<std::string> profile_names() {
  std::vector<std::string> out;
  for (Profile p : kProfiles) out.push_back(profile_name(p));
  return out;
}

Profile parse_profile(const std::string& name) {
  for (Profile p : kProfiles)
    if (name == profile_name(p)) return p;
  throw UsageError(cat("--profile '", name, "' must be default, ci or qualify"));
}

}  // namespace sextant
