#include "harness/suspects.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"

namespace sextant {

const std::vector<SuspectRule>& suspect_rules() {
  // Effects are the smallest loss worth a ticket; MAD multiples keep a
  // clean run (measured: docs/SCREEN.md) from naming its ordinary spread.
  static const std::vector<SuspectRule> rules = {
      {"tflops", "tflops", RuleDevice::cuda, 0.25, 3, Worse::lower,
       "GPUs of one SKU run one gemm within a few percent; a quarter slower is a throttled or degraded device"},
      {"tflops", "tflops", RuleDevice::host, 0.6, 3, Worse::lower,
       "ranks oversubscribing a host's cores, timed by CPU seconds (a shared VM's steal time, its cores' slow "
       "phases and shared caches count in them): clean ranks measured 0.67, 0.56 and 0.47 x their class, so only "
       "a rank below 0.4 is named"},
      {"p2p_bandwidth_GBps", "p2p_bandwidth", RuleDevice::cuda, 0.5, 3, Worse::lower,
       "links of one class (same node, other node) carry the same message at similar speed; half the class median "
       "is a degraded link (a PCIe link at half width, a NIC at half rate), not noise"},
      {"p2p_bandwidth_GBps", "p2p_bandwidth", RuleDevice::host, 0.8, 3, Worse::lower,
       "ranks oversubscribing a host's cores: a pair that shares one core measured 0.37 x its class median in clean "
       "runs, so only a link at a fifth of its class is named"},
      {"p2p_latency_us", "p2p_latency", RuleDevice::cuda, 0.5, 3, Worse::higher,
       "a round trip twice the class median is a congested or mis-routed link"},
      {"p2p_latency_us", "p2p_latency", RuleDevice::host, 0.95, 3, Worse::higher,
       "a round trip needs both ranks on a core: with a compile sharing the host, clean round trips measured 9 x "
       "their class median, so only a link 20 x its class is named (a planted 5 ms delay is 500 x)"},
      {"node_busbw_GBps", "node_busbw", RuleDevice::any, 0.25, 3, Worse::lower,
       "nodes of the same size run the same all_reduce at the same bus bandwidth; a quarter below is a slow node"},
  };
  return rules;
}

const SuspectRule& suspect_rule(const std::string& figure, Device device) {
  const RuleDevice kind = device == Device::host ? RuleDevice::host : RuleDevice::cuda;
  for (const SuspectRule& r : suspect_rules())
    if (figure == r.figure && (r.device == RuleDevice::any || r.device == kind)) return r;
  throw RuntimeError(cat("no suspect rule for '", figure, "' on ", device_name(device)));
}

std::string rule_device_name(RuleDevice d) {
  switch (d) {
    case RuleDevice::host: return "host";
    case RuleDevice::cuda: return "cuda";
    default: return "any";
  }
}

bool is_suspect_rule_key(const std::string& key) {
  for (const SuspectRule& r : suspect_rules())
    if (r.key == key) return true;
  return false;
}

std::vector<std::string> suspect_rule_keys() {
  std::vector<std::string> keys;
  for (const SuspectRule& r : suspect_rules())
    if (std::find(keys.begin(), keys.end(), r.key) == keys.end()) keys.push_back(r.key);
  return keys;
}

std::vector<OptionSpec> suspect_rule_options(const std::vector<std::string>& figures) {
  std::vector<OptionSpec> out;
  for (const std::string& figure : figures) {
    const SuspectRule& r = suspect_rule(figure, Device::host);
    out.push_back(OptionSpec::number(r.key + "_effect", 0.01, 0.99,
                                     cat("the smallest effect (fraction of the class median) that names a ", figure,
                                         " suspect; default: the rule table's (sextant list --tolerances)")));
    out.push_back(OptionSpec::number(
        r.key + "_mad_k", 0, 1000,
        cat("how many scaled MADs of its class a ", figure, " suspect must lie beyond; default: the rule table's")));
  }
  return out;
}

SuspectRule configured_rule(const std::string& figure, Device device, const nlohmann::json& params) {
  SuspectRule r = suspect_rule(figure, device);
  const std::string effect = r.key + "_effect", mad_k = r.key + "_mad_k";
  if (!params.contains(effect) && !params.contains(mad_k)) return r;
  const double table_effect = r.min_effect, table_mad_k = r.mad_k;
  if (params.contains(effect)) r.min_effect = params.at(effect).get<double>();
  if (params.contains(mad_k)) r.mad_k = params.at(mad_k).get<double>();
  r.reason = cat("set for this run (", effect, " ", r.min_effect, ", ", mad_k, " ", r.mad_k,
                 "; the table's: ", table_effect, ", ", table_mad_k, ")");
  return r;
}

std::string describe_rule(const SuspectRule& r) {
  const bool low = r.worse == Worse::lower;
  return cat(r.figure, low ? " below " : " above ", low ? 1 - r.min_effect : 1 / (1 - r.min_effect),
             " x the class median and ", r.mad_k, " scaled MAD ", low ? "below" : "above", " it");
}

std::vector<Outlier> outliers(const std::vector<double>& values, const std::vector<std::string>& classes,
                              const SuspectRule& r) {
  require(values.size() == classes.size(), "outliers: one class per value");
  std::map<std::string, std::vector<double>> by_class;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] >= 0) by_class[classes[i]].push_back(values[i]);
  std::vector<Outlier> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) continue;
    const std::vector<double>& peers = by_class[classes[i]];
    if (peers.size() < 3) continue;  // two members: no majority to say which one is slow
    // Two passes: the members within the effect of the whole class's median
    // are its healthy part, and the verdict is against their median and
    // spread. A bad node holds 2/N of the other-node links; counted in, they
    // would drag the median and inflate the MAD until they hid themselves.
    auto worse_than = [&](double v, double median) {
      return r.worse == Worse::lower ? v < (1 - r.min_effect) * median : v * (1 - r.min_effect) > median;
    };
    const double all_median = percentile_of(peers, 0.5);
    std::vector<double> healthy;
    for (double v : peers)
      if (!worse_than(v, all_median)) healthy.push_back(v);
    const double median = percentile_of(healthy, 0.5);
    std::vector<double> deviations;
    for (double v : healthy) deviations.push_back(std::abs(v - median));
    const double mad = percentile_of(deviations, 0.5);
    const double gap = r.worse == Worse::lower ? median - values[i] : values[i] - median;
    const bool effect = worse_than(values[i], median);
    const bool spread = gap > r.mad_k * 1.4826 * mad;
    if (effect && spread) out.push_back({i, values[i], median, mad, classes[i]});
  }
  return out;
}

}  // namespace sextant
