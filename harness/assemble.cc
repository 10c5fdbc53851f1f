#include "harness/assemble.h"

#include <algorithm>
#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

Block block_along(const Tensor& data, int dim, int64_t start) {
  Shape offset(data.shape().size(), 0);
  offset.at(dim < 0 ? dim + data.ndim() : dim) = start;
  return {data, offset};
}

namespace {
// Wire format, in 8-byte words: [n_blocks, then per block: offset[nd], shape[nd],
// payload words...]. Moved as f64 words: the bits are never interpreted.
std::vector<double> pack(const std::vector<Block>& blocks, size_t nd, DType dtype) {
  std::vector<double> out{static_cast<double>(blocks.size())};
  for (const Block& b : blocks) {
    if (b.data.ndim() != static_cast<int>(nd) || b.offset.size() != nd || b.data.dtype() != dtype)
      throw RuntimeError("assemble: block rank or dtype differs from the global tensor");
    Tensor host = b.data.is_host() ? b.data : b.data.to(Device::host);
    for (int64_t o : b.offset) out.push_back(static_cast<double>(o));
    for (int64_t s : host.shape()) out.push_back(static_cast<double>(s));
    size_t words = (host.nbytes() + 7) / 8;
    size_t at = out.size();
    out.resize(at + words, 0.0);
    std::memcpy(out.data() + at, host.raw(), host.nbytes());
  }
  return out;
}
}  // namespace

Assembled assemble(Communicator& comm, const std::vector<Block>& blocks, const Shape& global, DType dtype) {
  if (comm.device() != Device::host) throw RuntimeError("assemble needs a host communicator");
  const size_t nd = global.size();
  const int n = comm.size();
  std::vector<double> mine = pack(blocks, nd, dtype);
  // Everyone learns the message sizes, then sends its words to rank 0 only.
  std::vector<double> sizes(n);
  double my_size = static_cast<double>(mine.size());
  comm.all_gather(&my_size, sizes.data(), 1, DType::f64);
  std::vector<size_t> send_counts(n, 0), send_displs(n, 0), recv_counts(n, 0), recv_displs(n, 0);
  send_counts[0] = mine.size();
  size_t total = 0;
  if (comm.rank() == 0)
    for (int r = 0; r < n; ++r) {
      recv_counts[r] = static_cast<size_t>(sizes[r]);
      recv_displs[r] = total;
      total += recv_counts[r];
    }
  std::vector<double> all(total);
  comm.all_to_all_v(mine.data(), send_counts, send_displs, all.data(), recv_counts, recv_displs, DType::f64);

  Assembled out;
  if (comm.rank() != 0) return out;
  out.tensor = Tensor::zeros(global, dtype);
  const size_t elem = dtype_size(dtype);
  std::vector<char> covered(static_cast<size_t>(out.tensor.numel()), 0);
  auto owners = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(out.tensor.numel()), -1);
  std::vector<int64_t> stride(nd, 1);
  for (int d = static_cast<int>(nd) - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
  auto* dst = static_cast<char*>(out.tensor.raw());
  size_t pos = 0;
  for (int r = 0; r < n; ++r) {
    size_t count = static_cast<size_t>(all[pos++]);
    for (size_t b = 0; b < count; ++b) {
      Shape offset(nd), shape(nd);
      for (size_t d = 0; d < nd; ++d) offset[d] = static_cast<int64_t>(all[pos++]);
      for (size_t d = 0; d < nd; ++d) shape[d] = static_cast<int64_t>(all[pos++]);
      for (size_t d = 0; d < nd; ++d)
        if (offset[d] < 0 || offset[d] + shape[d] > global[d])
          throw RuntimeError(cat("assemble: rank ", r, " block ", shape_string(shape), " at ", shape_string(offset),
                                 " lies outside ", shape_string(global)));
      const auto* src = reinterpret_cast<const char*>(all.data() + pos);
      const int64_t count_el = numel_of(shape);
      pos += (static_cast<size_t>(count_el) * elem + 7) / 8;
      std::vector<int64_t> idx(nd, 0);
      for (int64_t i = 0; i < count_el; ++i) {
        int64_t flat = 0;
        for (size_t d = 0; d < nd; ++d) flat += (offset[d] + idx[d]) * stride[d];
        char* cell = dst + flat * elem;
        if (covered[flat] == 1 && std::memcmp(cell, src + i * elem, elem) != 0) {
          covered[flat] = 2;  // count each divergent element once
          ++out.mismatched;
        }
        std::memcpy(cell, src + i * elem, elem);
        covered[flat] = std::max<char>(covered[flat], 1);
        if ((*owners)[flat] < 0) (*owners)[flat] = r;
        for (int d = static_cast<int>(nd) - 1; d >= 0; --d) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  for (char c : covered) out.uncovered += c ? 0 : 1;
  out.tensor.set_owner_ranks(std::move(owners));
  return out;
}

}  // namespace sextant
