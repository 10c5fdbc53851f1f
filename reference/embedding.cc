#include "reference/embedding.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "reference/f64_tensor.h"

namespace sextant::ref {

namespace {
void check_ids(std::span<const int64_t> ids, int64_t vocab) {
  for (int64_t id : ids)
    if (id < 0 || id >= vocab) throw RuntimeError(cat("ref::embedding: token id ", id, " outside vocab ", vocab));
}
}  // namespace

Tensor embedding_forward(std::span<const int64_t> ids, const Tensor& table_in) {
  const Tensor table = as_f64(table_in);
  if (table.ndim() != 2)
    throw RuntimeError("ref::embedding_forward: table " + shape_string(table.shape()) + " must be [vocab, h]");
  const int64_t vocab = table.dim(0), h = table.dim(1), n = static_cast<int64_t>(ids.size());
  check_ids(ids, vocab);
  Tensor y = Tensor::empty({n, h}, DType::f64);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < h; ++j) y.data<double>()[t * h + j] = table.data<double>()[ids[t] * h + j];
  return y;
}

Tensor embedding_backward(std::span<const int64_t> ids, const Tensor& dy_in, int64_t vocab) {
  const Tensor dy = as_f64(dy_in);
  const int64_t n = static_cast<int64_t>(ids.size()), h = dy.dim(-1);
  check_ids(ids, vocab);
  if (rows_of(dy) != n)
    throw RuntimeError(cat("ref::embedding_backward: dy has ", rows_of(dy), " rows for ", n, " ids"));
  Tensor dtable = Tensor::zeros({vocab, h}, DType::f64);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < h; ++j) dtable.data<double>()[ids[t] * h + j] += dy.data<double>()[t * h + j];
  return dtable;
}

}  // namespace sextant::ref
