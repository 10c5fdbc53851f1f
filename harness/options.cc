#include "harness/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

OptionSpec OptionSpec::integer(std::string name, int64_t min, int64_t max, std::string help) {
  return {std::move(name),          OptionType::integer,      std::move(help),
          static_cast<double>(min), static_cast<double>(max), {}};
}
OptionSpec OptionSpec::number(std::string name, double min, double max, std::string help) {
  return {std::move(name), OptionType::number, std::move(help), min, max, {}};
}
OptionSpec OptionSpec::boolean(std::string name, std::string help) {
  return {std::move(name), OptionType::boolean, std::move(help)};
}
OptionSpec OptionSpec::text(std::string name, std::string help) {
  return {std::move(name), OptionType::text, std::move(help)};
}
OptionSpec OptionSpec::choice(std::string name, std::vector<std::string> choices, std::string help) {
  OptionSpec s{std::move(name), OptionType::choice, std::move(help)};
  s.choices = std::move(choices);
  return s;
}
OptionSpec OptionSpec::bytes(std::string name, int64_t min, int64_t max, std::string help) {
  return {std::move(name), OptionType::bytes, std::move(help), static_cast<double>(min), static_cast<double>(max), {}};
}

OptionSpec OptionSpec::size(std::string name, std::string help) {
  return integer(std::move(name), 1, kMaxDimension, std::move(help));
}

OptionSpec peak_tflops_option() {
  return OptionSpec::number("peak_tflops", 1e-6, 1e7, "peak TFLOP/s per device for MFU (default: device table)");
}

namespace {

std::string number_text(double x) {
  if (std::abs(x) < 9.2e18 && x == std::floor(x)) return std::to_string(static_cast<int64_t>(x));
  return cat(x);
}

std::string range_text(const OptionSpec& s) {
  const bool low = s.min > std::numeric_limits<double>::lowest(), high = s.max < std::numeric_limits<double>::max();
  if (low && high) return cat(" in [", number_text(s.min), ", ", number_text(s.max), "]");
  if (low) return cat(" >= ", number_text(s.min));
  if (high) return cat(" <= ", number_text(s.max));
  return "";
}

[[noreturn]] void refuse(const OptionSpec& spec, const std::string& text, const std::string& source) {
  throw UsageError(cat(source, " '", text, "' must be ", spec.rule()));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A whole-string finite double, or nothing.
std::optional<double> parse_double(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(x)) return std::nullopt;
  return x;
}

// A whole-string integer (digits, or an integral value such as 1e6), or nothing.
std::optional<int64_t> parse_integer(const std::string& text) {
  int64_t value = 0;
  const char* first = text.data() + (!text.empty() && text.front() == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, text.data() + text.size(), value);
  if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  const std::optional<double> x = parse_double(text);
  if (!x || *x != std::floor(*x) || std::abs(*x) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(*x);
}

bool in_range(const OptionSpec& s, double x) { return x >= s.min && x <= s.max; }

}  // namespace

std::string OptionSpec::rule() const {
  switch (type) {
    case OptionType::integer: return "an integer" + range_text(*this);
    case OptionType::number: return "a finite number" + range_text(*this);
    case OptionType::boolean: return "true or false";
    case OptionType::text: return "a non-empty value";
    case OptionType::choice: return "one of " + join(choices, ", ");
    case OptionType::bytes: return "a byte count such as 4K or 64M" + range_text(*this);
  }
  return "";
}

nlohmann::json parse_option(const OptionSpec& spec, const std::string& text, const std::string& source) {
  switch (spec.type) {
    case OptionType::integer: {
      const std::optional<int64_t> v = parse_integer(text);
      if (!v || !in_range(spec, static_cast<double>(*v))) refuse(spec, text, source);
      return *v;
    }
    case OptionType::number: {
      const std::optional<double> v = parse_double(text);
      if (!v || !in_range(spec, *v)) refuse(spec, text, source);
      return *v;
    }
    case OptionType::boolean: {
      const std::optional<bool> b = find_named<bool>({{"true", true},
                                                      {"1", true},
                                                      {"yes", true},
                                                      {"on", true},
                                                      {"false", false},
                                                      {"0", false},
                                                      {"no", false},
                                                      {"off", false}},
                                                     lower(text));
      if (!b) refuse(spec, text, source);
      return *b;
    }
    case OptionType::text:
      if (text.empty()) refuse(spec, text, source);
      return text;
    case OptionType::choice:
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) refuse(spec, text, source);
      return text;
    case OptionType::bytes: {
      int64_t v = 0;
      try {
        v = parse_bytes(text, source);
      } catch (const UsageError&) {
        refuse(spec, text, source);
      }
      if (!in_range(spec, static_cast<double>(v))) refuse(spec, text, source);
      return v;
    }
  }
  refuse(spec, text, source);
}

nlohmann::json check_option(const OptionSpec& spec, const nlohmann::json& value, const std::string& source) {
  if (value.is_string()) return parse_option(spec, value.get<std::string>(), source);
  if (value.is_boolean() && spec.type == OptionType::boolean) return value;
  if (value.is_number_float() && !std::isfinite(value.get<double>()))
    refuse(spec, std::isnan(value.get<double>()) ? "nan" : value.get<double>() > 0 ? "inf" : "-inf", source);
  if (value.is_number() &&
      (spec.type == OptionType::integer || spec.type == OptionType::number || spec.type == OptionType::bytes))
    return parse_option(spec, value.dump(), source);
  refuse(spec, value.dump(), source);
}

const OptionSpec* find_option(const std::vector<OptionSpec>& specs, const std::string& name) {
  for (const OptionSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string did_you_mean(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& k : known) {
    const size_t d = edit_distance(name, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  return best.empty() ? "" : cat(" (did you mean '", best, "'?)");
}

}  // namespace sextant
