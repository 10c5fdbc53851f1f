#include "harness/blas.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

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

int cores_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int blas_threads_for(int requested, int node_cores, int allowed_cores, int ranks_on_node) {
  const int allowed = std::max(1, allowed_cores);
  if (requested > 0) return std::min(requested, allowed);
  return std::max(1, std::min(allowed, node_cores / std::max(1, ranks_on_node)));
}

}  // namespace sextant
