// What overlapped data-parallel communication needs from the stages' loop
// (GptStages calls it, the Optimizer implements it): when a unit's
// parameters are about to be read, when its weight gradients are final for
// the step, and layer boundaries, where pending collectives are let advance
// (a host rank's nonblocking MPI collective progresses only inside MPI calls).
// Units: kernels/model/gpt_params.h unit_of().
#pragma once

namespace sextant::dp {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // Before a forward reads the unit's parameters.
  virtual void before_forward(int unit) = 0;
  // The last microbatch's weight gradients of the unit were written: its
  // gradients will not change again this step.
  virtual void gradients_final(int unit) = 0;
  // A layer boundary.
  virtual void progress() = 0;
};

}  // namespace sextant::dp
