#include "harness/comm_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "harness/cuda_check.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

void check_nccl(ncclResult_t status, const char* call, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  throw RuntimeError(
      cat(call, " failed: ", ncclGetErrorString(status), detail && *detail ? cat(" (", detail, ")") : std::string()));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f64: return ncclFloat64;
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

cudaStream_t compute_stream() { return static_cast<cudaStream_t>(cuda_compute_stream()); }

cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  SEXTANT_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

// Completion of one group of NCCL calls, shared by the requests issued in it.
// Recorded on the communication stream by group_end().
struct GroupDone {
  cudaEvent_t event = new_event();
  bool recorded = false;
  bool join_compute = false;  // a collective inside the group: join at group_end
  ~GroupDone() { cudaEventDestroy(event); }
};

// wait(): later work on the compute stream waits for the group; the host
// does not block (that is what lets compute overlap the transfer).
class NcclRequest : public Request {
 public:
  explicit NcclRequest(std::shared_ptr<GroupDone> done) : done_(std::move(done)) {}
  ~NcclRequest() override {
    // Like MPI's request, dropping it still completes it (in stream order).
    if (!waited_ && done_->recorded) cudaStreamWaitEvent(compute_stream(), done_->event, 0);
  }
  void wait() override {
    if (waited_) return;
    if (!done_->recorded) throw RuntimeError("NCCL request waited on inside its group: call group_end() before wait()");
    SEXTANT_CHECK_CUDA(cudaStreamWaitEvent(compute_stream(), done_->event, 0));
    waited_ = true;
  }
  // Whether the GPU finished the transfer (NCCL progresses on its own).
  bool test() override {
    if (!done_->recorded) return false;
    const cudaError_t status = cudaEventQuery(done_->event);
    if (status == cudaErrorNotReady) return false;
    SEXTANT_CHECK_CUDA(status);
    return true;
  }

 private:
  std::shared_ptr<GroupDone> done_;
  bool waited_ = false;
};

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  std::unique_ptr<MpiCommunicator> host;  // the same ranks over MPI: barrier, split
  cudaStream_t stream = nullptr;          // communication stream
  cudaEvent_t compute_done = new_event(), comm_done = new_event();
  int rank = 0, size = 1;
  int group_depth = 0;
  std::shared_ptr<GroupDone> group;  // the open group's completion

  Impl(ncclComm_t c, std::unique_ptr<MpiCommunicator> h) : comm(c), host(std::move(h)) {
    check_nccl(ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm);
    check_nccl(ncclCommCount(comm, &size), "ncclCommCount", comm);
    if (rank != host->rank() || size != host->size())
      throw RuntimeError(cat("NCCL communicator is rank ", rank, " of ", size, " but its MPI twin is rank ",
                             host->rank(), " of ", host->size()));
    // Highest priority so communication kernels are scheduled ahead of the
    // compute kernels they overlap with.
    int least = 0, greatest = 0;
    SEXTANT_CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    SEXTANT_CHECK_CUDA(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
    cuda_register_side_stream(stream);
  }
  ~Impl() {
    cuda_unregister_side_stream(stream);
    cudaStreamSynchronize(stream);
    ncclCommDestroy(comm);
    cudaStreamDestroy(stream);
    cudaEventDestroy(compute_done);
    cudaEventDestroy(comm_done);
  }

  // The communication stream waits for everything issued on the compute stream.
  void after_compute() {
    SEXTANT_CHECK_CUDA(cudaEventRecord(compute_done, compute_stream()));
    SEXTANT_CHECK_CUDA(cudaStreamWaitEvent(stream, compute_done, 0));
  }
  // The compute stream waits for everything issued on the communication stream.
  void before_compute() {
    SEXTANT_CHECK_CUDA(cudaEventRecord(comm_done, stream));
    SEXTANT_CHECK_CUDA(cudaStreamWaitEvent(compute_stream(), comm_done, 0));
  }
  // A collective: ordered after compute, and compute after it. Inside an open
  // group the NCCL calls only queue, so the join waits for group_end().
  template <class Issue>
  void collective(Issue issue) {
    if (group_depth > 0) {
      issue();
      group->join_compute = true;
      return;
    }
    after_compute();
    issue();
    before_compute();
  }
  void open_group() {
    if (group_depth++ > 0) return check_nccl(ncclGroupStart(), "ncclGroupStart", comm);
    after_compute();
    group = std::make_shared<GroupDone>();
    check_nccl(ncclGroupStart(), "ncclGroupStart", comm);
  }
  void close_group() {
    if (group_depth == 0) throw RuntimeError("group_end() without group_start()");
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm);
    if (--group_depth > 0) return;
    SEXTANT_CHECK_CUDA(cudaEventRecord(group->event, stream));
    group->recorded = true;
    if (group->join_compute) SEXTANT_CHECK_CUDA(cudaStreamWaitEvent(compute_stream(), group->event, 0));
    group.reset();
  }
  // A nonblocking collective: ordered after compute, but compute joins it
  // only at the request's wait(); kernels issued in between overlap it on
  // the communication stream (its own group when none is open).
  template <class Issue>
  RequestPtr nonblocking(Issue issue) {
    const bool own_group = group_depth == 0;
    if (own_group) open_group();
    std::shared_ptr<GroupDone> done = group;
    issue();
    if (own_group) close_group();
    return std::make_unique<NcclRequest>(std::move(done));
  }
  // Grouped point-to-point exchange (all_to_all, all_to_all_v): block p of
  // send goes to peer p; this rank's own block is a device copy.
  void exchange(const char* send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                char* recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                DType dtype) {
    const size_t elem = dtype_size(dtype);
    if (send_counts[rank] != recv_counts[rank])
      throw RuntimeError(cat("all_to_all_v: rank ", rank, " sends itself ", send_counts[rank], " elements but expects ",
                             recv_counts[rank]));
    collective([&] {
      check_nccl(ncclGroupStart(), "ncclGroupStart", comm);
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        if (send_counts[p])
          check_nccl(ncclSend(send + send_displs[p] * elem, send_counts[p], nccl_type(dtype), p, comm, stream),
                     "ncclSend", comm);
        if (recv_counts[p])
          check_nccl(ncclRecv(recv + recv_displs[p] * elem, recv_counts[p], nccl_type(dtype), p, comm, stream),
                     "ncclRecv", comm);
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm);
      if (send_counts[rank])
        SEXTANT_CHECK_CUDA(cudaMemcpyAsync(recv + recv_displs[rank] * elem, send + send_displs[rank] * elem,
                                           send_counts[rank] * elem, cudaMemcpyDeviceToDevice, stream));
    });
  }
};

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(MpiCommunicator& group) {
  ncclUniqueId id{};
  if (group.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group.handle()), "MPI_Bcast (NCCL unique id)");
  MPI_Comm dup;
  check_mpi(MPI_Comm_dup(group.handle(), &dup), "MPI_Comm_dup");
  auto host = std::make_unique<MpiCommunicator>(dup, true);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, group.size(), id, group.rank()), "ncclCommInitRank");
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::make_unique<Impl>(comm, std::move(host))));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }

void NcclCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  Impl& m = *impl_;
  m.collective([&] {
    check_nccl(ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), m.comm, m.stream), "ncclAllReduce",
               m.comm);
  });
  this->count(CommOp::all_reduce, ring_bytes_sent(CommOp::all_reduce, count * dtype_size(dtype), m.size));
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  Impl& m = *impl_;
  m.collective([&] {
    check_nccl(ncclReduceScatter(send, recv, recv_count, nccl_type(dtype), nccl_op(op), m.comm, m.stream),
               "ncclReduceScatter", m.comm);
  });
  this->count(CommOp::reduce_scatter,
              ring_bytes_sent(CommOp::reduce_scatter, recv_count * m.size * dtype_size(dtype), m.size));
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  Impl& m = *impl_;
  m.collective([&] {
    check_nccl(ncclAllGather(send, recv, send_count, nccl_type(dtype), m.comm, m.stream), "ncclAllGather", m.comm);
  });
  this->count(CommOp::all_gather, ring_bytes_sent(CommOp::all_gather, send_count * m.size * dtype_size(dtype), m.size));
}

RequestPtr NcclCommunicator::iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  Impl& m = *impl_;
  RequestPtr request = m.nonblocking([&] {
    check_nccl(ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), m.comm, m.stream), "ncclAllReduce",
               m.comm);
  });
  this->count(CommOp::all_reduce, ring_bytes_sent(CommOp::all_reduce, count * dtype_size(dtype), m.size));
  return request;
}

RequestPtr NcclCommunicator::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                             ReduceOp op) {
  Impl& m = *impl_;
  RequestPtr request = m.nonblocking([&] {
    check_nccl(ncclReduceScatter(send, recv, recv_count, nccl_type(dtype), nccl_op(op), m.comm, m.stream),
               "ncclReduceScatter", m.comm);
  });
  this->count(CommOp::reduce_scatter,
              ring_bytes_sent(CommOp::reduce_scatter, recv_count * m.size * dtype_size(dtype), m.size));
  return request;
}

RequestPtr NcclCommunicator::iall_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  Impl& m = *impl_;
  RequestPtr request = m.nonblocking([&] {
    check_nccl(ncclAllGather(send, recv, send_count, nccl_type(dtype), m.comm, m.stream), "ncclAllGather", m.comm);
  });
  this->count(CommOp::all_gather, ring_bytes_sent(CommOp::all_gather, send_count * m.size * dtype_size(dtype), m.size));
  return request;
}

void NcclCommunicator::all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) {
  const size_t n = static_cast<size_t>(impl_->size);
  std::vector<size_t> counts(n, count_per_peer), displs(n);
  for (size_t p = 0; p < n; ++p) displs[p] = p * count_per_peer;
  impl_->exchange(static_cast<const char*>(send), counts, displs, static_cast<char*>(recv), counts, displs, dtype);
  this->count(CommOp::all_to_all,
              ring_bytes_sent(CommOp::all_to_all, count_per_peer * n * dtype_size(dtype), impl_->size));
}

void NcclCommunicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                                    const std::vector<size_t>& send_displs, void* recv,
                                    const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                    DType dtype) {
  const size_t n = static_cast<size_t>(impl_->size);
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n)
    throw RuntimeError(cat("all_to_all_v: counts and displacements need ", n, " entries"));
  impl_->exchange(static_cast<const char*>(send), send_counts, send_displs, static_cast<char*>(recv), recv_counts,
                  recv_displs, dtype);
  uint64_t sent = 0;
  for (size_t p = 0; p < n; ++p)
    if (static_cast<int>(p) != impl_->rank) sent += send_counts[p] * dtype_size(dtype);
  this->count(CommOp::all_to_all_v, sent);
}

void NcclCommunicator::broadcast(void* buffer, size_t count, DType dtype, int root) {
  Impl& m = *impl_;
  m.collective([&] {
    check_nccl(ncclBroadcast(buffer, buffer, count, nccl_type(dtype), root, m.comm, m.stream), "ncclBroadcast", m.comm);
  });
  this->count(CommOp::broadcast, ring_bytes_sent(CommOp::broadcast, count * dtype_size(dtype), m.size));
}

void NcclCommunicator::barrier() {
  Impl& m = *impl_;
  if (m.group_depth > 0) throw RuntimeError("barrier() inside group_start()/group_end()");
  SEXTANT_CHECK_CUDA(cudaStreamSynchronize(m.stream));
  SEXTANT_CHECK_CUDA(cudaStreamSynchronize(compute_stream()));
  m.host->barrier();
}

RequestPtr NcclCommunicator::isend(const void* buffer, size_t count, DType dtype, int peer, int) {
  Impl& m = *impl_;
  const bool own_group = m.group_depth == 0;
  if (own_group) m.open_group();
  std::shared_ptr<GroupDone> done = m.group;
  check_nccl(ncclSend(buffer, count, nccl_type(dtype), peer, m.comm, m.stream), "ncclSend", m.comm);
  if (own_group) m.close_group();
  this->count(CommOp::send, count * dtype_size(dtype));
  return std::make_unique<NcclRequest>(std::move(done));
}

RequestPtr NcclCommunicator::irecv(void* buffer, size_t count, DType dtype, int peer, int) {
  Impl& m = *impl_;
  const bool own_group = m.group_depth == 0;
  if (own_group) m.open_group();
  std::shared_ptr<GroupDone> done = m.group;
  check_nccl(ncclRecv(buffer, count, nccl_type(dtype), peer, m.comm, m.stream), "ncclRecv", m.comm);
  if (own_group) m.close_group();
  return std::make_unique<NcclRequest>(std::move(done));
}

void NcclCommunicator::group_start() { impl_->open_group(); }
void NcclCommunicator::group_end() { impl_->close_group(); }

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  Impl& m = *impl_;
  if (m.group_depth > 0) throw RuntimeError("split() inside group_start()/group_end()");
  ncclComm_t sub = nullptr;
  check_nccl(ncclCommSplit(m.comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr), "ncclCommSplit",
             m.comm);
  std::unique_ptr<Communicator> host = m.host->split(color, key);  // same order: key, then parent rank
  if (color < 0) return nullptr;
  std::unique_ptr<MpiCommunicator> host_mpi(static_cast<MpiCommunicator*>(host.release()));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::make_unique<Impl>(sub, std::move(host_mpi))));
}

}  // namespace sextant
