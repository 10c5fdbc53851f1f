// Declared case options. Each case lists the options it reads (name, type,
// range or choices, one line of help); every value a user gives, whether by
// a typed flag (--seq 64), by --set key=value or from a --config file, goes
// through parse_option() against that declaration. Unknown keys, wrong types,
// non-finite numbers, non-integral integers and out-of-range values are
// refused with one line naming the key and the rule, before anything runs.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sextant {

enum class OptionType { integer, number, boolean, text, choice, bytes };

struct OptionSpec {
  std::string name{};  // the key (--set name=...; the flag --name with '_' as '-')
  OptionType type = OptionType::text;
  std::string help{};
  double min = std::numeric_limits<double>::lowest();  // integer, number, bytes: inclusive range
  double max = std::numeric_limits<double>::max();
  std::vector<std::string> choices{};  // choice

  static OptionSpec integer(std::string name, int64_t min, int64_t max, std::string help);
  static OptionSpec number(std::string name, double min, double max, std::string help);
  static OptionSpec boolean(std::string name, std::string help);
  static OptionSpec text(std::string name, std::string help);
  static OptionSpec choice(std::string name, std::vector<std::string> choices, std::string help);
  static OptionSpec bytes(std::string name, int64_t min, int64_t max, std::string help);
  // A problem dimension: an integer in [1, kMaxDimension].
  static OptionSpec size(std::string name, std::string help);

  // "integer in [1, 1048576]", "one of p2p, a2a", ...: the rule a value must meet.
  std::string rule() const;
};

// The peak TFLOP/s per device MFU divides by (--peak-tflops).
OptionSpec peak_tflops_option();

// Sizes past this are refused by every integer size option: products of a
// few of them still fit an int64, and no host holds more elements anyway.
inline constexpr int64_t kMaxDimension = int64_t{1} << 31;

// Where a value came from, for messages: "--seq", "--set seq", "config.toml: seq".
// text: the value as written. Returns the typed JSON value or throws
// UsageError "--set seq=abc: seq must be an integer in [1, 2147483648]".
nlohmann::json parse_option(const OptionSpec& spec, const std::string& text, const std::string& source);
// The same for a value that arrives typed (a TOML number, boolean or string).
nlohmann::json check_option(const OptionSpec& spec, const nlohmann::json& value, const std::string& source);

// The declared option of that name among `specs`, or null.
const OptionSpec* find_option(const std::vector<OptionSpec>& specs, const std::string& name);
// " (did you mean 'seq'?)" for the closest known name within a small edit
// distance, "" when none is close.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& known);

}  // namespace sextant
