// Writes tensors in numpy's .npy format (version 1.0) so a failing case can
// be opened with numpy.load. bf16 has no numpy dtype: it is written as f32.
#pragma once

#include <string>

#include "harness/tensor.h"

namespace sextant {

void write_npy(const std::string& path, const Tensor& tensor);
// Reads f64/f32/f16 .npy files written by write_npy (for tests and tools).
Tensor read_npy(const std::string& path);

}  // namespace sextant
