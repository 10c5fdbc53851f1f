// Communicators for every dimension of a rank grid, created once per config
// and passed explicitly to the kernels that need them (no globals).
#pragma once

#include <memory>

#include "harness/comm.h"
#include "harness/grid.h"

namespace sextant {

struct GridComms {
  RankGrid grid;
  int rank = 0;  // this rank in the communicator the grid spans
  std::unique_ptr<Communicator> tp, cp, dp, pp, ep, etp, edp, dp_cp, tp_cp;

  Communicator& get(Dim dim) const;
  RankCoords coords() const { return grid.coords(rank); }
};

// Collective over `world` (whose size must equal config.world()).
GridComms make_grid_comms(Communicator& world, const ParallelConfig& config);

}  // namespace sextant
