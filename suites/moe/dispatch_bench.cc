// How close is the MoE dispatch to the network? And what does skew cost?
//
// Part 1: the all-to-all dispatcher's forward dispatch (count exchange,
// permute, the row all_to_all_v over EP through the Communicator; without
// ETP the rows land in the expert tensors directly) against a bare
// MPI_Alltoallv of the same byte counts, interleaved in the same run, median
// of rounds. Bandwidth = bytes received from other ranks (all ranks) / time
// (max over ranks), f32 rows; the row all_to_all_v is also shown alone.
// Part 2: the moe/layer case at ep = world, uniform vs skewed routing (and
// skewed under capacity): imbalance, layer time, dispatch time, a2a share.
//   mpirun -np 4 build/moe_dispatch_bench [iters]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness/rng.h"
#include "harness/runner.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/router.h"

namespace sextant {}

using namespace sextant;

namespace {

constexpr int kExperts = 16, kTopk = 2, kRounds = 5;

// Seconds per call of fn, max over ranks.
template <class Fn>
double time_calls(MPI_Comm comm, int iters, Fn fn) {
  fn();
  MPI_Barrier(comm);
  const double start = now_seconds();
  for (int i = 0; i < iters; ++i) fn();
  double t = (now_seconds() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

double sum_over_ranks(MPI_Comm comm, double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, comm);
  return v;
}

void dispatch_vs_bare(MpiCommunicator& world, Communicator& self, int64_t tokens, int64_t hidden, int iters) {
  const int n = world.size(), me = world.rank();
  const Tensor x = random_block({tokens * n, hidden}, {tokens * me, 0}, {tokens, hidden}, DType::f32,
                                {7, tensor_id("bench.x"), 1.0});
  const Tensor w = random_tensor({hidden, kExperts}, DType::f32, {7, tensor_id("bench.router"), 0.1});
  moe::RouterOptions ro;
  ro.experts = kExperts;
  ro.topk = kTopk;
  const moe::Routing routing = moe::route(x, w, ro, world);
  auto dispatcher = moe::make_dispatcher(moe::DispatcherKind::alltoall, {&world, &self}, kExperts, {});

  // The same byte counts for the bare call: rows per destination rank.
  const int local = kExperts / n;
  std::vector<int> send(n, 0), recv(n, 0), sdispl(n, 0), rdispl(n, 0);
  for (int64_t s = 0; s < routing.slots.slots(); ++s) send[routing.slots.expert[s] / local] += static_cast<int>(hidden);
  MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, world.handle());
  for (int p = 1; p < n; ++p) {
    sdispl[p] = sdispl[p - 1] + send[p - 1];
    rdispl[p] = rdispl[p - 1] + recv[p - 1];
  }
  std::vector<float> sbuf(static_cast<size_t>(sdispl[n - 1] + send[n - 1]), 1.0f);
  std::vector<float> rbuf(static_cast<size_t>(rdispl[n - 1] + recv[n - 1]));
  double from_others = 0;
  for (int p = 0; p < n; ++p)
    if (p != me) from_others += recv[p] * sizeof(float);
  const double bytes = sum_over_ranks(world.handle(), from_others);

  std::vector<double> suite_bw, a2a_bw, bare_bw, counts_ms, rows_ms, local_ms;
  for (int round = 0; round < kRounds; ++round) {
    dispatcher->reset_stats();
    const double t_suite = time_calls(world.handle(), iters, [&] { dispatcher->dispatch(x, routing); });
    // Parts of those calls on this rank's clock (max over ranks): the count
    // exchange, the row all_to_all_v, and the local work (permute, layouts).
    const moe::DispatchStats st = dispatcher->stats();
    double part[3] = {(st.comm_s - st.dispatch_comm_s) / (iters + 1), st.dispatch_comm_s / (iters + 1),
                      (st.dispatch_s - st.comm_s) / (iters + 1)};
    MPI_Allreduce(MPI_IN_PLACE, part, 3, MPI_DOUBLE, MPI_MAX, world.handle());
    const double t_bare = time_calls(world.handle(), iters, [&] {
      MPI_Alltoallv(sbuf.data(), send.data(), sdispl.data(), MPI_FLOAT, rbuf.data(), recv.data(), rdispl.data(),
                    MPI_FLOAT, world.handle());
    });
    suite_bw.push_back(bytes / t_suite / 1e9);
    a2a_bw.push_back(bytes / part[1] / 1e9);
    bare_bw.push_back(bytes / t_bare / 1e9);
    counts_ms.push_back(part[0] * 1e3);
    rows_ms.push_back(part[1] * 1e3);
    local_ms.push_back(part[2] * 1e3);
  }
  auto med = [](const std::vector<double>& v) { return summarize(v).median; };
  const double s = med(suite_bw), a = med(a2a_bw), b = med(bare_bw);
  if (me == 0)
    std::printf("  %8lld %7lld %9.1f %13.3f %9.3f %10.3f %9.3f %9.3f %9.2f %9.2f %9.2f\n",
                static_cast<long long>(tokens), static_cast<long long>(hidden), bytes / 1e6, s, a, b, s / b, a / b,
                med(counts_ms), med(rows_ms), med(local_ms));
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
            "# alltoall dispatch vs bare MPI_Alltoallv, %d ranks, E = %d, top-%d, f32, %d iterations, "
            "median of %d interleaved rounds\n"
            "# dispatch: count exchange + permute + all_to_all_v; a2a: its row all_to_all_v alone;\n"
            "# ms per call (max over ranks): counts = count exchange, rows = row all_to_all_v, local = the rest\n"
            "# %8s %7s %9s %13s %9s %10s %9s %9s %9s %9s %9s\n",
            world->size(), kExperts, kTopk, iters, kRounds, "tokens", "hidden", "MB_recv", "dispatch_GBps", "a2a_GBps",
            "bare_GBps", "disp/bare", "a2a/bare", "counts_ms", "rows_ms", "local_ms");
      for (int64_t hidden : {256, 1024, 4096}) dispatch_vs_bare(*world, *self, 2048, hidden, iters);
      const Registry registry = all_suites();
      skew_effect(*world, registry, iters);
    }
  }
  MPI_Finalize();
  return 0;
}
