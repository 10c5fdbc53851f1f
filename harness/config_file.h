// --config FILE: a TOML file of `sextant run` options. Top-level keys are
// the long flag names without dashes ("tp = 2", "profile = \"ci\"",
// "dtype = \"f32,bf16\"") or case options ("seq = 256", "causal = true");
// a [set] table holds case options too. Flags on the command line win.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sextant {

struct ConfigEntry {
  std::string key;       // flag or option name, '-' read as '_'
  nlohmann::json value;  // string, integer, float, boolean, or an array of those
  std::string source;    // "FILE: key", for messages
};

// Parses the file (toml++). UsageError with one line for an unreadable file,
// a directory, a syntax error (with its line and column), a nested table
// other than [set], or a value that is not a string, number, boolean or
// array of those.
std::vector<ConfigEntry> read_config(const std::string& path);

}  // namespace sextant
