// How close are the MoE dispatch and combine to the network? And what does
// skew cost?
//
// Part 1: the all-to-all dispatcher's forward dispatch (count exchange,
// permute, the rows' exchange over EP) and combine (the exchange back and
// the weighted sum), over peer memory and over the collectives, against a
// bare MPI_Alltoallv of the same byte counts (each direction), interleaved
// call by call in the same run: every call starts at a barrier and is timed
// to its slowest rank; median over the calls, spread p10-p90.
// Bandwidth = bytes received from other ranks (all ranks) / time, f32 rows,
// uniform and skewed routing (the hot experts' router columns x3).
// Part 2: the moe/layer case at ep = world, uniform vs skewed routing (and
// skewed under capacity): imbalance, layer time, dispatch time, a2a share.
//   mpirun -np 4 build/moe_dispatch_bench [iters]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness/build_info.h"
#include "harness/rng.h"
#include "harness/runner.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/router.h"

namespace sextant {}

using namespace sextant;

namespace {

constexpr int kExperts = 16, kTopk = 2, kRounds = 5, kHotExperts = 2;
constexpr double kSkew = 3.0;

// One call of fn from a barrier, timed to the slowest rank (seconds).
template <class Fn>
double timed_call(MPI_Comm comm, Fn fn) {
  MPI_Barrier(comm);
  const double start = now_seconds();
  fn();
  double t = now_seconds() - start;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

double sum_over_ranks(MPI_Comm comm, double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, comm);
  return v;
}

// A bare MPI_Alltoallv of the rows each rank sends to each other rank (or,
// reversed, receives from it), in f32 elements.
struct BareExchange {
  std::vector<int> send, recv, sdispl, rdispl;
  std::vector<float> sbuf, rbuf;
  BareExchange(MPI_Comm comm, std::vector<int> counts, bool reverse) : send(std::move(counts)) {
    const int n = static_cast<int>(send.size());
    recv.assign(n, 0);
    MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, comm);
    if (reverse) std::swap(send, recv);
    sdispl.assign(n, 0);
    rdispl.assign(n, 0);
    for (int p = 1; p < n; ++p) {
      sdispl[p] = sdispl[p - 1] + send[p - 1];
      rdispl[p] = rdispl[p - 1] + recv[p - 1];
    }
    sbuf.assign(static_cast<size_t>(sdispl[n - 1] + send[n - 1]), 1.0f);
    rbuf.assign(static_cast<size_t>(rdispl[n - 1] + recv[n - 1]), 0.0f);
  }
  void run(MPI_Comm comm) {
    MPI_Alltoallv(sbuf.data(), send.data(), sdispl.data(), MPI_FLOAT, rbuf.data(), recv.data(), rdispl.data(),
                  MPI_FLOAT, comm);
  }
  double bytes_from_others(int me) const {
    double b = 0;
    for (size_t p = 0; p < recv.size(); ++p)
      if (static_cast<int>(p) != me) b += recv[p] * sizeof(float);
    return b;
  }
};

// Median GB/s and the spread of the times ((p90 - p10) / median, %).
struct Rate {
  double gbps = 0, spread_pct = 0;
};
Rate rate_of(double bytes, const std::vector<double>& seconds) {
  const TimeStats t = summarize(seconds);
  return {bytes / t.median / 1e9, 100.0 * (t.p90 - t.p10) / t.median};
}

void dispatch_vs_bare(MpiCommunicator& world, Communicator& self, int64_t tokens, int64_t hidden, bool skewed,
                      int iters) {
  const int n = world.size(), me = world.rank();
  const Tensor x = random_block({tokens * n, hidden}, {tokens * me, 0}, {tokens, hidden}, DType::f32,
                                {7, tensor_id("bench.x"), 1.0});
  Tensor w = random_tensor({hidden, kExperts}, DType::f32, {7, tensor_id("bench.router"), 0.1});
  if (skewed)
    for (int64_t i = 0; i < hidden; ++i)
      for (int e = 0; e < kHotExperts; ++e) w.data<float>()[i * kExperts + e] *= static_cast<float>(kSkew);
  moe::RouterOptions ro;
  ro.experts = kExperts;
  ro.topk = kTopk;
  const moe::Routing routing = moe::route(x, w, ro, world);
  const moe::DispatchComms comms{&world, &self};
  auto peer = moe::make_dispatcher(moe::DispatcherKind::alltoall, comms, kExperts, {}, moe::Transport::peer_memory);
  auto coll = moe::make_dispatcher(moe::DispatcherKind::alltoall, comms, kExperts, {}, moe::Transport::collectives);

  // The same byte counts for the bare calls: f32 elements per destination rank.
  const int local = kExperts / n;
  std::vector<int> send(n, 0);
  for (int64_t s = 0; s < routing.slots.slots(); ++s) send[routing.slots.expert[s] / local] += static_cast<int>(hidden);
  BareExchange bare(world.handle(), send, false), bare_back(world.handle(), send, true);
  const double bytes = sum_over_ranks(world.handle(), bare.bytes_from_others(me));
  const double bytes_back = sum_over_ranks(world.handle(), bare_back.bytes_from_others(me));

  // Dispatch then combine, each timed alone; the experts are the identity
  // (their outputs are the dispatched rows, or the peer buffers as they are).
  auto run_pair = [&](moe::TokenDispatcher& d, std::vector<double>& t_dispatch, std::vector<double>& t_combine) {
    std::vector<Tensor> in;
    t_dispatch.push_back(timed_call(world.handle(), [&] { in = d.dispatch(x, routing); }));
    std::vector<Tensor> out = d.expert_outputs(false);
    if (out.empty()) out = in;
    t_combine.push_back(timed_call(world.handle(), [&] { d.combine(out); }));
  };
  std::vector<double> peer_d, peer_c, coll_d, coll_c, bare_d, bare_c, scratch;
  for (int i = 0; i < 2; ++i) {  // warm-up: buffers allocated and touched
    run_pair(*peer, scratch, scratch);
    run_pair(*coll, scratch, scratch);
  }
  for (int i = 0; i < kRounds * iters; ++i) {  // call by call, so all see the same cache state
    run_pair(*peer, peer_d, peer_c);
    bare_d.push_back(timed_call(world.handle(), [&] { bare.run(world.handle()); }));
    bare_c.push_back(timed_call(world.handle(), [&] { bare_back.run(world.handle()); }));
    run_pair(*coll, coll_d, coll_c);
  }
  const Rate pd = rate_of(bytes, peer_d), pc = rate_of(bytes_back, peer_c), cd = rate_of(bytes, coll_d),
             cc = rate_of(bytes_back, coll_c), bd = rate_of(bytes, bare_d), bc = rate_of(bytes_back, bare_c);
  if (me == 0)
    std::printf(
        "  %-8s %7lld %8.1f | %6.2f %5.0f%% %6.2f %5.0f%% | %6.2f %6.2f | %6.2f %5.0f%% %6.2f %5.0f%% | %5.2f %5.2f | "
        "%5.2f %5.2f\n",
        skewed ? "skewed" : "uniform", static_cast<long long>(hidden), bytes / 1e6, bd.gbps, bd.spread_pct, bc.gbps,
        bc.spread_pct, cd.gbps, cc.gbps, pd.gbps, pd.spread_pct, pc.gbps, pc.spread_pct, pd.gbps / bd.gbps,
        pc.gbps / bc.gbps, cd.gbps / bd.gbps, cc.gbps / bc.gbps);
}

void skew_effect(MpiCommunicator& world, const Registry& registry, int iters) {
  if (world.rank() == 0)
    std::printf(
        "\n# moe/layer fwd+bwd, alltoall, ep = %d, E = %d (hot: experts 0-1, router columns x3), top-%d,\n"
        "# 512 tokens per rank, h 256, ffn 512, f32, %d iterations (medians)\n"
        "# %-16s %10s %10s %8s %11s %12s %10s %10s %13s\n",
        world.size(), kExperts, kTopk, iters, "routing", "imb_expert", "imb_rank", "dropped", "fwd_bwd_ms",
        "dispatch_ms", "experts_ms", "a2a_share", "dispatch_GBps");
  struct Row {
    const char* label;
    const char* routing;
    double capacity_factor;  // 0: dropless
  };
  for (const Row& row :
       {Row{"uniform", "uniform", 0}, Row{"skewed", "skewed", 0}, Row{"skewed, cf 1.0", "skewed", 1.0}}) {
    RunOptions o;
    o.selection = {"moe/layer"};
    o.dtypes = {DType::f32};
    ParallelConfig p{1, 1, 1, world.size()};
    p.ep = world.size();
    p.etp = 1;
    o.parallel = p;
    o.options = {{"dispatcher", "alltoall"},     {"experts", kExperts}, {"topk", kTopk}, {"routing", row.routing},
                 {"tokens", 512 * world.size()}, {"hidden", 256},       {"ffn", 512}};
    if (row.capacity_factor > 0) o.options["capacity_factor"] = row.capacity_factor;
    else o.options["drop_policy"] = "none";
    o.timing = {2, iters};
    o.check = false;
    std::vector<PlannedCase> plan = plan_run(registry, o, world.size());
    CaseRecord r = run_case(plan.front(), world, o);
    if (!r.error.empty()) {
      if (world.rank() == 0) std::printf("  %-16s error: %s\n", row.label, r.error.c_str());
      continue;
    }
    auto v = [&](const char* m) { return r.metrics[m]["value"].get<double>(); };
    if (world.rank() == 0)
      std::printf("  %-16s %10.2f %10.2f %8.0f %11.2f %12.2f %10.2f %10.3f %13.3f\n", row.label, v("imbalance_expert"),
                  v("imbalance_rank"), v("dropped_tokens"), r.times["fwd_bwd"].median * 1e3, v("dispatch_time_s") * 1e3,
                  r.metrics["time_split"]["experts"].get<double>() * 1e3, v("a2a_share"), v("dispatch_GBps"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
  {
    auto world = MpiCommunicator::world();
    std::unique_ptr<Communicator> self = world->split(world->rank(), 0);
    if (kExperts % world->size() != 0) {
      if (world->rank() == 0) std::fprintf(stderr, "needs a rank count dividing %d\n", kExperts);
    } else {
      if (world->rank() == 0)
        std::printf(
            "# moe_dispatch_bench, built from git %s%s\n"
            "# alltoall dispatch and combine vs bare MPI_Alltoallv of the same bytes, ep = %d, E = %d, top-%d,\n"
            "# 2048 tokens per rank, f32; %d x %d calls of each, interleaved call by call, each from a barrier,\n"
            "# timed to the slowest rank. GB/s = bytes from other ranks (all ranks) / median time;\n"
            "# spread = (p90 - p10) / median of the times. peer: peer memory; coll: all_to_all_v.\n"
            "# %-8s %7s %8s | %-27s | %-13s | %-27s | %-11s | %-11s\n"
            "# %-8s %7s %8s | %6s %6s %6s %6s | %6s %6s | %6s %6s %6s %6s | %5s %5s | %5s %5s\n",
            build_git_sha(), build_git_dirty() ? " (dirty)" : "", world->size(), kExperts, kTopk, kRounds, iters,
            "routing", "hidden", "MB_call", "bare (dispatch, combine)", "coll GB/s", "peer (dispatch, combine)",
            "peer/bare", "coll/bare", "", "", "", "GB/s", "spread", "GB/s", "spread", "disp", "comb", "GB/s", "spread",
            "GB/s", "spread", "disp", "comb", "disp", "comb");
      for (bool skewed : {false, true})
        for (int64_t hidden : {256, 1024, 4096}) dispatch_vs_bare(*world, *self, 2048, hidden, skewed, iters);
      const Registry registry = all_suites();
      skew_effect(*world, registry, iters);
    }
  }
  MPI_Finalize();
  return 0;
}
