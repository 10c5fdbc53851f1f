#include "kernels/planner/calibration.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "kernels/planner/step_cost.h"

namespace sextant::plan {
namespace {

// Samples of t = 2 us + flops / 100 GFLOP/s + bytes / 20 GB/s are fitted back.
TEST(Calibration, GemmFitRecoversOverheadAndRates) {
  std::vector<GemmSample> samples;
  for (double m : {16.0, 256.0, 1024.0})
    for (double k : {32.0, 512.0}) {
      const double n = 128;
      samples.push_back({m, n, k, 2e-6 + 2 * m * n * k / 100e9 + 4 * (m * k + k * n + m * n) / 20e9});
    }
  const GemmModel g = fit_gemm(samples);
  EXPECT_NEAR(g.overhead_s, 2e-6, 1e-9);
  EXPECT_NEAR(g.flops_per_s, 100e9, 1e6);
  EXPECT_NEAR(g.bytes_per_s, 20e9, 1e5);
  // A measured shape answers with its own time; another with the fit.
  EXPECT_DOUBLE_EQ(g.seconds(16, 128, 32), samples[0].seconds);
  EXPECT_NEAR(g.seconds(64, 64, 64), 2e-6 + 2 * 64.0 * 64 * 64 / 100e9 + 4 * 3 * 64.0 * 64 / 20e9, 1e-12);
  EXPECT_EQ(g.seconds(0, 64, 64), 0);
  EXPECT_THROW(fit_gemm({}), UsageError);
}

// Coefficients stay non-negative: times that fall with size fit a rate, no
// negative overhead.
TEST(Calibration, RateFitIsNonNegative) {
  const RateModel r = fit_rate({{1e6, 1e-3}, {2e6, 2e-3}, {4e6, 4e-3}});
  EXPECT_NEAR(r.per_s, 1e9, 1e3);
  EXPECT_NEAR(r.overhead_s, 0, 1e-12);
  const RateModel odd = fit_rate({{1e3, 5e-3}, {1e6, 1e-3}});
  EXPECT_GE(odd.overhead_s, 0);
  EXPECT_GE(odd.per_s, 0);
  EXPECT_EQ(fit_rate({}).seconds(1e6), 0);
}

TEST(Calibration, LinksByOperationKindAndNearestSize) {
  Calibration c;
  c.links["all_reduce/intra/2"] = {1e-5, 1e9};
  c.links["all_reduce/intra/8"] = {3e-5, 1e9};
  c.links["all_reduce/inter/4"] = {5e-5, 1e8};
  EXPECT_DOUBLE_EQ(c.link("all_reduce", false, 2).latency_s, 1e-5);
  EXPECT_DOUBLE_EQ(c.link("all_reduce", false, 7).latency_s, 3e-5);  // nearest intra size
  EXPECT_DOUBLE_EQ(c.link("all_reduce", true, 16).latency_s, 5e-5);  // the only inter one
  EXPECT_DOUBLE_EQ(c.link("sendrecv", false, 2).latency_s, 0);       // not measured: free
  EXPECT_DOUBLE_EQ(c.collective_seconds("all_reduce", false, 1, 1e6), 0);
  // Bus bytes: 2(n-1)/n of the buffer for all_reduce.
  EXPECT_DOUBLE_EQ(c.collective_seconds("all_reduce", false, 2, 1e6), 1e-5 + 1e6 / 1e9);
  EXPECT_DOUBLE_EQ(bus_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("sendrecv", 4), 1.0);
}

TEST(Calibration, JsonRoundTrip) {
  Calibration c;
  c.source = "test";
  c.cores_per_node = 8;
  c.gemm = {1e-6, 5e10, 1e10, {{"1 2 3 0 0", 4e-6}}};
  c.attention = {2e-5, 3e10};
  c.elementwise = {1e-7, 2e10};
  c.moe_forward = {3e-6, 5e6}, c.moe_backward = {4e-6, 2e6};
  c.links["sendrecv/intra/2"] = {7e-6, 4e9};
  c.p2p_latency_s = 9e-6;
  c.reference_s = 2e-4;
  const Calibration d = nlohmann::json(c).get<Calibration>();
  // A calibration stored before the MoE routing was measured reads as unmeasured.
  nlohmann::json older = c;
  older.erase("moe_routing");
  EXPECT_EQ(older.get<Calibration>().moe_forward.per_s, 0);
  EXPECT_EQ(older.get<Calibration>().moe_backward.overhead_s, 0);
  EXPECT_EQ(d.source, "test");
  EXPECT_EQ(d.cores_per_node, 8);
  EXPECT_NEAR(d.gemm.flops_per_s, 5e10, 1);
  EXPECT_DOUBLE_EQ(d.gemm.seconds(1, 2, 3), 4e-6);
  EXPECT_NEAR(d.attention.per_s, 3e10, 1);
  EXPECT_DOUBLE_EQ(d.moe_forward.seconds(1e3), c.moe_forward.seconds(1e3));
  EXPECT_DOUBLE_EQ(d.moe_backward.seconds(1e3), c.moe_backward.seconds(1e3));
  EXPECT_NEAR(d.links.at("sendrecv/intra/2").busbw_Bps, 4e9, 1);
  EXPECT_DOUBLE_EQ(d.p2p_latency_s, 9e-6);
  EXPECT_DOUBLE_EQ(d.reference_s, 2e-4);
}

nlohmann::json record(const std::string& suite, const std::string& name, nlohmann::json params, nlohmann::json metrics,
                      const std::string& region, double seconds, const std::string& dtype = "f32") {
  return {{"suite", suite},
          {"case", name},
          {"params", params},
          {"parallel", {{"pp", 1}}},
          {"dtype", dtype},
          {"fault", nullptr},
          {"conformance", {{"status", "pass"}}},
          {"perf", {{"time", {{region, {{"median", seconds}}}}}, {"metrics", metrics}}}};
}

// From a run of the suites: gemm shapes, collectives per size and kind.
TEST(Calibration, FromSuiteResults) {
  nlohmann::json cases = nlohmann::json::array();
  for (double m : {64.0, 512.0})
    cases.push_back(record("ops", "gemm", {{"m", m}, {"n", 64}, {"k", 64}, {"trans_a", false}, {"trans_b", false}},
                           nlohmann::json::object(), "gemm", 1e-6 + 2 * m * 64 * 64 / 50e9));
  cases.push_back(
      record("ops", "gemm", {{"m", 64}, {"n", 64}, {"k", 64}}, nlohmann::json::object(), "gemm", 1, "bf16"));
  for (double bytes : {1024.0, 1048576.0})
    cases.push_back(record("collectives", "all_reduce", {{"bytes", bytes}, {"group_size", 2}, {"group", "world"}},
                           {{"busbw_factor", {{"value", 1.0}}}, {"group_nodes", {{"value", 1}}}}, "run",
                           5e-6 + bytes / 2e9));
  const nlohmann::json doc = {{"run", {{"id", "r"}}}, {"system", {{"cores", 4}}}, {"cases", cases}};
  const Calibration c = calibration_from_results(doc, "f32");
  EXPECT_NEAR(c.gemm.flops_per_s, 50e9, 5e7);  // the bf16 case is left out
  EXPECT_TRUE(c.gemm.measured.empty());
  ASSERT_TRUE(c.links.count("all_reduce/intra/2"));
  EXPECT_NEAR(c.links.at("all_reduce/intra/2").latency_s, 5e-6, 1e-9);
  EXPECT_NEAR(c.links.at("all_reduce/intra/2").busbw_Bps, 2e9, 1e5);
  EXPECT_THROW(calibration_from_results(doc, "f16"), UsageError);  // no gemm in f16
}

// A machine of round numbers, to check the step's arithmetic.
Calibration round_machine() {
  Calibration c;
  c.cores_per_node = 64;
  c.gemm.flops_per_s = 1e10;
  c.attention.per_s = 1e10;
  c.elementwise.per_s = 1e10;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_v", "sendrecv"})
    for (int n : {2, 4}) c.links[std::string(op) + "/intra/" + std::to_string(n)] = {1e-5, 1e9};
  return c;
}

ModelSpec small_model() {
  ModelSpec m;
  m.name = "small", m.layers = 4, m.hidden = 64, m.heads = 4, m.ffn = 256, m.vocab = 512, m.seq = 64;
  return m;
}

Config config(int tp, int cp, int pp, int dp) {
  Config c;
  c.tp = tp, c.cp = cp, c.pp = pp, c.dp = dp, c.sp = tp > 1;
  return c;
}

TEST(StepCost, DataParallelHalvesComputeAndAddsTheReduction) {
  const Calibration cal = round_machine();
  const StepShape shape;
  const CalibratedStep one = calibrated_step(small_model(), config(1, 1, 1, 1), {16, 16}, shape, cal);
  const CalibratedStep two = calibrated_step(small_model(), config(1, 1, 1, 2), {16, 8}, shape, cal);
  EXPECT_GT(one.gemm, 0);
  EXPECT_NEAR(two.gemm, one.gemm / 2, one.gemm * 0.02);
  // One rank still packs and unpacks the gradient buckets; two reduce them too.
  Calibration no_copies = cal;
  no_copies.elementwise.per_s = 0, no_copies.elementwise.overhead_s = 0;  // 0: free
  EXPECT_EQ(calibrated_step(small_model(), config(1, 1, 1, 1), {16, 16}, shape, no_copies).dp, 0);
  EXPECT_GT(one.dp, 0);
  EXPECT_GT(two.dp, one.dp);
  EXPECT_NEAR(one.step, one.gemm + one.attention + one.elementwise + one.dp + one.optimizer, one.step * 1e-9);
}

TEST(StepCost, TensorParallelCommunicatesAndPipelineHasABubble) {
  const Calibration cal = round_machine();
  const StepShape shape;
  const CalibratedStep tp = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  EXPECT_GT(tp.tp, 0);
  const CalibratedStep pp = calibrated_step(small_model(), config(1, 1, 2, 1), {16, 4}, shape, cal);
  EXPECT_GT(pp.bubble, 0);
  EXPECT_GT(pp.pp, 0);
  // A boundary message waits for its sender in the schedule, not again as a sync.
  StepShape shared;
  shared.sync_s = 1.0;
  EXPECT_DOUBLE_EQ(calibrated_step(small_model(), config(1, 1, 2, 1), {16, 4}, shared, cal).pp, pp.pp);
  const CalibratedStep cp = calibrated_step(small_model(), config(1, 2, 1, 1), {16, 16}, shape, cal);
  EXPECT_GT(cp.cp, 0);
}

// The MoE dispatcher's exchanges: one all-to-all-v per local expert each
// way under EP alone, but the ranks meet twice each way per layer; ETP
// without EP still gathers and scatters the rows.
TEST(StepCost, ExpertExchangesCostRoundsAndMeetTwiceEachWay) {
  const Calibration cal = round_machine();
  ModelSpec moe = small_model();
  moe.moe_layers = 2, moe.experts = 8, moe.topk = 2, moe.moe_ffn = 128;
  StepShape shape;
  shape.sync_s = 1e-3;  // every synchronisation waits in full (no sync_chunk_s)
  Config dp = config(1, 1, 1, 2);
  const CalibratedStep without = calibrated_step(moe, dp, {16, 8}, shape, cal);
  dp.ep = 2;
  const CalibratedStep ep2 = calibrated_step(moe, dp, {16, 8}, shape, cal);
  EXPECT_EQ(without.ep, 0);
  EXPECT_GT(ep2.ep, 0);
  // 2 MoE layers x 1 microbatch x 2 meetings x 2 directions, of 2 ranks.
  EXPECT_NEAR(ep2.sync - without.sync, 2 * 2 * 2 * shape.sync_s, 1e-12);
  // Fewer local experts, fewer rounds: less latency for the same rows.
  moe.experts = 4;
  const CalibratedStep fewer = calibrated_step(moe, dp, {16, 8}, shape, cal);
  EXPECT_LT(fewer.ep, ep2.ep);
  Config etp = config(2, 1, 1, 1);
  etp.etp = 2;
  EXPECT_GT(calibrated_step(moe, etp, {16, 16}, StepShape{}, cal).ep, 0);
}

// The MoE layer's routing, permutes and combine as measured per token: they
// replace the permutes' bytes, and cost each MoE layer's tokens, each way.
TEST(StepCost, MeasuredExpertRoutingCostsPerToken) {
  ModelSpec moe = small_model();
  moe.moe_layers = 2, moe.experts = 8, moe.topk = 2, moe.moe_ffn = 128;
  const Config dp = config(1, 1, 1, 2);
  CostQueries q;
  collect_queries(moe, dp, {16, 8}, StepShape{}, q);
  ASSERT_EQ(q.moe_tokens.size(), 1u);
  const double tokens = static_cast<double>(*q.moe_tokens.begin());
  EXPECT_EQ(tokens, 8 * small_model().seq);  // one microbatch of 8 sequences on this rank
  Calibration cal = round_machine();
  cal.moe_forward = {0, 1e6}, cal.moe_backward = {0, 1e6};
  const double at_1m = calibrated_step(moe, dp, {16, 8}, StepShape{}, cal).elementwise;
  cal.moe_forward.per_s = cal.moe_backward.per_s = 0.5e6;
  const double at_500k = calibrated_step(moe, dp, {16, 8}, StepShape{}, cal).elementwise;
  // 2 MoE layers x 1 microbatch x 2 directions x tokens x (2 - 1) us.
  EXPECT_NEAR(at_500k - at_1m, 2 * 2 * tokens * 1e-6, 1e-12);
  // Unmeasured, the router's softmax and top-k (3 passes over the logits)
  // and the permutes (5 over the routed rows) are bytes at the elementwise
  // rate instead, each way, in each MoE layer.
  cal.moe_forward.per_s = cal.moe_backward.per_s = 1e300;
  const double free_routing = calibrated_step(moe, dp, {16, 8}, StepShape{}, cal).elementwise;
  cal.moe_forward = cal.moe_backward = RateModel{};
  const double bytes = (3 * tokens * moe.experts + 5 * tokens * moe.topk * moe.hidden) * 4;
  EXPECT_NEAR(calibrated_step(moe, dp, {16, 8}, StepShape{}, cal).elementwise - free_routing,
              2 * 2 * bytes / cal.elementwise.per_s, 1e-12);
  // An overhead alone (no rate) is a measurement too.
  cal.moe_forward = cal.moe_backward = RateModel{1e-3, 0};
  EXPECT_NEAR(calibrated_step(moe, dp, {16, 8}, StepShape{}, cal).elementwise - free_routing, 2 * 2 * 1e-3, 1e-12);
}

// Ranks that share cores: the measured slowdown scales compute; the sync
// cost adds per collective, less for smaller groups.
TEST(StepCost, SharedCoresSlowComputeAndSynchronisation) {
  const Calibration cal = round_machine();
  StepShape shape;
  const CalibratedStep alone = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  shape.compute_slowdown = 2;
  const CalibratedStep shared = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  EXPECT_NEAR(shared.gemm, 2 * alone.gemm, 1e-12);
  EXPECT_DOUBLE_EQ(shared.tp, alone.tp);
  shape.sync_s = 1e-3, shape.sync_ranks = 4;
  const CalibratedStep synced = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  EXPECT_DOUBLE_EQ(synced.tp, shared.tp);  // the links are as fast; the ranks wait for each other
  EXPECT_GT(synced.sync, 0);
  EXPECT_NEAR(synced.step, shared.step + synced.sync, 1e-12);
  // Collectives close together wait less: at most sync_s per sync_chunk_s of compute.
  shape.sync_chunk_s = 1.0;
  const CalibratedStep sparse = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  EXPECT_LT(sparse.sync, synced.sync);
  // A measured wait for collectives close together raises that floor: no
  // lower than sync_short_s each, no higher than sync_s.
  shape.sync_short_s = 0.5e-3, shape.sync_short_chunk_s = 0.5;
  const CalibratedStep floored = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, shape, cal);
  EXPECT_GT(floored.sync, sparse.sync);
  EXPECT_LE(floored.sync, synced.sync);
  EXPECT_GE(floored.sync, 0.5 * synced.sync - 1e-12);
  // A wait measured on groups of the config's size replaces the harmonic
  // scaling: pairs that wait as long as all four ranks cost H(3) / H(1)
  // times the scaled estimate...
  StepShape pairs = shape;
  pairs.sync_group_s[2] = shape.sync_s;
  const CalibratedStep measured = calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, pairs, cal);
  const double harmonic3 = 1 + 1.0 / 2 + 1.0 / 3;
  EXPECT_NEAR(measured.sync, floored.sync * harmonic3, 1e-12);
  // ... and a wait measured on other sizes changes nothing.
  pairs.sync_group_s = {{4, 5 * shape.sync_s}};
  EXPECT_DOUBLE_EQ(calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, pairs, cal).sync, floored.sync);
  // Without a measured slowdown: ranks x threads over cores.
  StepShape counted;
  counted.ranks_per_node = 8, counted.cores_per_node = 2;
  EXPECT_DOUBLE_EQ(calibrated_step(small_model(), config(2, 1, 1, 1), {16, 16}, counted, cal).core_share, 4);
}

// A pipeline's idle ranks give their cores up: on shared cores its busy
// ranks compute, and wait for partners, as if fewer ranks shared them, but
// no faster than alone. Without oversubscription nothing changes.
TEST(StepCost, PipelineBubbleFreesSharedCores) {
  const Calibration cal = round_machine();
  StepShape counted;
  counted.ranks_per_node = 8, counted.cores_per_node = 2, counted.sync_s = 1e-4;
  const Config pipeline = config(2, 1, 4, 1);
  const CalibratedStep shared = calibrated_step(small_model(), pipeline, {16, 4}, counted, cal);
  EXPECT_GT(shared.bubble, 0);
  EXPECT_LT(shared.core_share, 4);
  EXPECT_GT(shared.core_share, 1);
  // The busy fraction of the schedule sets it: more microbatches, less bubble, more contention.
  EXPECT_GT(calibrated_step(small_model(), pipeline, {64, 4}, counted, cal).core_share, shared.core_share);
  // The compute and the waits scale together; the links do not.
  StepShape enough_cores = counted;
  enough_cores.cores_per_node = 8, enough_cores.compute_slowdown = 4;
  const CalibratedStep full = calibrated_step(small_model(), pipeline, {16, 4}, enough_cores, cal);
  ASSERT_GT(full.sync, 0);
  EXPECT_DOUBLE_EQ(full.core_share, 4);
  EXPECT_NEAR(shared.gemm / full.gemm, shared.core_share / 4, 1e-12);
  EXPECT_NEAR(shared.sync / full.sync, shared.core_share / 4, 1e-12);
  EXPECT_DOUBLE_EQ(shared.pp, full.pp);
  // The gradient reduction and the optimizer run with every rank busy again.
  EXPECT_DOUBLE_EQ(shared.optimizer, full.optimizer);
  // A config without a pipeline keeps the full contention.
  EXPECT_DOUBLE_EQ(calibrated_step(small_model(), config(1, 1, 1, 8), {16, 2}, counted, cal).core_share, 4);
}

TEST(StepCost, QueriesNameTheShapesAndGroups) {
  CostQueries q;
  collect_queries(small_model(), config(2, 1, 1, 2), {16, 8}, StepShape{}, q);
  // QKV forward: tokens 8 x 64 = 512 rows, 3 x 64 / 2 columns, hidden 64 reduced.
  EXPECT_TRUE(q.gemms.count({512, 96, 64, 0, 0}));
  EXPECT_TRUE(q.gemms.count({64, 96, 512, 1, 0}));  // its weight gradient
  EXPECT_TRUE(q.group_sizes.count(2));
  EXPECT_FALSE(q.attention.empty());
  EXPECT_FALSE(q.elementwise.empty());
}

// The stages are the schedule's: chunks without a pipeline are one stage.
TEST(StepCost, VirtualChunksWithoutAPipelineChangeNothing) {
  Config c = config(1, 1, 1, 1);
  const CalibratedStep one = calibrated_step(small_model(), c, {16, 16}, StepShape{}, round_machine());
  c.vpp = 4;
  EXPECT_DOUBLE_EQ(calibrated_step(small_model(), c, {16, 16}, StepShape{}, round_machine()).step, one.step);
}

TEST(StepCost, RefusesInvalidConfigs) {
  EXPECT_THROW(calibrated_step(small_model(), config(3, 1, 1, 1), {16, 16}, StepShape{}, round_machine()), UsageError);
}

}  // namespace
}  // namespace sextant::plan
