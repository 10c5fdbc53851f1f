// The moe suite through the same registry the CLI uses: every instance
// passes at every rank count with routing identical to the reference, every
// planted fault fails its case, and bad input is refused before anything runs.
#include <gtest/gtest.h>

#include "harness/comm_mpi.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "harness/runner.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"
#include "kernels/moe/moe_layer.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

RunOptions small() {
  RunOptions o = ci_options({"moe"});
  o.rank_counts = {world().size()};
  return o;
}

TEST(Moe, EveryInstancePassesWithTheReferencesRouting) {
  std::vector<CaseRecord> records = run_suite("moe", small());
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error << " " << nlohmann::json(r.conformance).dump();
    EXPECT_FALSE(r.conformance.notes.contains("routing_differs")) << id;
    EXPECT_GE(r.conformance.tensors.size(), 5u) << id;  // y, dx, d_router, d_w1, d_w2 (+ losses)
    EXPECT_EQ(r.conformance.wrong, 0) << id;            // expert loads and dropped count exact
    for (const char* m :
         {"dispatch_GBps", "combine_GBps", "dispatch_GBps_aggregate", "imbalance_expert", "imbalance_rank",
          "dropped_tokens", "tokens_per_s", "expert_tflops", "a2a_share", "dispatch_share", "peer_memory"})
      EXPECT_TRUE(r.metrics.contains(m)) << id << " lacks " << m;
    // The ranks of a test share one node: the peer-memory transport is taken wherever it applies.
    const bool peer = r.config.params["dispatcher"] == "alltoall" && r.config.params["transport"] == "peer_memory" &&
                      r.config.parallel.ep > 1 && r.config.parallel.expert_tp() == 1;
    EXPECT_EQ(metric(r, "peer_memory"), peer ? 1.0 : 0.0) << id;
    if (r.config.params["drop_policy"] != "none" && r.config.params["routing"] == "skewed") {
      EXPECT_GT(metric(r, "dropped_tokens"), 0) << id << ": a skewed capacity case must drop";
    }
  }
}

TEST(Moe, SkewedRoutingLoadsTheHotExperts) {
  RunOptions o = small();
  o.dtypes = {DType::f32};
  o.options = {{"dispatcher", "alltoall"}, {"experts", 16}, {"topk", 2}, {"drop_policy", "none"}, {"tokens", 512}};
  std::map<std::string, double> imbalance;
  for (const char* routing : {"uniform", "skewed"}) {
    o.options["routing"] = routing;
    std::vector<CaseRecord> records = run_suite("moe", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty());
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "pass") << r.config.id();
      imbalance[routing] = std::max(imbalance[routing], metric(r, "imbalance_expert"));
    }
  }
  if (world().rank() == 0) {
    EXPECT_GT(imbalance["skewed"], 1.5 * imbalance["uniform"]);
  }
}

// Each fault fails every instance where it can show (the sweep keeps only
// those); at one rank the communication faults have no instance.
TEST(Moe, EveryPlantedFaultIsCaught) {
  for (const std::string& fault : moe::faults().names()) {
    RunOptions o = small();
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("moe", o);
    if (world().rank() != 0) continue;
    if (world().size() >= 2) {
      EXPECT_FALSE(records.empty()) << fault << " has no instance";
    }
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught by " << r.config.id();
      EXPECT_TRUE(r.error.empty()) << r.error;
      if (fault == "capacity_drop") {  // reported token by token, not hidden in an error norm
        EXPECT_TRUE(r.conformance.notes.contains("routing_differs")) << r.config.id();
      }
      if (fault == "no_edp_reduce") {
        bool replicas = false;
        for (const std::string& f : r.conformance.failures) replicas |= f.find("replicas") != std::string::npos;
        EXPECT_TRUE(replicas) << "EDP replicas should disagree in " << r.config.id();
      }
    }
  }
}

// Peer memory moves the same rows as the collectives and sums them in the
// same order: the layer's output and every gradient agree bit for bit, at
// ep = the world, in f32 and bf16.
TEST(Moe, PeerMemoryAndCollectivesGiveTheSameBits) {
  MpiCommunicator& w = world();
  if (w.size() < 2) GTEST_SKIP() << "an exchange needs two ranks";
  std::unique_ptr<Communicator> self = w.split(w.rank(), 0);
  const int experts = 2 * w.size();
  for (DType dtype : {DType::f32, DType::bf16}) {
    auto rnd = [&](const Shape& s, const char* name, int64_t row0) {
      return random_block({s[0] * w.size(), s[1]}, {row0, 0}, s, dtype, {5, tensor_id(name), 1.0});
    };
    const Tensor x = rnd({24, 16}, "peer.x", 24 * w.rank()), dy = rnd({24, 16}, "peer.dy", 24 * w.rank());
    std::vector<moe::MoeGrads> grads;
    std::vector<Tensor> ys;
    for (moe::Transport transport : {moe::Transport::peer_memory, moe::Transport::collectives}) {
      moe::MoeWeights weights{random_tensor({16, experts}, dtype, {5, tensor_id("peer.router"), 1.0}), {}, {}};
      for (int l = 0; l < 2; ++l) {
        const uint64_t e = static_cast<uint64_t>(2 * w.rank() + l);
        weights.w1.push_back(random_tensor({16, 32}, dtype, {5 + e, tensor_id("peer.w1"), 0.3}));
        weights.w2.push_back(random_tensor({32, 16}, dtype, {5 + e, tensor_id("peer.w2"), 0.3}));
      }
      moe::MoeOptions o;
      o.router.experts = experts;
      o.router.topk = 2;
      o.transport = transport;
      moe::MoeLayer layer(o, {&w, &w, self.get(), self.get()}, weights);
      for (int step = 0; step < 2; ++step) {  // the second batch reuses every buffer
        ys.push_back(layer.forward(x).clone());
        grads.push_back(layer.backward(dy));
        grads.back().dx = grads.back().dx.clone();  // the dispatcher's buffer: the next batch reuses it
      }
      EXPECT_EQ(layer.times().dispatch.peer_memory, transport == moe::Transport::peer_memory);
    }
    auto same = [&](const Tensor& a, const Tensor& b, const std::string& what) {
      EXPECT_EQ(a.to_vector(), b.to_vector()) << what << " " << dtype_name(dtype) << " on rank " << w.rank();
    };
    for (int step = 0; step < 2; ++step) {
      const moe::MoeGrads &p = grads[step], &c = grads[2 + step];
      same(ys[step], ys[2 + step], "y");
      same(p.dx, c.dx, "dx");
      same(p.router, c.router, "router gradient");
      for (size_t l = 0; l < p.w1.size(); ++l) {
        same(p.w1[l], c.w1[l], "w1 gradient");
        same(p.w2[l], c.w2[l], "w2 gradient");
      }
    }
  }
}

// The default list reaches every value of every dimension; sweep=full is the cross product.
TEST(Moe, SweepsReachEveryDimension) {
  if (world().rank() != 0 || world().size() < 4) GTEST_SKIP() << "planning only, at 4+ ranks";
  Registry r = suite_registry("moe");
  RunOptions o;
  o.selection = {"moe"};
  o.rank_counts = {4};
  std::set<std::string> seen;
  for (const PlannedCase& p : plan_run(r, o, world().size())) {
    const nlohmann::json& q = p.config.params;
    seen.insert({"dispatcher=" + q["dispatcher"].get<std::string>(), "routing=" + q["routing"].get<std::string>(),
                 "drop=" + q["drop_policy"].get<std::string>(), "topk=" + q["topk"].dump(),
                 "experts=" + q["experts"].dump(), "pre_softmax=" + q["pre_softmax"].dump(),
                 "etp=" + std::to_string(p.config.parallel.expert_tp()),
                 "transport=" + q["transport"].get<std::string>() + (p.config.parallel.ep > 1 ? "" : " (ep 1)"),
                 "edp=" + std::to_string(p.config.parallel.edp()), "dtype=" + dtype_name(p.config.dtype)});
  }
  for (const char* v :
       {"dispatcher=alltoall", "dispatcher=allgather", "routing=uniform", "routing=skewed", "drop=none",
        "drop=probability", "drop=position", "topk=1", "topk=2", "experts=8", "experts=16", "pre_softmax=true", "etp=2",
        "edp=2", "dtype=f32", "dtype=bf16", "transport=peer_memory", "transport=collectives"})
    EXPECT_TRUE(seen.count(v)) << v;
  const size_t recipes = plan_run(r, o, world().size()).size();
  o.options["sweep"] = "full";
  EXPECT_GT(plan_run(r, o, world().size()).size(), 4 * recipes);
}

TEST(Moe, BadInputIsRefusedWithTheNumbers) {
  if (world().rank() != 0 || world().size() < 4) GTEST_SKIP() << "planning only, at 4+ ranks";
  Registry r = suite_registry("moe");
  auto refused = [&](nlohmann::json options, std::optional<ParallelConfig> parallel, const std::string& message) {
    RunOptions o;
    o.selection = {"moe"};
    o.options = std::move(options);
    o.parallel = parallel;
    if (!parallel) o.rank_counts = {4};
    try {
      plan_run(r, o, 4);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  ParallelConfig ep4{1, 1, 1, 4};
  ep4.ep = 4;
  ParallelConfig etp2{1, 1, 1, 4};
  etp2.ep = 2;
  etp2.etp = 2;
  refused({{"experts", 6}}, ep4, "--ep 4 must divide --experts 6");
  refused({{"ffn", 5}}, etp2, "--etp 2 must divide --ffn 5");
  refused({{"topk", 9}, {"experts", 8}}, std::nullopt, "--topk 9 must be at most --experts 8");
  refused({{"capacity_factor", 0}}, std::nullopt, "--set capacity_factor '0' must be a finite number in [1e-06");
  refused({{"capacity_factor", -1.5}}, std::nullopt, "--set capacity_factor '-1.5' must be a finite number in [1e-06");
  refused({{"tokens", 10}}, std::nullopt, "--set tokens=10 must be a multiple of the rank count 4");
  refused({{"dispatcher", "p2p"}}, std::nullopt, "--set dispatcher 'p2p' must be one of alltoall, allgather");
  refused({{"transport", "rdma"}}, std::nullopt, "--set transport 'rdma' must be one of peer_memory, collectives");
  refused({{"pre_softmax", "maybe"}}, std::nullopt, "--set pre_softmax 'maybe' must be true or false");
  refused({{"drop_policy", "random"}}, std::nullopt,
          "--set drop_policy 'random' must be one of none, probability, position");
  ParallelConfig too_big{1, 1, 1, 4};
  too_big.ep = 4;
  too_big.etp = 2;
  refused({}, too_big, "--etp 2 x --ep 4 = 8 must divide tp*cp*dp = 4");
}

// The device path: the layer on device tensors (router gemm, row gathers and
// combines, experts, all-to-all-v on device buffers) against the same f64
// reference, with the reference's routing; the ranks share the GPU (staged).
TEST(Moe, EveryInstancePassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  const std::vector<CaseRecord> records = run_suite_on_gpu("moe", small());
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.device, Device::cuda) << id;
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error << " " << nlohmann::json(r.conformance).dump();
    EXPECT_FALSE(r.conformance.notes.contains("routing_differs")) << id;
    EXPECT_EQ(r.conformance.wrong, 0) << id;
    EXPECT_TRUE(r.metrics.contains("dispatch_GBps")) << id;
  }
}

TEST(Moe, EveryPlantedFaultIsCaughtOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  for (const std::string& fault : moe::faults().names()) {
    RunOptions o = small();
    o.fault = fault;
    const std::vector<CaseRecord> records = run_suite_on_gpu("moe", o);
    if (world().rank() != 0) continue;
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught on the GPU by " << r.config.id();
      EXPECT_EQ(r.error, "") << r.config.id();
    }
  }
}

}  // namespace
}  // namespace sextant
