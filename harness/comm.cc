#include "harness/comm.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

void wait_all(std::vector<RequestPtr>& requests) {
  for (RequestPtr& r : requests)
    if (r) r->wait();
  requests.clear();
}

uint64_t CommStats::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [op, bytes] : bytes_sent) total += bytes;
  return total;
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    case CommOp::all_to_all: return "all_to_all";
    case CommOp::all_to_all_v: return "all_to_all_v";
    case CommOp::broadcast: return "broadcast";
    case CommOp::send: return "send";
  }
  return "?";
}

void Communicator::count(CommOp op, uint64_t bytes) {
  CommStats& s = stats();
  s.bytes_sent[comm_op_name(op)] += bytes;
  s.calls[comm_op_name(op)] += 1;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<double> lengths(n);
  double my_length = static_cast<double>(mine.size());
  comm.all_gather(&my_length, lengths.data(), 1, DType::f64);
  // Strings travel as raw 2-byte words (f16 is only the carrier; no arithmetic).
  std::string padded = mine;
  padded.resize((mine.size() + 1) / 2 * 2, '\0');
  std::vector<size_t> sc(n, padded.size() / 2), sd(n, 0), rc(n), rd(n);
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    rc[r] = (static_cast<size_t>(lengths[r]) + 1) / 2;
    rd[r] = total;
    total += rc[r];
  }
  std::string all(total * 2, '\0');
  comm.all_to_all_v(padded.data(), sc, sd, all.data(), rc, rd, DType::f16);
  std::vector<std::string> out(n);
  for (int r = 0; r < n; ++r) out[r] = all.substr(rd[r] * 2, static_cast<size_t>(lengths[r]));
  return out;
}

uint64_t ring_bytes_sent(CommOp op, uint64_t bytes, int n) {
  if (n <= 1) return 0;
  switch (op) {
    case CommOp::all_reduce: return 2 * bytes * (n - 1) / n;
    case CommOp::all_gather:
    case CommOp::reduce_scatter:
    case CommOp::all_to_all: return bytes * (n - 1) / n;
    default: return bytes;  // broadcast, send
  }
}

namespace {
void require_same(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw RuntimeError(cat(op, ": send is ", dtype_name(a.dtype()), " but recv is ", dtype_name(b.dtype())));
}
}  // namespace

void Communicator::all_reduce(Tensor& t, ReduceOp op) {
  all_reduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), t.dtype(), op);
}

void Communicator::all_gather(const Tensor& send, Tensor& recv) {
  require_same(send, recv, "all_gather");
  if (recv.numel() != send.numel() * size())
    throw RuntimeError(cat("all_gather: recv has ", recv.numel(), " elements, expected ", send.numel() * size()));
  all_gather(send.raw(), recv.raw(), static_cast<size_t>(send.numel()), send.dtype());
}

void Communicator::reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op) {
  require_same(send, recv, "reduce_scatter");
  if (send.numel() != recv.numel() * size())
    throw RuntimeError(cat("reduce_scatter: send has ", send.numel(), " elements, expected ", recv.numel() * size()));
  reduce_scatter(send.raw(), recv.raw(), static_cast<size_t>(recv.numel()), send.dtype(), op);
}

void Communicator::all_to_all(const Tensor& send, Tensor& recv) {
  require_same(send, recv, "all_to_all");
  if (send.numel() != recv.numel() || send.numel() % size() != 0)
    throw RuntimeError(cat("all_to_all: ", send.numel(), " elements do not split over ", size(), " ranks"));
  all_to_all(send.raw(), recv.raw(), static_cast<size_t>(send.numel() / size()), send.dtype());
}

void Communicator::broadcast(Tensor& t, int root) {
  broadcast(t.raw(), static_cast<size_t>(t.numel()), t.dtype(), root);
}

double Communicator::all_reduce_value(double value, ReduceOp op) {
  Tensor t = Tensor::from_values({1}, {value}, DType::f64).to(device());
  all_reduce(t, op);
  return t.to(Device::host).at(0);
}

int64_t Communicator::all_reduce_count(int64_t value) {
  // Doubles hold integers exactly up to 2^53, far beyond any element count here.
  return static_cast<int64_t>(all_reduce_value(static_cast<double>(value), ReduceOp::sum));
}

}  // namespace sextant
