// sendrecv: a ring of point-to-point messages, rank r to r+1 with
// nonblocking send and receive. busbw factor 1.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t whole(const CollectiveState& s) { return s.elements; }

void run(CollectiveState& s) {
  const size_t count = static_cast<size_t>(s.elements);
  std::vector<RequestPtr> requests;
  s.comm->group_start();
  requests.push_back(s.comm->irecv(s.recv_ptr, count, s.dtype, (s.rank - 1 + s.n) % s.n, 0));
  requests.push_back(s.comm->isend(s.send_ptr, count, s.dtype, (s.rank + 1) % s.n, 0));
  s.comm->group_end();
  wait_all(requests);
}

double expected(const CollectiveState& s, int64_t i) { return pattern((s.rank - 1 + s.n) % s.n, i); }

const CollectiveOp kSendRecv{
    .name = "sendrecv",
    .summary = "ring: isend to rank+1, irecv from rank-1",
    .ops = {CommOp::send},
    .busbw_factor = factor_one,
    .send_elements = whole,
    .recv_elements = whole,
    .run = run,
    .expected = expected,
};

}  // namespace

CaseDef sendrecv_case() { return make_collective_case(kSendRecv); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 60, sendrecv_case);

}  // namespace sextant::collectives
