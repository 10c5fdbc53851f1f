#include "harness/comm_mpi.h"

#include <climits>
#include <cstring>
#include <functional>

#include "harness/error.h"
#include "harness/heartbeat.h"
#include "harness/strings.h"

namespace sextant {

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw RuntimeError(cat(call, " failed: ", std::string(text, static_cast<size_t>(length))));
}

namespace {

int as_int(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX))
    throw RuntimeError(cat(what, ": count ", count, " exceeds what MPI's int counts can address"));
  return static_cast<int>(count);
}

// 16-bit floats travel as MPI_UINT16_T; their reductions are user-defined ops
// that widen to float, combine and round back (to nearest even), as NCCL does.
template <class T, ReduceOp kOp>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = to_float(a[i]), y = to_float(b[i]);
    float r = kOp == ReduceOp::sum ? x + y : kOp == ReduceOp::max ? (x > y ? x : y) : (x < y ? x : y);
    b[i] = from_float<T>(r);
  }
}

struct Ops16 {
  MPI_Op ops[2][3];  // [bf16, f16][sum, max, min]
  Ops16() {
    MPI_Op_create(&reduce16<bf16, ReduceOp::sum>, 1, &ops[0][0]);
    MPI_Op_create(&reduce16<bf16, ReduceOp::max>, 1, &ops[0][1]);
    MPI_Op_create(&reduce16<bf16, ReduceOp::min>, 1, &ops[0][2]);
    MPI_Op_create(&reduce16<f16, ReduceOp::sum>, 1, &ops[1][0]);
    MPI_Op_create(&reduce16<f16, ReduceOp::max>, 1, &ops[1][1]);
    MPI_Op_create(&reduce16<f16, ReduceOp::min>, 1, &ops[1][2]);
  }
};

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  if (dtype == DType::bf16 || dtype == DType::f16) {
    static Ops16 ops16;  // created on first use, after MPI_Init
    return ops16.ops[dtype == DType::bf16 ? 0 : 1][static_cast<int>(op)];
  }
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

// `what` and `peer` name the transfer for the heartbeat ("wait recv from" 1):
// the wait is where a point-to-point exchange blocks.
class MpiRequest : public Request {
 public:
  // on_complete runs once, when the operation is seen complete (wait or test).
  MpiRequest(const char* what, int peer, std::function<void()> on_complete = {})
      : what_(what), peer_(peer), on_complete_(std::move(on_complete)) {}
  ~MpiRequest() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
    if (on_complete_) on_complete_();
  }
  void wait() override {
    CommCallScope scope(what_, peer_);
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    complete();
  }
  bool test() override {
    int done = 0;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) complete();
    return done != 0;
  }
  MPI_Request* handle() { return &request_; }

 private:
  void complete() {
    if (!on_complete_) return;
    std::function<void()> action = std::move(on_complete_);
    on_complete_ = nullptr;
    action();
  }
  const char* what_;
  int peer_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::function<void()> on_complete_;
};

std::vector<int> ints(const std::vector<size_t>& v, const char* what) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = as_int(v[i], what);
  return out;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  MPI_Comm dup;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
  return std::make_unique<MpiCommunicator>(dup, true);
}

void MpiCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  CommCallScope scope("all_reduce");
  const void* in = send == recv ? MPI_IN_PLACE : send;
  check_mpi(MPI_Allreduce(in, recv, as_int(count, "all_reduce"), mpi_type(dtype), mpi_op(dtype, op), comm_),
            "MPI_Allreduce");
  this->count(CommOp::all_reduce, ring_bytes_sent(CommOp::all_reduce, count * dtype_size(dtype), size_));
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  CommCallScope scope("reduce_scatter");
  const size_t elem = dtype_size(dtype);
  const bool in_place = static_cast<const char*>(send) + rank_ * recv_count * elem == recv;
  int n = as_int(recv_count, "reduce_scatter");
  if (in_place) {
    // MPI's in-place form leaves the result at the front of the buffer; NCCL's
    // (which we follow) leaves it at this rank's block.
    void* buffer = const_cast<void*>(send);
    check_mpi(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer, n, mpi_type(dtype), mpi_op(dtype, op), comm_),
              "MPI_Reduce_scatter_block");
    if (rank_ != 0) std::memmove(recv, buffer, recv_count * elem);
  } else {
    check_mpi(MPI_Reduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(dtype, op), comm_),
              "MPI_Reduce_scatter_block");
  }
  this->count(CommOp::reduce_scatter, ring_bytes_sent(CommOp::reduce_scatter, recv_count * size_ * elem, size_));
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  CommCallScope scope("all_gather");
  const size_t elem = dtype_size(dtype);
  const bool in_place = static_cast<const char*>(recv) + rank_ * send_count * elem == send;
  int n = as_int(send_count, "all_gather");
  check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_),
            "MPI_Allgather");
  this->count(CommOp::all_gather, ring_bytes_sent(CommOp::all_gather, send_count * size_ * elem, size_));
}

void MpiCommunicator::all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) {
  CommCallScope scope("all_to_all");
  int n = as_int(count_per_peer, "all_to_all");
  check_mpi(MPI_Alltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_), "MPI_Alltoall");
  this->count(CommOp::all_to_all,
              ring_bytes_sent(CommOp::all_to_all, count_per_peer * size_ * dtype_size(dtype), size_));
}

void MpiCommunicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                                   const std::vector<size_t>& send_displs, void* recv,
                                   const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                   DType dtype) {
  CommCallScope scope("all_to_all_v");
  const size_t n = static_cast<size_t>(size_);
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n)
    throw RuntimeError(cat("all_to_all_v: counts and displacements need ", n, " entries"));
  auto sc = ints(send_counts, "all_to_all_v"), sd = ints(send_displs, "all_to_all_v");
  auto rc = ints(recv_counts, "all_to_all_v"), rd = ints(recv_displs, "all_to_all_v");
  check_mpi(
      MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(dtype), recv, rc.data(), rd.data(), mpi_type(dtype), comm_),
      "MPI_Alltoallv");
  uint64_t sent = 0;
  for (size_t p = 0; p < n; ++p)
    if (static_cast<int>(p) != rank_) sent += send_counts[p] * dtype_size(dtype);
  this->count(CommOp::all_to_all_v, sent);
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DType dtype, int root) {
  CommCallScope scope("broadcast");
  check_mpi(MPI_Bcast(buffer, as_int(count, "broadcast"), mpi_type(dtype), root, comm_), "MPI_Bcast");
  this->count(CommOp::broadcast, ring_bytes_sent(CommOp::broadcast, count * dtype_size(dtype), size_));
}

void MpiCommunicator::barrier() {
  CommCallScope scope("barrier");
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

RequestPtr MpiCommunicator::iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  auto request = std::make_unique<MpiRequest>("wait all_reduce", -1);
  const void* in = send == recv ? MPI_IN_PLACE : send;
  check_mpi(MPI_Iallreduce(in, recv, as_int(count, "iall_reduce"), mpi_type(dtype), mpi_op(dtype, op), comm_,
                           request->handle()),
            "MPI_Iallreduce");
  this->count(CommOp::all_reduce, ring_bytes_sent(CommOp::all_reduce, count * dtype_size(dtype), size_));
  return request;
}

RequestPtr MpiCommunicator::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const bool in_place = static_cast<const char*>(send) + rank_ * recv_count * elem == recv;
  const int n = as_int(recv_count, "ireduce_scatter");
  std::unique_ptr<MpiRequest> request;
  if (in_place) {
    // As in reduce_scatter: MPI leaves the block at the front, NCCL's rule at this rank's block.
    void* buffer = const_cast<void*>(send);
    request = std::make_unique<MpiRequest>("wait reduce_scatter", -1, [=, rank = rank_] {
      if (rank != 0) std::memmove(recv, buffer, recv_count * elem);
    });
    check_mpi(MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer, n, mpi_type(dtype), mpi_op(dtype, op), comm_,
                                        request->handle()),
              "MPI_Ireduce_scatter_block");
  } else {
    request = std::make_unique<MpiRequest>("wait reduce_scatter", -1);
    check_mpi(MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(dtype, op), comm_, request->handle()),
              "MPI_Ireduce_scatter_block");
  }
  this->count(CommOp::reduce_scatter, ring_bytes_sent(CommOp::reduce_scatter, recv_count * size_ * elem, size_));
  return request;
}

RequestPtr MpiCommunicator::iall_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const size_t elem = dtype_size(dtype);
  const bool in_place = static_cast<const char*>(recv) + rank_ * send_count * elem == send;
  const int n = as_int(send_count, "iall_gather");
  auto request = std::make_unique<MpiRequest>("wait all_gather", -1);
  check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_,
                           request->handle()),
            "MPI_Iallgather");
  this->count(CommOp::all_gather, ring_bytes_sent(CommOp::all_gather, send_count * size_ * elem, size_));
  return request;
}

RequestPtr MpiCommunicator::isend(const void* buffer, size_t count, DType dtype, int peer, int tag) {
  auto request = std::make_unique<MpiRequest>("wait send to", peer);
  check_mpi(MPI_Isend(buffer, as_int(count, "isend"), mpi_type(dtype), peer, tag, comm_, request->handle()),
            "MPI_Isend");
  this->count(CommOp::send, count * dtype_size(dtype));
  return request;
}

RequestPtr MpiCommunicator::irecv(void* buffer, size_t count, DType dtype, int peer, int tag) {
  auto request = std::make_unique<MpiRequest>("wait recv from", peer);
  check_mpi(MPI_Irecv(buffer, as_int(count, "irecv"), mpi_type(dtype), peer, tag, comm_, request->handle()),
            "MPI_Irecv");
  return request;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  CommCallScope scope("split");
  MPI_Comm sub;
  check_mpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
  if (sub == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(sub, true);
}

}  // namespace sextant
