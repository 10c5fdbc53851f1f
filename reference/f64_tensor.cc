#include "reference/f64_tensor.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ref {

Tensor as_f64(const Tensor& t) {
  if (!t.defined()) throw RuntimeError("reference: undefined tensor");
  if (!t.is_host()) throw RuntimeError("reference: needs host tensors");
  return t.dtype() == DType::f64 ? t : t.to(DType::f64);
}

int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim(); ++d) rows *= t.shape()[d];
  return rows;
}

void expect_shape(std::string_view what, std::string_view name, const Tensor& t, const Shape& expected) {
  if (t.shape() != expected)
    throw RuntimeError(cat(what, ": ", name, " ", shape_string(t.shape()), " must be ", shape_string(expected)));
}

Shape with_last_dim(const Shape& shape, int64_t last) {
  Shape out = shape;
  if (out.empty()) throw RuntimeError("reference: a scalar has no last dimension");
  out.back() = last;
  return out;
}

}  // namespace sextant::ref
