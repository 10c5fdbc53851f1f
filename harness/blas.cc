#include "harness/blas.h"

#include <cblas.h>

#include <fstream>
#include <sstream>

namespace sextant {

std::string blas_core() { return openblas_get_corename(); }

std::string best_blas_core() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool f = false, bw = false, vl = false, dq = false, avx2 = false, fma = false;
    for (std::string w; words >> w;) {
      f |= w == "avx512f", bw |= w == "avx512bw", vl |= w == "avx512vl", dq |= w == "avx512dq";
      avx2 |= w == "avx2", fma |= w == "fma";
    }
    if (f && bw && vl && dq) return "SkylakeX";
    if (avx2 && fma) return "Haswell";
    return "";
  }
  return "";
}

std::string blas_core_warning() {
  const std::string core = blas_core(), best = best_blas_core();
  if (best.empty() || (core != "Prescott" && core != "Nehalem" && core != "Core2")) return "";
  return "OpenBLAS runs its generic " + core + " kernels on a CPU that supports " + best +
         " ones (several times slower): export OPENBLAS_CORETYPE=" + best + " before starting sextant";
}

}  // namespace sextant
