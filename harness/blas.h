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

// The cores this process may run on (its affinity mask: mpirun binds each
// rank to one core when it starts no more ranks than 2, and a rank may be
// given any set); the machine's count where the mask cannot be read.
int cores_allowed();
// OpenBLAS threads for a rank: the request (0: none) capped at the cores it
// may run on, else the node's cores shared by its ranks and no more than it
// may run on; at least 1. Threads beyond that only take turns on a core.
int blas_threads_for(int requested, int node_cores, int allowed_cores, int ranks_on_node);

}  // namespace sextant
