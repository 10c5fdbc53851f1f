// Peer memory for the MPI backend: one POSIX shared-memory segment of
// size() parts, mapped by every rank of the communicator when they all run on
// one node (MPI_Comm_split_type). Rank 0 creates and sizes the segment
// (posix_fallocate, so a full /dev/shm refuses here instead of failing a page
// fault later), the others map it by name, and the name is unlinked once
// every rank holds a mapping: a killed rank leaves nothing behind, and each
// process unmaps its own view without a collective. MPI-3 shared windows
// would do the same, but MPI_Win_free is collective, and tensors viewing the
// memory can outlive a layer at different points on different ranks.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "harness/comm_mpi.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {
namespace {

constexpr size_t kPage = 4096;

class SharedSegment : public PeerMemory {
 public:
  SharedSegment(MPI_Comm comm, char* base, size_t part, size_t bytes, int ranks)
      : comm_(comm), base_(base), part_(part), bytes_(bytes), ranks_(ranks) {}
  ~SharedSegment() override { munmap(base_, part_ * static_cast<size_t>(ranks_)); }
  size_t bytes() const override { return bytes_; }
  char* at(int rank) override {
    if (rank < 0 || rank >= ranks_) throw RuntimeError(cat("peer memory: rank ", rank, " of ", ranks_));
    return base_ + part_ * static_cast<size_t>(rank);
  }
  void sync() override {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    check_mpi(MPI_Barrier(comm_), "MPI_Barrier (peer memory)");
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 private:
  MPI_Comm comm_;  // borrowed: the communicator outlives every sync()
  char* base_;
  size_t part_, bytes_;
  int ranks_;
};

// True on every rank when the ranks of comm all share one node.
bool on_one_node(MPI_Comm comm, int size) {
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  int local = node_size == size ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &local, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return local == 1;
}

}  // namespace

std::shared_ptr<PeerMemory> MpiCommunicator::peer_memory(size_t bytes) {
  if (!on_one_node(comm_, size_)) return nullptr;
  static std::atomic<unsigned> serial{0};
  const size_t part = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  const size_t total = part * static_cast<size_t>(size_);
  char name[64] = {};
  int fd = -1, created = 0;
  if (rank_ == 0) {
    std::snprintf(name, sizeof name, "/sextant-%d-%u", static_cast<int>(getpid()), serial++);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    created = fd >= 0 && ftruncate(fd, static_cast<off_t>(total)) == 0 &&
              posix_fallocate(fd, 0, static_cast<off_t>(total)) == 0;
  }
  check_mpi(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm_), "MPI_Bcast");
  check_mpi(MPI_Bcast(&created, 1, MPI_INT, 0, comm_), "MPI_Bcast");
  if (rank_ != 0 && created) fd = shm_open(name, O_RDWR, 0600);
  void* base = MAP_FAILED;
  if (created && fd >= 0) base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) close(fd);
  int mapped = base != MAP_FAILED ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
  if (rank_ == 0 && name[0]) shm_unlink(name);  // every rank has mapped it, or given up
  if (!mapped) {
    if (base != MAP_FAILED) munmap(base, total);
    return nullptr;
  }
  return std::make_shared<SharedSegment>(comm_, static_cast<char*>(base), part, bytes, size_);
}

}  // namespace sextant
