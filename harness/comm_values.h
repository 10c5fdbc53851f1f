// Collectives of a few host values (counts, routing statistics) over any
// communicator: called directly on host buffers, staged through a device
// copy where the communicator's buffers live on the device (nccl).
#pragma once

#include <cstddef>

#include "harness/comm.h"

namespace sextant {

void small_all_reduce(Communicator& c, double* values, size_t count, ReduceOp op);
void small_all_to_all(Communicator& c, const double* send, double* recv, size_t count_per_peer);
void small_all_gather(Communicator& c, const double* send, double* recv, size_t count);

}  // namespace sextant
