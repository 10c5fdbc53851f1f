// MPI with NCCL's point-to-point rules, so that tests on CPUs catch a
// message order that works only because MPI matches tags and buffers sends:
//   - tags are ignored: the i-th send from a to b meets the i-th receive at b
//     from a, as on NCCL;
//   - a send finishes only once its receive is posted (MPI_Issend);
//   - a call, or a group from group_start() to group_end(), finishes before
//     it returns, as if the host waited on NCCL's single stream.
// Stricter than NCCL, never looser: an order that runs here runs on NCCL.
// Collectives are MPI's. Host buffers; for tests.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "harness/comm_mpi.h"
#include "harness/comm_wrappers.h"

namespace sextant {

class NcclRulesCommunicator : public ForwardingCommunicator {
 public:
  // Collective over `inner`, which must outlive the result.
  static std::unique_ptr<NcclRulesCommunicator> create(MpiCommunicator& inner);
  ~NcclRulesCommunicator() override;
  NcclRulesCommunicator(const NcclRulesCommunicator&) = delete;
  NcclRulesCommunicator& operator=(const NcclRulesCommunicator&) = delete;

  std::string backend() const override { return "mpi-nccl-rules"; }
  RequestPtr isend(const void* buffer, size_t count, DType dtype, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType dtype, int peer, int tag) override;
  void group_start() override;
  void group_end() override;
  // The same rules on the split communicator.
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  NcclRulesCommunicator(MpiCommunicator& inner, std::unique_ptr<MpiCommunicator> owned);
  RequestPtr issue(bool send, const void* buffer, size_t count, DType dtype, int peer);
  void finish();  // waits for the pending operations

  std::unique_ptr<MpiCommunicator> owned_;  // set when made by split()
  MPI_Comm p2p_ = MPI_COMM_NULL;            // a duplicate: this wrapper's messages only, all tag 0
  int depth_ = 0;
  std::vector<MPI_Request> pending_;  // the open group's operations
};

}  // namespace sextant
