#include "harness/strings.h"

#include <cmath>
#include <cstdlib>

#include "harness/error.h"

namespace sextant {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  std::string item;
  std::istringstream is(text);
  while (std::getline(is, item, sep)) out.push_back(item);
  if (text.back() == sep) out.emplace_back();
  return out;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4 && std::fmod(bytes, 1024) == 0) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream os;
  os << bytes << (u ? units[u] : "");
  return os.str();
}

int64_t parse_bytes(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string suffix(end ? end : "");
  const std::optional<double> unit = find_named<double>({{"", 1},
                                                         {"B", 1},
                                                         {"K", 1024.0},
                                                         {"k", 1024.0},
                                                         {"M", 1024.0 * 1024},
                                                         {"m", 1024.0 * 1024},
                                                         {"G", 1024.0 * 1024 * 1024},
                                                         {"g", 1024.0 * 1024 * 1024}},
                                                        suffix);
  const double scale = unit.value_or(1);
  if (!unit) value = -1;
  const double bytes = value * scale;
  if (text.empty() || end == text.c_str() || !std::isfinite(bytes) || bytes < 0 || bytes != std::floor(bytes) ||
      bytes >= 9.2e18)
    throw UsageError(cat(what, " '", text, "' is not a byte count (e.g. 64, 4K, 1M, 2G)"));
  return static_cast<int64_t>(value * scale);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace sextant
