// Does the harness add overhead? For each message size, the all_reduce case
// run through the harness (run_case: a barrier before each iteration, the
// slowest rank's time per iteration, median over iterations) against bare
// MPI_Allreduce loops, interleaved in the same run:
//   bare, same statistic  the harness's timing method written out over raw
//                         MPI: harness / this is the harness's own overhead
//   bare, nccl-tests      one barrier, N back-to-back calls, mean: what
//                         nccl-tests reports (a mean, so one slow call on a
//                         shared machine pulls it down; back-to-back calls
//                         also overlap across ranks)
//   mpirun -np 4 build/collectives_overhead_bench [iters]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness/runner.h"
#include "harness/timing.h"

namespace sextant {}

using namespace sextant;

namespace {

struct Bare {
  double same_statistic = 0, nccl_tests = 0;  // busbw, GB/s
};

Bare bare_allreduce_busbw(MPI_Comm comm, size_t bytes, int iters) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<float> send(bytes / sizeof(float), 1.0f), recv(send.size());
  const int count = static_cast<int>(send.size());
  const double factor = static_cast<double>(bytes) / 1e9 * 2.0 * (n - 1) / n;
  for (int i = 0; i < 2; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm);
  std::vector<double> samples(iters);
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(comm);
    const double start = now_seconds();
    MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm);
    samples[i] = now_seconds() - start;
  }
  MPI_Allreduce(MPI_IN_PLACE, samples.data(), iters, MPI_DOUBLE, MPI_MAX, comm);
  Bare out;
  out.same_statistic = factor / summarize(samples).median;
  MPI_Barrier(comm);
  const double start = now_seconds();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm);
  double t = (now_seconds() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  out.nccl_tests = factor / t;
  return out;
}

double harness_allreduce_busbw(MpiCommunicator& world, const Registry& registry, size_t bytes, int iters) {
  RunOptions o;
  o.selection = {"collectives/all_reduce"};
  o.rank_counts = {world.size()};
  o.dtypes = {DType::f32};
  o.options = {{"min_bytes", bytes}, {"max_bytes", bytes}};
  o.timing = {2, iters};
  o.check = false;
  std::vector<PlannedCase> plan = plan_run(registry, o, world.size());
  CaseRecord r = run_case(plan.front(), world, o);  // out of place first
  return r.metrics["busbw_GBps"]["value"].get<double>();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  {
    auto world = MpiCommunicator::world();
    const Registry registry = all_suites();
    if (world->rank() == 0)
      std::printf(
          "# all_reduce f32 out of place, %d ranks, %d iterations, median of 3 interleaved rounds; busbw GB/s\n"
          "# %10s %10s %12s %12s %10s %12s\n",
          world->size(), iters, "bytes", "harness", "bare same", "bare nccl-t", "overhead", "vs nccl-t");
    for (size_t bytes = 1 << 20; bytes <= (16u << 20); bytes *= 4) {
      std::vector<double> h, same, nccl_tests;
      for (int round = 0; round < 3; ++round) {
        h.push_back(harness_allreduce_busbw(*world, registry, bytes, iters));
        const Bare b = bare_allreduce_busbw(world->handle(), bytes, iters);
        same.push_back(b.same_statistic);
        nccl_tests.push_back(b.nccl_tests);
      }
      const double hm = summarize(h).median, sm = summarize(same).median, nm = summarize(nccl_tests).median;
      // overhead: bare / harness - 1 with the same statistic (> 0: the harness is slower).
      if (world->rank() == 0)
        std::printf("  %10zu %10.3f %12.3f %12.3f %+9.1f%% %12.3f\n", bytes, hm, sm, nm, 100.0 * (sm / hm - 1.0),
                    hm / nm);
    }
  }
  MPI_Finalize();
  return 0;
}
