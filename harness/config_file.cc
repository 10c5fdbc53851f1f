#include "harness/config_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

std::string normalized(std::string key) {
  for (char& c : key) c = c == '-' ? '_' : c;
  return key;
}

// A scalar TOML value as JSON, or null for anything else.
nlohmann::json scalar(const toml::node& node) {
  if (auto v = node.as_string()) return v->get();
  if (auto v = node.as_integer()) return v->get();
  if (auto v = node.as_floating_point()) return v->get();
  if (auto v = node.as_boolean()) return v->get();
  return nullptr;
}

nlohmann::json value_of(const toml::node& node, const std::string& source) {
  if (auto array = node.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const toml::node& item : *array) {
      nlohmann::json v = scalar(item);
      require(!v.is_null(), cat(source, ": array items must be strings, numbers or booleans"));
      out.push_back(v);
    }
    return out;
  }
  nlohmann::json v = scalar(node);
  require(!v.is_null(), cat(source, ": must be a string, number, boolean or array of those"));
  return v;
}

}  // namespace

std::vector<ConfigEntry> read_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require(fs::is_regular_file(path, ec), cat("--config '", path, "' is not a readable file"));
  std::ifstream in(path, std::ios::binary);
  require(in.good(), cat("--config '", path, "' is not a readable file"));
  std::ostringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  require(content.find('\0') == std::string::npos, cat("--config '", path, "' is not a text file"));
  toml::table table;
  try {
    table = toml::parse(content, path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UsageError(
        cat("--config '", path, "': line ", where.line, ", column ", where.column, ": ", std::string(e.description())));
  }
  std::vector<ConfigEntry> out;
  for (const auto& [key, node] : table) {
    const std::string name = normalized(std::string(key.str()));
    if (auto set = node.as_table()) {
      require(name == "set", cat("--config '", path, "': table [", name, "] is not known (only [set] is)"));
      for (const auto& [option, value] : *set) {
        const std::string source = cat(path, ": set.", option.str());
        out.push_back({normalized(std::string(option.str())), value_of(value, source), source});
      }
      continue;
    }
    const std::string source = cat(path, ": ", name);
    out.push_back({name, value_of(node, source), source});
  }
  return out;
}

}  // namespace sextant
