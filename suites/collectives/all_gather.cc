// all_gather: block r of the output is rank r's input. busbw factor (n-1)/n.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t per_rank(const CollectiveState& s) { return s.elements / s.n; }
int64_t whole(const CollectiveState& s) { return s.elements; }
// In place, the buffer is the whole output and this rank's block is its input.
int64_t send_elements(const CollectiveState& s) { return s.in_place ? whole(s) : per_rank(s); }

void prepare(CollectiveState& s) {
  if (!s.in_place) return;
  s.recv_ptr = s.send_ptr;
  s.send_ptr = static_cast<char*>(s.recv_ptr) + s.rank * per_rank(s) * dtype_size(s.dtype);
}

void run(CollectiveState& s) { s.comm->all_gather(s.send_ptr, s.recv_ptr, static_cast<size_t>(per_rank(s)), s.dtype); }

double expected(const CollectiveState& s, int64_t i) {
  return pattern(static_cast<int>(i / per_rank(s)), i % per_rank(s));
}

// In place, only this rank's block of the buffer is input.
double input(const CollectiveState& s, int rank, int64_t i) {
  if (!s.in_place) return pattern(rank, i);
  return i / per_rank(s) == rank ? pattern(rank, i % per_rank(s)) : 0.0;
}

const CollectiveOp kAllGather{
    .name = "all_gather",
    .summary = "every rank's block, in rank order, on every rank",
    .ops = {CommOp::all_gather},
    .has_in_place = true,
    .splits_over_ranks = true,
    .busbw_factor = factor_n_minus_1,
    .send_elements = send_elements,
    .recv_elements = whole,
    .prepare = prepare,
    .run = run,
    .expected = expected,
    .input = input,
};

}  // namespace

CaseDef all_gather_case() { return make_collective_case(kAllGather); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, all_gather_case);

}  // namespace sextant::collectives
