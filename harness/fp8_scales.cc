#include "harness/fp8_scales.h"

#include <bit>
#include <cstdint>
#include <map>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

void check_fp8_scales(Checker& checker, const std::vector<std::string>& all_names, const Fp8Scales& mine,
                      const Fp8Scales& base) {
  if (mine.names.size() != mine.values.size() || (checker.is_root() && base.values.size() != all_names.size()))
    throw RuntimeError(cat("check_fp8_scales: ", mine.names.size(), " names beside ", mine.values.size(),
                           " scales, and ", base.values.size(), " baseline scales for ", all_names.size(), " names"));
  std::vector<float> expected = checker.is_root() ? base.values : std::vector<float>(all_names.size());
  checker.comm().broadcast(expected.data(), expected.size(), DType::f32, 0);
  std::map<std::string, float> by_name;
  for (size_t i = 0; i < all_names.size(); ++i) by_name[all_names[i]] = expected[i];
  int64_t wrong = 0;
  for (size_t i = 0; i < mine.names.size(); ++i) {
    const auto it = by_name.find(mine.names[i]);
    if (it == by_name.end()) throw RuntimeError(cat("check_fp8_scales: no baseline scale named ", mine.names[i]));
    if (std::bit_cast<uint32_t>(mine.values[i]) == std::bit_cast<uint32_t>(it->second)) continue;
    if (wrong++ == 0)
      checker.fail(cat("fp8_scales: ", mine.names[i], " decodes with ", mine.values[i], " on rank ",
                       checker.comm().rank(), ", the one-rank run with ", it->second));
  }
  checker.exact("fp8_scales", wrong, static_cast<int64_t>(mine.names.size()));
  if (checker.is_root()) {
    nlohmann::json scales = nlohmann::json::object();
    for (size_t i = 0; i < all_names.size(); ++i) scales[all_names[i]] = expected[i];
    checker.note("fp8_scale_inv", scales);
  }
}

}  // namespace sextant
