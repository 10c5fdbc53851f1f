#include "harness/comm_staged.h"

#include <algorithm>
#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

class CudaStaging : public StagingMemory {
 public:
  Device device() const override { return Device::cuda; }
  // cudaMemcpy runs on the legacy default stream, which waits for the
  // compute stream (a blocking stream) and is waited for by it.
  void to_host(void* host, const void* buffer, size_t bytes) override { cuda_copy(host, buffer, bytes); }
  void to_buffer(void* buffer, const void* host, size_t bytes) override { cuda_copy(buffer, host, bytes); }
};

class HostStaging : public StagingMemory {
 public:
  Device device() const override { return Device::host; }
  void to_host(void* host, const void* buffer, size_t bytes) override { std::memcpy(host, buffer, bytes); }
  void to_buffer(void* buffer, const void* host, size_t bytes) override { std::memcpy(buffer, host, bytes); }
};

// A nonblocking transfer through its own host buffer. A receive lands in the
// device buffer at wait(), as MPI's receive lands at MPI_Wait.
class StagedRequest : public Request {
 public:
  StagedRequest(std::shared_ptr<StagingMemory> memory, size_t bytes, void* recv_target)
      : memory_(std::move(memory)), host_(bytes), target_(recv_target) {}
  ~StagedRequest() override {
    try {
      wait();
    } catch (...) {
      // A destructor must not throw; the error surfaced (or will) elsewhere.
    }
  }
  char* host() { return host_.data(); }
  void start(RequestPtr inner) { inner_ = std::move(inner); }
  bool test() override {
    if (!inner_) return true;
    if (!inner_->test()) return false;
    wait();  // complete: a receive lands in its buffer
    return true;
  }
  void wait() override {
    if (!inner_) return;
    RequestPtr inner = std::move(inner_);
    inner->wait();
    if (target_ && !host_.empty()) memory_->to_buffer(target_, host_.data(), host_.size());
  }

 private:
  std::shared_ptr<StagingMemory> memory_;
  std::vector<char> host_;
  void* target_;
  RequestPtr inner_;
};

// A nonblocking collective through host buffers of its own: the input was
// staged in when it started; the result reaches the device buffer when the
// operation is seen complete (wait, or a test that finds it done).
class StagedCollective : public Request {
 public:
  StagedCollective(std::shared_ptr<StagingMemory> memory, size_t in_bytes, size_t out_bytes, void* target)
      : memory_(std::move(memory)),
        in_(std::max<size_t>(in_bytes, 1)),
        out_(std::max<size_t>(out_bytes, 1)),
        out_bytes_(out_bytes),
        target_(target) {}
  ~StagedCollective() override {
    try {
      wait();
    } catch (...) {
      // A destructor must not throw; the error surfaced (or will) elsewhere.
    }
  }
  char* in() { return in_.data(); }
  char* out() { return out_.data(); }
  void start(RequestPtr inner) { inner_ = std::move(inner); }
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    finish();
  }
  bool test() override {
    if (!inner_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    inner_.reset();
    if (out_bytes_) memory_->to_buffer(target_, out_.data(), out_bytes_);
  }
  std::shared_ptr<StagingMemory> memory_;
  std::vector<char> in_, out_;
  size_t out_bytes_;
  void* target_;
  RequestPtr inner_;
};

// Elements a block list spans: max(displacement + count).
size_t extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t p = 0; p < counts.size(); ++p)
    if (counts[p]) end = std::max(end, displs[p] + counts[p]);
  return end;
}

}  // namespace

std::shared_ptr<StagingMemory> cuda_staging() { return std::make_shared<CudaStaging>(); }
std::shared_ptr<StagingMemory> host_staging() { return std::make_shared<HostStaging>(); }

std::unique_ptr<StagedCommunicator> StagedCommunicator::create(MpiCommunicator& group,
                                                               std::shared_ptr<StagingMemory> memory) {
  MPI_Comm dup;
  check_mpi(MPI_Comm_dup(group.handle(), &dup), "MPI_Comm_dup");
  return std::make_unique<StagedCommunicator>(std::make_unique<MpiCommunicator>(dup, true), std::move(memory));
}

StagedCommunicator::StagedCommunicator(std::unique_ptr<MpiCommunicator> host, std::shared_ptr<StagingMemory> memory)
    : host_(std::move(host)), memory_(std::move(memory)) {}

char* StagedCommunicator::stage_in(const void* buffer, size_t bytes) {
  in_.resize(std::max<size_t>(bytes, 1));
  if (bytes) memory_->to_host(in_.data(), buffer, bytes);
  return in_.data();
}

char* StagedCommunicator::scratch_out(size_t bytes) {
  out_.resize(std::max<size_t>(bytes, 1));
  return out_.data();
}

// Each collective: device input -> host, MPI out of place on the host, host
// result -> device. Staging the whole input before writing any output keeps
// NCCL's in-place forms (send and recv overlapping) correct.

void StagedCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  char* in = stage_in(send, bytes);
  char* out = scratch_out(bytes);
  host_->all_reduce(in, out, count, dtype, op);
  if (bytes) memory_->to_buffer(recv, out, bytes);
}

void StagedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  const size_t bytes = recv_count * dtype_size(dtype);
  char* in = stage_in(send, bytes * size());
  char* out = scratch_out(bytes);
  host_->reduce_scatter(in, out, recv_count, dtype, op);
  if (bytes) memory_->to_buffer(recv, out, bytes);
}

void StagedCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const size_t bytes = send_count * dtype_size(dtype);
  char* in = stage_in(send, bytes);
  char* out = scratch_out(bytes * size());
  host_->all_gather(in, out, send_count, dtype);
  if (bytes) memory_->to_buffer(recv, out, bytes * size());
}

void StagedCommunicator::all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) {
  const size_t bytes = count_per_peer * dtype_size(dtype) * size();
  char* in = stage_in(send, bytes);
  char* out = scratch_out(bytes);
  host_->all_to_all(in, out, count_per_peer, dtype);
  if (bytes) memory_->to_buffer(recv, out, bytes);
}

void StagedCommunicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                                      const std::vector<size_t>& send_displs, void* recv,
                                      const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                      DType dtype) {
  const size_t n = static_cast<size_t>(size()), elem = dtype_size(dtype);
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n)
    throw RuntimeError(cat("all_to_all_v: counts and displacements need ", n, " entries"));
  char* in = stage_in(send, extent(send_counts, send_displs) * elem);
  char* out = scratch_out(extent(recv_counts, recv_displs) * elem);
  host_->all_to_all_v(in, send_counts, send_displs, out, recv_counts, recv_displs, dtype);
  // Only the received blocks: gaps between them keep their device contents, as with MPI.
  for (size_t p = 0; p < n; ++p)
    if (recv_counts[p])
      memory_->to_buffer(static_cast<char*>(recv) + recv_displs[p] * elem, out + recv_displs[p] * elem,
                         recv_counts[p] * elem);
}

void StagedCommunicator::broadcast(void* buffer, size_t count, DType dtype, int root) {
  const size_t bytes = count * dtype_size(dtype);
  char* staged = rank() == root ? stage_in(buffer, bytes) : scratch_out(bytes);
  host_->broadcast(staged, count, dtype, root);
  if (rank() != root && bytes) memory_->to_buffer(buffer, staged, bytes);
}

RequestPtr StagedCommunicator::iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  auto request = std::make_unique<StagedCollective>(memory_, bytes, bytes, recv);
  if (bytes) memory_->to_host(request->in(), send, bytes);
  request->start(host_->iall_reduce(request->in(), request->out(), count, dtype, op));
  return request;
}

RequestPtr StagedCommunicator::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                               ReduceOp op) {
  const size_t bytes = recv_count * dtype_size(dtype);
  auto request = std::make_unique<StagedCollective>(memory_, bytes * size(), bytes, recv);
  if (bytes) memory_->to_host(request->in(), send, bytes * size());
  request->start(host_->ireduce_scatter(request->in(), request->out(), recv_count, dtype, op));
  return request;
}

RequestPtr StagedCommunicator::iall_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const size_t bytes = send_count * dtype_size(dtype);
  auto request = std::make_unique<StagedCollective>(memory_, bytes, bytes * size(), recv);
  if (bytes) memory_->to_host(request->in(), send, bytes);
  request->start(host_->iall_gather(request->in(), request->out(), send_count, dtype));
  return request;
}

RequestPtr StagedCommunicator::isend(const void* buffer, size_t count, DType dtype, int peer, int tag) {
  const size_t bytes = count * dtype_size(dtype);
  auto request = std::make_unique<StagedRequest>(memory_, bytes, nullptr);
  if (bytes) memory_->to_host(request->host(), buffer, bytes);
  request->start(host_->isend(request->host(), count, dtype, peer, tag));
  return request;
}

RequestPtr StagedCommunicator::irecv(void* buffer, size_t count, DType dtype, int peer, int tag) {
  auto request = std::make_unique<StagedRequest>(memory_, count * dtype_size(dtype), buffer);
  request->start(host_->irecv(request->host(), count, dtype, peer, tag));
  return request;
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> sub = host_->split(color, key);
  if (!sub) return nullptr;
  std::unique_ptr<MpiCommunicator> mpi(static_cast<MpiCommunicator*>(sub.release()));
  return std::make_unique<StagedCommunicator>(std::move(mpi), memory_);
}

}  // namespace sextant
