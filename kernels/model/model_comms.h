// The communicators the model runs on, one per dimension, each timed on the
// clock of the dimension it serves (tp, cp, ep, dp, pp), plus the groups the
// rank grid has no name for: the ranks of one pipeline stage (the MoE
// router's token group) and, for a2a+p2p attention, the two sub-groups of CP.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "harness/comm_wrappers.h"
#include "harness/grid_comms.h"
#include "kernels/model/gpt_config.h"

namespace sextant::model {

// Seconds inside each dimension's calls since the last reset.
struct CommClocks {
  CommClock tp, cp, ep, dp, pp, other;
  CommClocks() { pp.separate_receive_waits = true; }
  void reset();
  // {"tp": s, "cp": s, "ep": s, "dp": s, "pp": s}; pp without its input waits.
  std::map<std::string, double> seconds() const;  // communication
  std::map<std::string, double> exposed() const;  // of which the caller waited
};

struct ModelComms {
  ParallelConfig parallel;
  RankCoords coords;
  Device device = Device::host;           // where the kernel communicators' buffers live: the model's tensors
  Communicator* host = nullptr;           // MPI over the same ranks: bookkeeping (pipeline plan check, loss)
  std::unique_ptr<Communicator> host_pp;  // MPI over the PP group (the pipeline executor's bookkeeping)
  std::unique_ptr<CommClocks> clocks = std::make_unique<CommClocks>();
  // Timed, kernel backend.
  std::unique_ptr<Communicator> world, tp, cp, dp, pp, ep, etp, edp, dp_cp;
  std::unique_ptr<Communicator> self;             // this rank alone (MoE token group, EDP when deferred)
  std::unique_ptr<Communicator> cp_a2a, cp_ring;  // a2a+p2p only
};

// Collective over grid's communicators. `host` must be a host (MPI)
// communicator over the same ranks as the grid; `self` this rank alone.
ModelComms make_model_comms(const GridComms& grid, Communicator& world, Communicator& host, Communicator& self,
                            const GptConfig& config);

}  // namespace sextant::model
