// A parameter block as data-parallel training sees it: its f32 master value,
// gradient and Adam moments, the unit of the step it belongs to (gradient
// buckets hold whole units, in the reverse order the backward finishes
// them), the group its gradient is summed over, and whether under SP its
// gradient is first a partial sum over TP. The model's parameter store
// (kernels/model/param_store.h) holds these with the model's own facts.
#pragma once

#include <functional>
#include <vector>

#include "harness/device.h"
#include "harness/tensor.h"

namespace sextant::dp {

enum class GradGroup { dense, expert };  // dense: dp x cp; expert: EDP

struct TrainedParam {
  Tensor value;                // f32, what the optimizer updates
  Tensor grad;                 // f32, summed over microbatches, then reduced
  Tensor exp_avg, exp_avg_sq;  // Adam moments (unsharded optimizer: allocated by it; undefined otherwise)
  int unit = 0;                // the step unit (0 first in the forward)
  GradGroup group = GradGroup::dense;
  bool sp_partial = false;    // replicated over TP; under SP its gradient is a partial sum over TP
  bool is_layernorm = false;  // a LayerNorm's gamma or beta
};

// What an optimizer trains: the blocks in a fixed order, where they live,
// how many units the step has, and how the compute copies of updated blocks
// are refreshed (mixed precision: bf16 copies of the f32 masters).
struct TrainedSet {
  std::vector<TrainedParam*> params;
  Device device = Device::host;
  int units = 0;
  std::function<void(const std::vector<TrainedParam*>&)> refresh_compute = [](const std::vector<TrainedParam*>&) {};
};

}  // namespace sextant::dp
