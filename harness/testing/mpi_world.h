// The world communicator for MPI tests (tests are collective over it).
#pragma once

#include "harness/comm_mpi.h"

namespace sextant::testing {

inline MpiCommunicator& world() {
  static MpiCommunicator comm(MPI_COMM_WORLD, false);
  return comm;
}

}  // namespace sextant::testing
