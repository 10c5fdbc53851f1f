// Error types shared by every layer. Library code throws; only app/ decides
// exit codes (UsageError -> 2, anything else -> 1).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sextant {

// Bad input from the user (flags, config files, shapes that do not fit the
// parallel config). The message is one line naming the parameter and the rule,
// e.g. "--tp 3 must divide --heads 8".
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // Optional multi-line context printed after the message (e.g. a pipeline
  // schedule grid with the failing step marked).
  virtual std::string details() const { return {}; }
};

// Something failed while running (MPI/NCCL/CUDA call, I/O, broken invariant).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError(message) unless ok.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

// Throws "<a_name> <a> must divide <b_name> <b>" unless a divides b (a > 0).
void require_divides(std::string_view a_name, int64_t a, std::string_view b_name, int64_t b);

// Throws "<name> <value> must be positive" unless value > 0.
void require_positive(std::string_view name, int64_t value);

}  // namespace sextant
