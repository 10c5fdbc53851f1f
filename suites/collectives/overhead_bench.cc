// Does the harness add overhead? For each message size, the all_reduce case
// run through the harness (run_case: barrier per iteration, per-iteration
// max over ranks) against a bare MPI_Allreduce loop timed as nccl-tests does
// (one barrier, N back-to-back calls, mean), interleaved in the same run.
//   mpirun -np 4 build/collectives_overhead_bench [iters]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness/runner.h"
#include "harness/timing.h"

namespace sextant {
void register_collectives_suite(Registry&);
}

using namespace sextant;

namespace {

double bare_allreduce_busbw(MPI_Comm comm, size_t bytes, int iters) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<float> send(bytes / sizeof(float), 1.0f), recv(send.size());
  const int count = static_cast<int>(send.size());
  for (int i = 0; i < 2; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm);
  MPI_Barrier(comm);
  double start = now_seconds();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm);
  double t = (now_seconds() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  return static_cast<double>(bytes) / t / 1e9 * 2.0 * (n - 1) / n;
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
    Registry registry;
    register_collectives_suite(registry);
    if (world->rank() == 0)
      std::printf("# all_reduce f32 out of place, %d ranks, %d iterations, median of 3 interleaved rounds\n"
                  "# %10s %14s %14s %8s\n",
                  world->size(), iters, "bytes", "harness GB/s", "bare GB/s", "ratio");
    for (size_t bytes = 1 << 20; bytes <= (16u << 20); bytes *= 4) {
      std::vector<double> h, b;
      for (int round = 0; round < 3; ++round) {
        h.push_back(harness_allreduce_busbw(*world, registry, bytes, iters));
        b.push_back(bare_allreduce_busbw(world->handle(), bytes, iters));
      }
      double hm = summarize(h).median, bm = summarize(b).median;
      if (world->rank() == 0) std::printf("  %10zu %14.3f %14.3f %8.3f\n", bytes, hm, bm, hm / bm);
    }
  }
  MPI_Finalize();
  return 0;
}
