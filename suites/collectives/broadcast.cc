// broadcast from rank 0 (in place). busbw factor 1.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t whole(const CollectiveState& s) { return s.elements; }
int64_t none(const CollectiveState&) { return 0; }

void run(CollectiveState& s) { s.comm->broadcast(s.send_ptr, static_cast<size_t>(s.elements), s.dtype, 0); }

double expected(const CollectiveState&, int64_t i) { return pattern(0, i); }

// Non-root buffers start with a value the pattern never produces.
double input(const CollectiveState&, int rank, int64_t i) { return rank == 0 ? pattern(0, i) : 7.0; }

const CollectiveOp kBroadcast{
    .name = "broadcast",
    .summary = "rank 0's buffer to every rank",
    .ops = {CommOp::broadcast},
    .busbw_factor = factor_one,
    .send_elements = whole,
    .recv_elements = none,
    .run = run,
    .expected = expected,
    .input = input,
};

}  // namespace

CaseDef broadcast_case() { return make_collective_case(kBroadcast); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 70, broadcast_case);

}  // namespace sextant::collectives
