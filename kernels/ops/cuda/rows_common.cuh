// Launch helpers of the row kernels (rows.cu, cross_entropy.cu): one block
// per row, rows read in 16-byte vectors where they allow it.
#pragma once

#include <initializer_list>

#include "kernels/ops/cuda/device_common.cuh"

namespace sextant::ops::cuda {

// Whether rows of n elements of T at these pointers go in 16-byte vectors,
// and the threads a row then wants.
template <class T>
bool row_vectors(int64_t n, std::initializer_list<const void*> pointers) {
  return n % Vec16<T>::kWidth == 0 && vectors_of<T>(n, pointers) > 0;
}
template <class T>
int row_vector_threads(int64_t n, bool vec) {
  return row_threads(vec ? n / Vec16<T>::kWidth : n);
}

inline unsigned rows_grid(int64_t rows) {
  if (rows > 0x7fffffff) throw RuntimeError(cat("row kernels on CUDA: ", rows, " rows exceed the grid"));
  return static_cast<unsigned>(rows);
}

inline int64_t rows_of(const Tensor& t) { return t.dim(-1) ? t.numel() / t.dim(-1) : 0; }

}  // namespace sextant::ops::cuda
