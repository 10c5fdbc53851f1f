#include "harness/case.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

Registry two_suites() {
  Registry r;
  for (const char* suite : {"alpha", "beta"})
    for (const char* name : {"one", "two"}) {
      CaseTable<int> t;
      t.suite = suite;
      t.name = name;
      t.configs = [](const SweepRequest&) { return std::vector<CaseConfig>{}; };
      t.setup = [](CaseContext&) { return 0; };
      r.add(make_case(std::move(t)));
    }
  return r;
}

TEST(Registry, SelectsSuitesAndCasesAndNamesUnknownOnes) {
  Registry r = two_suites();
  EXPECT_EQ(r.select({}).size(), 4u);
  EXPECT_EQ(r.select({"beta"}).size(), 2u);
  EXPECT_EQ(r.select({"alpha/two"}).front()->full_name(), "alpha/two");
  try {
    r.select({"gamma"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown suite 'gamma': known suites are alpha, beta");
  }
  EXPECT_THROW(r.select({"alpha/three"}), UsageError);
  EXPECT_THROW(r.add(r.cases().front()), RuntimeError);
}

TEST(CaseConfig, IdIsStableAndReadable) {
  CaseConfig c;
  c.suite = "attention";
  c.name = "p2p";
  c.ranks = 4;
  c.parallel.cp = 4;
  c.params = {{"seq", 256}, {"causal", true}};
  EXPECT_EQ(c.id(), "attention/p2p ranks=4 f32 tp1-cp4-pp1-dp1 causal=true seq=256");
}

}  // namespace
}  // namespace sextant
