#include "harness/gpu_binding.h"

#include <algorithm>
#include <string>
#include <vector>

#include "harness/comm_mpi.h"
#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
int all_reduce_int(int value, MPI_Op op, MPI_Comm comm) {
  int out = value;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_INT, op, comm), "MPI_Allreduce");
  return out;
}
}  // namespace

GpuBinding bind_gpus(MPI_Comm comm) {
  if (!cuda_built())
    throw UsageError(
        "--device cuda needs a CUDA build: this sextant was built without CUDA (SEXTANT_CUDA=OFF or no nvcc)");
  GpuBinding b;
  const int seen = cuda_device_count();
  b.visible_gpus = all_reduce_int(seen, MPI_MIN, comm);
  if (b.visible_gpus == 0)
    throw UsageError("--device cuda: no CUDA device is visible " +
                     std::string(seen == 0 ? "on this machine" : "to some ranks") +
                     " (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int local_size = 1;
  MPI_Comm_rank(node, &b.local_rank);
  MPI_Comm_size(node, &local_size);
  b.ranks_per_node = all_reduce_int(local_size, MPI_MAX, comm);
  b.device = b.local_rank % seen;
  cuda_set_device(b.device);
  // Which physical GPUs the ranks of this node ended up on.
  std::string uuid = cuda_device_uuid();
  uuid.resize(16, '\0');
  std::vector<char> all(16 * static_cast<size_t>(local_size));
  check_mpi(MPI_Allgather(uuid.data(), 16, MPI_CHAR, all.data(), 16, MPI_CHAR, node), "MPI_Allgather");
  MPI_Comm_free(&node);
  std::vector<std::string> uuids;
  for (int r = 0; r < local_size; ++r) uuids.emplace_back(all.data() + 16 * r, 16);
  std::sort(uuids.begin(), uuids.end());
  bool shared_here = std::adjacent_find(uuids.begin(), uuids.end()) != uuids.end();
  b.shared = all_reduce_int(shared_here ? 1 : 0, MPI_MAX, comm) != 0;
  return b;
}

}  // namespace sextant
