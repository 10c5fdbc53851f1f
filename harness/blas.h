// Which OpenBLAS kernels run. OpenBLAS picks them at load time from the CPU
// id; 0.3.21 (Debian 12) does not know recent Xeons and falls back to its
// generic SSE3 "Prescott" kernels, about 6x slower than the AVX-512 ones.
// OPENBLAS_CORETYPE must be set before the process starts to fix that, so the
// scripts and the test environment set it; sextant warns when it is missing.
#pragma once

#include <string>

namespace sextant {

std::string blas_core();  // e.g. "SkylakeX", "Haswell", "Prescott"
// The best OPENBLAS_CORETYPE this CPU supports from its flags ("" if unsure).
std::string best_blas_core();
// One line of advice when OpenBLAS runs generic kernels on a better CPU; "" otherwise.
std::string blas_core_warning();

}  // namespace sextant
