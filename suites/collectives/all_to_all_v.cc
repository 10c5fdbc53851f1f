// all_to_all_v: uneven blocks. Rank r sends count(r, p) elements to peer p,
// with counts of 0, 1 and 2 times the mean so empty blocks are exercised.
// busbw factor (n-1)/n on the mean size.
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

int64_t block(const CollectiveState& s, int from, int to) { return s.elements / s.n * ((from + 2 * to + 1) % 3); }
int64_t displ(const CollectiveState& s, int from, int to) {  // offset of block `to` in `from`'s send buffer
  int64_t d = 0;
  for (int q = 0; q < to; ++q) d += block(s, from, q);
  return d;
}
int64_t send_elements(const CollectiveState& s) { return displ(s, s.rank, s.n); }
int64_t recv_elements(const CollectiveState& s) {
  int64_t total = 0;
  for (int p = 0; p < s.n; ++p) total += block(s, p, s.rank);
  return total;
}

void prepare(CollectiveState& s) {
  s.send_counts.assign(s.n, 0);
  s.send_displs.assign(s.n, 0);
  s.recv_counts.assign(s.n, 0);
  s.recv_displs.assign(s.n, 0);
  size_t at = 0;
  for (int p = 0; p < s.n; ++p) {
    s.send_counts[p] = static_cast<size_t>(block(s, s.rank, p));
    s.send_displs[p] = static_cast<size_t>(displ(s, s.rank, p));
    s.recv_counts[p] = static_cast<size_t>(block(s, p, s.rank));
    s.recv_displs[p] = at;
    at += s.recv_counts[p];
  }
}

void run(CollectiveState& s) {
  s.comm->all_to_all_v(s.send_ptr, s.send_counts, s.send_displs, s.recv_ptr, s.recv_counts, s.recv_displs, s.dtype);
}

double expected(const CollectiveState& s, int64_t i) {
  int p = 0;
  while (p + 1 < s.n && static_cast<int64_t>(s.recv_displs[p + 1]) <= i) ++p;
  return pattern(p, displ(s, p, s.rank) + i - static_cast<int64_t>(s.recv_displs[p]));
}

const CollectiveOp kAllToAllV{
    .name = "all_to_all_v",
    .summary = "uneven blocks (0x, 1x, 2x the mean) to every peer",
    .ops = {CommOp::all_to_all_v},
    .splits_over_ranks = true,
    .busbw_factor = factor_n_minus_1,
    .send_elements = send_elements,
    .recv_elements = recv_elements,
    .prepare = prepare,
    .run = run,
    .expected = expected,
};

}  // namespace

CaseDef all_to_all_v_case() { return make_collective_case(kAllToAllV); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 50, all_to_all_v_case);

}  // namespace sextant::collectives
