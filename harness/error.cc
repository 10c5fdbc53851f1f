#include "harness/error.h"

#include <string>

namespace sextant {

void require_divides(std::string_view a_name, int64_t a, std::string_view b_name, int64_t b) {
  require_positive(a_name, a);
  if (b % a != 0)
    throw UsageError(std::string(a_name) + " " + std::to_string(a) + " must divide " + std::string(b_name) + " " +
                     std::to_string(b));
}

void require_positive(std::string_view name, int64_t value) {
  if (value <= 0) throw UsageError(std::string(name) + " " + std::to_string(value) + " must be positive");
}

}  // namespace sextant
