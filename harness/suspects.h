// Suspects: the rule that names a rank, link or node as worse than its
// class. A member is a suspect when its figure is worse than its class's
// median by at least a minimum effect AND by more than a multiple of the
// class's spread (the median absolute deviation, MAD, scaled by 1.4826 to
// estimate a standard deviation, as in Hampel's outlier filter) measured in
// the same run. Median and MAD are those of the class's healthy part: the
// members within the effect of the whole class's median. The effect keeps a tight, clean class from naming anyone for
// a tiny difference; the MAD keeps a noisy class from naming its ordinary
// spread. One table of rules, each with its reason (like tolerance.h);
// `sextant list --tolerances` prints it and docs/SCREEN.md shows it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/device.h"
#include "harness/options.h"

namespace sextant {

enum class Worse { lower, higher };  // which way a figure is bad (bandwidth: lower)

// Where a rule applies: a figure may need another effect on hosts, whose
// ranks share cores, than on GPUs.
enum class RuleDevice { any, host, cuda };

struct SuspectRule {
  std::string figure;  // what is judged, e.g. "tflops"
  // The name a run overrides it by: options <key>_effect and <key>_mad_k
  // (--set; qualify sets them from the expectations file's [suspects.<key>]).
  std::string key;
  RuleDevice device;
  double min_effect;  // worse than the class median by at least this fraction
  double mad_k;       // and by more than mad_k scaled MADs (1.4826 MAD: sigma for normal data)
  Worse worse;
  std::string reason;  // why these values
};
// Every rule, one row per judged figure and device.
const std::vector<SuspectRule>& suspect_rules();
// The rule of `figure` on `device` (RuntimeError for an unknown figure).
const SuspectRule& suspect_rule(const std::string& figure, Device device);
std::string rule_device_name(RuleDevice d);  // "any", "host", "cuda"
// Whether `key` names a rule (of any device).
bool is_suspect_rule_key(const std::string& key);
std::vector<std::string> suspect_rule_keys();

// The options that override the rules of `figures` for one run:
// <key>_effect and <key>_mad_k of each.
std::vector<OptionSpec> suspect_rule_options(const std::vector<std::string>& figures);
// The rule a case is judged by: the table's, with <key>_effect and
// <key>_mad_k taken from `params` where they are set (the reason then says
// so, and what the table's values were).
SuspectRule configured_rule(const std::string& figure, Device device, const nlohmann::json& params);

struct Outlier {
  size_t index = 0;  // into the values judged
  double value = 0, class_median = 0, mad = 0;
  std::string class_name;
};
// The values that break `rule` against their class (values of the same
// class string). Negative values are unmeasured and neither judged nor
// counted. Median and MAD are the healthy members' (see the file comment),
// so that a minority of bad members (up to nearly half) cannot hide itself
// by dragging the median and inflating the MAD. A class of fewer than 3
// names nobody: of two, neither is the majority.
std::vector<Outlier> outliers(const std::vector<double>& values, const std::vector<std::string>& classes,
                              const SuspectRule& rule);
// The rule as one line, e.g. "tflops below 0.75 x the class median and 5 scaled MAD below it".
std::string describe_rule(const SuspectRule& rule);

}  // namespace sextant
