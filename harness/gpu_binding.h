// Which GPU each rank uses, and whether the ranks have one GPU each
// (NCCL wants one process per GPU; several ranks may share a GPU in the
// staged mode).
#pragma once

#include <mpi.h>

namespace sextant {

struct GpuBinding {
  int device = 0;          // the CUDA device this rank uses (of those it sees)
  int local_rank = 0;      // this rank's index among the ranks of its node
  int ranks_per_node = 1;  // the most ranks on any node
  int visible_gpus = 0;    // the fewest GPUs any rank sees
  bool shared = false;     // some GPU serves two ranks of one node (by UUID)
};

// Collective over comm: binds each rank to GPU local_rank % (GPUs it sees),
// then compares GPU UUIDs within each node, so that ranks which each see one
// GPU (CUDA_VISIBLE_DEVICES set per rank by a launcher) count as distinct.
// Every rank returns the same ranks_per_node, visible_gpus and shared.
// Throws UsageError (on every rank) when the build has no CUDA or a rank sees no GPU.
GpuBinding bind_gpus(MPI_Comm comm);

}  // namespace sextant
