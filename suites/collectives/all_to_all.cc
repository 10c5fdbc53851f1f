// all_to_all: block p of rank r's input lands in block r of rank p's output.
// busbw factor (n-1)/n.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t whole(const CollectiveState& s) { return s.elements; }
int64_t per_peer(const CollectiveState& s) { return s.elements / s.n; }

void run(CollectiveState& s) { s.comm->all_to_all(s.send_ptr, s.recv_ptr, static_cast<size_t>(per_peer(s)), s.dtype); }

// Output block p came from rank p, which sent its block `rank` to us.
double expected(const CollectiveState& s, int64_t i) {
  int64_t p = i / per_peer(s), j = i % per_peer(s);
  return pattern(static_cast<int>(p), s.rank * per_peer(s) + j);
}

const CollectiveOp kAllToAll{
    .name = "all_to_all",
    .summary = "block p of every rank to rank p",
    .ops = {CommOp::all_to_all},
    .splits_over_ranks = true,
    .busbw_factor = factor_n_minus_1,
    .send_elements = whole,
    .recv_elements = whole,
    .run = run,
    .expected = expected,
};

}  // namespace

CaseDef all_to_all_case() { return make_collective_case(kAllToAll); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 40, all_to_all_case);

}  // namespace sextant::collectives
