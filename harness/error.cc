#include "harness/error.h"

#include "harness/strings.h"

namespace sextant {

void require_divides(std::string_view a_name, int64_t a, std::string_view b_name, int64_t b) {
  require_positive(a_name, a);
  if (b % a != 0) throw UsageError(cat(a_name, " ", a, " must divide ", b_name, " ", b));
}

void require_positive(std::string_view name, int64_t value) {
  if (value <= 0) throw UsageError(cat(name, " ", value, " must be positive"));
}

}  // namespace sextant
