#include "harness/comm_nccl_rules.h"

#include <cstdint>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
// Complete when returned, or at group_end() for the group it was issued in.
class GroupedRequest : public Request {
 public:
  explicit GroupedRequest(const int* depth) : depth_(depth) {}
  void wait() override {
    if (*depth_ > 0) throw RuntimeError("request waited on inside its group: call group_end() before wait()");
  }
  bool test() override { return *depth_ == 0; }

 private:
  const int* depth_;
};

int byte_count(size_t count, DType dtype) {
  const size_t bytes = count * dtype_size(dtype);
  if (bytes > static_cast<size_t>(INT32_MAX)) throw RuntimeError("point-to-point message over 2 GiB");
  return static_cast<int>(bytes);
}
}  // namespace

NcclRulesCommunicator::NcclRulesCommunicator(MpiCommunicator& inner, std::unique_ptr<MpiCommunicator> owned)
    : ForwardingCommunicator(inner), owned_(std::move(owned)) {
  check_mpi(MPI_Comm_dup(inner.handle(), &p2p_), "MPI_Comm_dup");
}

std::unique_ptr<NcclRulesCommunicator> NcclRulesCommunicator::create(MpiCommunicator& inner) {
  return std::unique_ptr<NcclRulesCommunicator>(new NcclRulesCommunicator(inner, nullptr));
}

NcclRulesCommunicator::~NcclRulesCommunicator() {
  if (!pending_.empty()) MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
  MPI_Comm_free(&p2p_);
}

RequestPtr NcclRulesCommunicator::issue(bool send, const void* buffer, size_t count, DType dtype, int peer) {
  if (peer < 0 || peer >= size())
    throw RuntimeError(cat(send ? "send to" : "receive from", " peer ", peer, ": not a rank of ", size()));
  MPI_Request request = MPI_REQUEST_NULL;
  if (send) {
    check_mpi(MPI_Issend(buffer, byte_count(count, dtype), MPI_BYTE, peer, 0, p2p_, &request), "MPI_Issend");
    this->count(CommOp::send, count * dtype_size(dtype));
  } else {
    check_mpi(MPI_Irecv(const_cast<void*>(buffer), byte_count(count, dtype), MPI_BYTE, peer, 0, p2p_, &request),
              "MPI_Irecv");
  }
  pending_.push_back(request);
  if (depth_ == 0) finish();
  return std::make_unique<GroupedRequest>(&depth_);
}

RequestPtr NcclRulesCommunicator::isend(const void* buffer, size_t count, DType dtype, int peer, int) {
  return issue(true, buffer, count, dtype, peer);
}

RequestPtr NcclRulesCommunicator::irecv(void* buffer, size_t count, DType dtype, int peer, int) {
  return issue(false, buffer, count, dtype, peer);
}

void NcclRulesCommunicator::finish() {
  check_mpi(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  pending_.clear();
}

void NcclRulesCommunicator::group_start() { ++depth_; }

void NcclRulesCommunicator::group_end() {
  if (depth_ == 0) throw RuntimeError("group_end() without group_start()");
  if (--depth_ == 0) finish();
}

std::unique_ptr<Communicator> NcclRulesCommunicator::split(int color, int key) {
  if (depth_ > 0) throw RuntimeError("split() inside group_start()/group_end()");
  std::unique_ptr<Communicator> sub = inner_.split(color, key);
  if (!sub) return nullptr;
  std::unique_ptr<MpiCommunicator> owned(dynamic_cast<MpiCommunicator*>(sub.get()));
  if (!owned) throw RuntimeError("NcclRulesCommunicator: the wrapped communicator did not split into an MPI one");
  sub.release();
  MpiCommunicator& ref = *owned;
  return std::unique_ptr<NcclRulesCommunicator>(new NcclRulesCommunicator(ref, std::move(owned)));
}

}  // namespace sextant
