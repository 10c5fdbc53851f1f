// all_reduce: every rank ends with the sum over ranks. busbw factor 2(n-1)/n.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t whole(const CollectiveState& s) { return s.elements; }

void prepare(CollectiveState& s) {
  if (s.in_place) s.recv_ptr = s.send_ptr;
}

void run(CollectiveState& s) {
  s.comm->all_reduce(s.send_ptr, s.recv_ptr, static_cast<size_t>(s.elements), s.dtype, ReduceOp::sum);
}

double expected(const CollectiveState& s, int64_t i) {
  double sum = 0;
  for (int r = 0; r < s.n; ++r) sum += pattern(r, i);
  return sum;
}

const CollectiveOp kAllReduce{
    .name = "all_reduce",
    .summary = "sum over ranks, result on every rank",
    .ops = {CommOp::all_reduce},
    .has_in_place = true,
    .busbw_factor = factor_all_reduce,
    .send_elements = whole,
    .recv_elements = whole,
    .prepare = prepare,
    .run = run,
    .expected = expected,
};

}  // namespace

CaseDef all_reduce_case() { return make_collective_case(kAllReduce); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, all_reduce_case);

}  // namespace sextant::collectives
