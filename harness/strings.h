// Small string helpers (GCC 12 has no <format>).
#pragma once

#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace sextant {

// cat("--tp ", 3, " must divide ", 8) -> "--tp 3 must divide 8".
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// join({1, 2, 4}, ",") -> "1,2,4".
template <class T>
std::string join(const std::vector<T>& items, const std::string& sep) {
  std::ostringstream os;
  for (size_t i = 0; i < items.size(); ++i) os << (i ? sep : "") << items[i];
  return os.str();
}

// A small table of names and the values they stand for, for parsers:
//   find_named<int>({{"K", 1024}, {"M", 1 << 20}}, suffix)
template <class T>
struct Named {
  const char* name;
  T value;
};
template <class T>
std::optional<T> find_named(std::initializer_list<Named<T>> table, std::string_view name) {
  for (const Named<T>& n : table)
    if (name == n.name) return n.value;
  return std::nullopt;
}
// "a, b or c" of the table's names.
template <class T>
std::string named_choices(std::initializer_list<Named<T>> table) {
  std::string out;
  size_t i = 0;
  for (const Named<T>& n : table) {
    out += i == 0 ? "" : i + 1 == table.size() ? " or " : ", ";
    out += n.name;
    ++i;
  }
  return out;
}

// split("a,b", ',') -> {"a", "b"}; empty input gives {}.
std::vector<std::string> split(const std::string& text, char sep);

// Human-readable byte count: 1024 -> "1K", 3145728 -> "3M".
std::string format_bytes(double bytes);

// Parses "64", "4K", "1M", "2G" (powers of 1024). Throws UsageError naming `what`.
int64_t parse_bytes(const std::string& text, const std::string& what);

// Text safe inside XML and HTML elements and double-quoted attributes.
std::string xml_escape(const std::string& s);

}  // namespace sextant
