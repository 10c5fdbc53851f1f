#include "harness/suspects.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

TEST(Outliers, NamesOnlyTheSlowMemberOfItsClass) {
  const SuspectRule& r = suspect_rule("tflops", Device::host);
  const std::vector<std::string> host(8, "host");
  std::vector<double> v = {1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.3};
  const auto found = outliers(v, host, r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].index, 7u);
  EXPECT_NEAR(found[0].class_median, 1.0, 0.011);
  // A clean class with ordinary spread names nobody.
  v.back() = 0.9;
  EXPECT_TRUE(outliers(v, host, r).empty());
}

TEST(Outliers, NoisyClassNeedsMoreThanTheEffect) {
  // 30% below the median, but the class spreads that much anyway.
  const std::vector<double> v = {1.0, 0.7, 1.3, 0.72, 1.25, 0.95, 1.1, 0.69};
  EXPECT_TRUE(outliers(v, std::vector<std::string>(8, "host"), suspect_rule("tflops", Device::host)).empty());
}

TEST(Outliers, ClassesAreJudgedApartAndUnmeasuredIsSkipped) {
  const SuspectRule& r = suspect_rule("p2p_bandwidth_GBps", Device::host);
  // Same-node links are ten times the other-node ones: neither class is slow.
  const std::vector<double> v = {10, 10.5, 9.8, 1.0, 1.1, 0.98, -1, 0.1};
  const std::vector<std::string> c = {"same", "same", "same", "other", "other", "other", "other", "other"};
  const auto found = outliers(v, c, r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].index, 7u);
  EXPECT_EQ(found[0].class_name, "other");
}

TEST(Outliers, AMinorityOfBadMembersDoesNotHideBehindItsOwnSpread) {
  // One slow node among five: 8 of the 20 directed other-node links (40%).
  std::vector<double> v = {0.34, 0.29, 0.28, 0.39, 0.25, 0.29, 0.27, 0.28, 0.31, 0.40, 0.28, 0.35};
  v.insert(v.end(), 8, 0.006);
  const auto found =
      outliers(v, std::vector<std::string>(v.size(), "other_node"), suspect_rule("p2p_bandwidth_GBps", Device::host));
  ASSERT_EQ(found.size(), 8u);
  for (const Outlier& o : found) EXPECT_GE(o.index, 12u);
}

TEST(Outliers, HigherIsWorseForLatency) {
  const std::vector<double> v = {10, 11, 10.5, 9.5, 400};
  const auto found = outliers(v, std::vector<std::string>(5, "x"), suspect_rule("p2p_latency_us", Device::host));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].index, 4u);
}

TEST(Outliers, FewerThanThreeMembersNameNobody) {
  const SuspectRule& r = suspect_rule("tflops", Device::host);
  EXPECT_TRUE(outliers({1.0, 0.1}, {"x", "x"}, r).empty());
  EXPECT_TRUE(outliers({0.1}, {"x"}, r).empty());
  EXPECT_EQ(outliers({1.0, 1.0, 0.1}, {"x", "x", "x"}, r).size(), 1u);
}

TEST(SuspectRules, EveryRuleHasAReasonAndAnEffectBelowOne) {
  for (const SuspectRule& r : suspect_rules()) {
    EXPECT_GT(r.min_effect, 0) << r.figure;
    EXPECT_LT(r.min_effect, 1) << r.figure;
    EXPECT_GE(r.mad_k, 1) << r.figure;
    EXPECT_GT(std::string(r.reason).size(), 20u) << r.figure;
    if (r.device != RuleDevice::cuda) {
      EXPECT_EQ(&suspect_rule(r.figure, Device::host), &r);
    }
    if (r.device != RuleDevice::host) {
      EXPECT_EQ(&suspect_rule(r.figure, Device::cuda), &r);
    }
  }
  EXPECT_THROW(suspect_rule("tflopz", Device::host), RuntimeError);
  EXPECT_LT(suspect_rule("p2p_bandwidth_GBps", Device::cuda).min_effect,
            suspect_rule("p2p_bandwidth_GBps", Device::host).min_effect);
}

TEST(SuspectRules, ARunOverridesARuleByItsKeyAndSaysSo) {
  const SuspectRule& table = suspect_rule("p2p_latency_us", Device::host);
  EXPECT_EQ(configured_rule("p2p_latency_us", Device::host, nlohmann::json::object()).reason, table.reason);
  const SuspectRule r = configured_rule("p2p_latency_us", Device::host, {{"p2p_latency_effect", 0.6}, {"n", 3}});
  EXPECT_EQ(r.min_effect, 0.6);
  EXPECT_EQ(r.mad_k, table.mad_k);
  EXPECT_NE(r.reason.find("set for this run (p2p_latency_effect 0.6"), std::string::npos) << r.reason;
  // The override judges: a round trip 3 x its class is named at effect 0.6, not by the table's 0.95.
  const std::vector<double> v = {10, 10.2, 9.9, 10.1, 30};
  const std::vector<std::string> c(5, "same_node");
  EXPECT_TRUE(outliers(v, c, table).empty());
  ASSERT_EQ(outliers(v, c, r).size(), 1u);
  // Every figure's options, with the rule's key.
  std::vector<std::string> names;
  for (const OptionSpec& o : suspect_rule_options({"tflops", "node_busbw_GBps"})) names.push_back(o.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"tflops_effect", "tflops_mad_k", "node_busbw_effect", "node_busbw_mad_k"}));
  EXPECT_TRUE(is_suspect_rule_key("p2p_bandwidth"));
  EXPECT_FALSE(is_suspect_rule_key("p2p_bandwidth_GBps"));
}

}  // namespace
}  // namespace sextant
