// NCCL's point-to-point rules on MPI: the contract every backend meets (split
// included, which keeps the rules), and tags ignored: pairs match in issue order.
#include "harness/comm_nccl_rules.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/testing/comm_contract.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

TEST(NcclRulesCommunicator, MeetsTheContract) {
  auto comm = NcclRulesCommunicator::create(world());
  EXPECT_EQ(comm->backend(), "mpi-nccl-rules");
  testing::check_communicator_contract(*comm);
}

// Rank 0 sends A (tag 5) then B (tag 3); rank 1 receives with tags 3 then 5.
// MPI would match by tag; here the first receive gets A, as on NCCL.
TEST(NcclRulesCommunicator, MatchesInIssueOrderWhateverTheTags) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto comm = NcclRulesCommunicator::create(world());
  Tensor a = Tensor::from_values({2}, {1.0, 2.0}, DType::f32), b = Tensor::from_values({2}, {3.0, 4.0}, DType::f32);
  Tensor first = Tensor::zeros({2}, DType::f32), second = Tensor::zeros({2}, DType::f32);
  std::vector<RequestPtr> requests;
  comm->group_start();
  if (comm->rank() == 0) {
    requests.push_back(comm->isend(a.raw(), 2, DType::f32, 1, 5));
    requests.push_back(comm->isend(b.raw(), 2, DType::f32, 1, 3));
  } else if (comm->rank() == 1) {
    requests.push_back(comm->irecv(first.raw(), 2, DType::f32, 0, 3));
    requests.push_back(comm->irecv(second.raw(), 2, DType::f32, 0, 5));
  }
  if (!requests.empty()) {
    EXPECT_THROW(requests[0]->wait(), RuntimeError) << "waited inside the group";
  }
  comm->group_end();
  wait_all(requests);
  if (comm->rank() == 1) {
    EXPECT_EQ(first.to_vector(), (std::vector<double>{1.0, 2.0}));
    EXPECT_EQ(second.to_vector(), (std::vector<double>{3.0, 4.0}));
  }
  comm->barrier();
}

}  // namespace
}  // namespace sextant
