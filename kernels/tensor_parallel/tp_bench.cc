// How much does the TP machinery cost beyond its matrix products? The MLP
// block (LayerNorm, column linear, GELU, row linear, residual; forward +
// backward) against the six bare ops::gemm calls of the same shapes,
// interleaved, and its GFLOP/s. On one rank (no communication) and, when
// launched on n ranks, at tp = n with SP off and on.
// The one-rank rows mean something at -np 1 only: with more ranks the
// others poll inside MPI while rank 0 measures, taking cores from it.
//   OPENBLAS_NUM_THREADS=1 mpirun -np 1 build/tensor_parallel_bench [iters]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "harness/comm_mpi.h"
#include "harness/timing.h"
#include "kernels/ops/gemm.h"
#include "kernels/tensor_parallel/mlp.h"
#include "kernels/tensor_parallel/regions.h"

using namespace sextant;

namespace {

constexpr int kRounds = 5;

// Median over rounds of the mean time of `iters` calls, max over ranks.
double time_of(Communicator& comm, int iters, const std::function<void()>& fn) {
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) {
    fn();
    comm.barrier();
    const double start = now_seconds();
    for (int i = 0; i < iters; ++i) fn();
    rounds.push_back(comm.all_reduce_value((now_seconds() - start) / iters, ReduceOp::max));
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

struct Block {
  tp::MlpWeights w;
  Tensor x, dy;
};

Block make_block(const tp::TpGroup& g, int64_t tokens, const tp::MlpDims& d) {
  Block b;
  b.w = tp::init_mlp_weights(d, g.rank(), g.size(), DType::f32, 1, "bench.mlp");
  const int64_t seq = g.local_seq(tokens);
  b.x = random_tensor({1, seq, d.hidden}, DType::f32, RandomSpec{1, tensor_id("bench.x"), 1.0});
  b.dy = random_tensor({1, seq, d.hidden}, DType::f32, RandomSpec{1, tensor_id("bench.dy"), 1.0});
  return b;
}

void step(const tp::TpGroup& g, Block& b) {
  tp::MlpSaved saved;
  tp::MlpGrads grads;
  Tensor y = tp::mlp_forward(g, b.w, b.x, saved);
  Tensor dx = tp::mlp_backward(g, b.w, saved, b.dy, grads);
  tp::reduce_sequence_parallel_grads(g, grads.replicated_over_tp());
}

// The block's matrix products alone, on one rank: fc1 and fc2 forward, their
// input gradients and weight gradients.
double bare_gemms(Communicator& self, int iters, int64_t tokens, const tp::MlpDims& d) {
  auto t = [](Shape s) { return random_tensor(s, DType::f32, RandomSpec{2, tensor_id("bench.gemm"), 1.0}); };
  Tensor x = t({tokens, d.hidden}), a = t({tokens, d.ffn}), w1 = t({d.hidden, d.ffn}), w2 = t({d.ffn, d.hidden});
  Tensor y = t({tokens, d.hidden}), da = t({tokens, d.ffn}), dx = t({tokens, d.hidden});
  Tensor dw1 = t({d.hidden, d.ffn}), dw2 = t({d.ffn, d.hidden});
  return time_of(self, iters, [&] {
    ops::gemm(x, false, w1, false, a);   // a = x W1
    ops::gemm(a, false, w2, false, y);   // y = z W2
    ops::gemm(y, false, w2, true, da);   // dz = dy W2^T
    ops::gemm(a, true, y, false, dw2);   // dW2 = z^T dy
    ops::gemm(da, false, w1, true, dx);  // dx = da W1^T
    ops::gemm(x, true, da, false, dw1);  // dW1 = x^T da
  });
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
  {
    auto world = MpiCommunicator::world();
    std::unique_ptr<Communicator> self = world->split(world->rank(), 0);
    const bool root = world->rank() == 0;
    const int64_t tokens = 1024;
    if (root)
      std::printf(
          "# MLP block fwd+bwd, f32, %lld tokens, ffn = 4h, median of %d rounds of %d\n"
          "# %6s %5s %-12s %10s %10s %10s %8s\n",
          static_cast<long long>(tokens), kRounds, iters, "hidden", "tp", "mode", "block_ms", "gemms_ms", "GFLOP/s",
          "overhead");
    for (int64_t h : {256, 512, 1024}) {
      const tp::MlpDims d{h, 4 * h};
      const double flops = tp::mlp_flops(tokens, d);
      const double gemms = root ? bare_gemms(*self, iters, tokens, d) : 0;
      tp::TpGroup one{*self};
      Block b1 = make_block(one, tokens, d);
      const double alone = root ? time_of(*self, iters, [&] { step(one, b1); }) : 0;
      if (root)
        std::printf("  %6lld %5d %-12s %10.3f %10.3f %10.2f %7.1f%%\n", static_cast<long long>(h), 1, "one rank",
                    alone * 1e3, gemms * 1e3, flops / alone / 1e9, (alone / gemms - 1) * 100);
      if (world->size() == 1) continue;
      for (bool sp : {false, true}) {
        tp::TpGroup g{*world, sp};
        Block b = make_block(g, tokens, d);
        const double t = time_of(*world, iters, [&] { step(g, b); });
        if (root)
          std::printf("  %6lld %5d %-12s %10.3f %10s %10.2f %8s\n", static_cast<long long>(h), world->size(),
                      sp ? "sp" : "all-reduce", t * 1e3, "", flops / world->size() / t / 1e9, "");
      }
    }
  }
  MPI_Finalize();
  return 0;
}
