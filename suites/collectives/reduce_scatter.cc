// reduce_scatter: rank r gets block r of the sum over ranks. busbw (n-1)/n.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t per_rank(const CollectiveState& s) { return s.elements / s.n; }
int64_t whole(const CollectiveState& s) { return s.elements; }

void prepare(CollectiveState& s) {
  if (!s.in_place) return;
  // NCCL's in-place rule: recv == send + rank * recv_count.
  s.recv_ptr = static_cast<char*>(s.send_ptr) + s.rank * per_rank(s) * dtype_size(s.dtype);
  s.output_offset = s.rank * per_rank(s);
  s.output_elements = per_rank(s);
}

void run(CollectiveState& s) {
  s.comm->reduce_scatter(s.send_ptr, s.recv_ptr, static_cast<size_t>(per_rank(s)), s.dtype, ReduceOp::sum);
}

double expected(const CollectiveState& s, int64_t i) {
  double sum = 0;
  for (int r = 0; r < s.n; ++r) sum += pattern(r, s.rank * per_rank(s) + i);
  return sum;
}

const CollectiveOp kReduceScatter{
    .name = "reduce_scatter",
    .summary = "sum over ranks, block r on rank r",
    .ops = {CommOp::reduce_scatter},
    .has_in_place = true,
    .splits_over_ranks = true,
    .busbw_factor = factor_n_minus_1,
    .send_elements = whole,
    .recv_elements = per_rank,
    .prepare = prepare,
    .run = run,
    .expected = expected,
};

}  // namespace

CaseDef reduce_scatter_case() { return make_collective_case(kReduceScatter); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, reduce_scatter_case);

}  // namespace sextant::collectives
