// The parameter blocks one rank holds (the layers of its pipeline stages,
// the embedding with the first stage, the final LayerNorm and head with the
// last), each with its f32 gradient accumulator and Adam state. Kernel
// weight structs are views of the `compute` tensors (shared storage): in f32
// those are the parameters themselves, which the optimizer updates in place;
// in bf16 they are copies, rounded again by refresh_compute() after every
// update (mixed precision: f32 master weights, bf16 compute).
#pragma once

#include <string>
#include <vector>

#include "kernels/data_parallel/trained_param.h"
#include "kernels/model/gpt_params.h"

namespace sextant::model {

// value, grad and the moments are [block.local] f32 (dp::TrainedParam).
struct Param : dp::TrainedParam {
  const ParamSpec* spec = nullptr;
  ParamBlock block;
  Tensor compute;  // [block.local] in the model's dtype: value itself in f32, else a rounded copy
};

class ParamStore {
 public:
  // Holds the blocks of the layers in [first_layer, last_layer) of stages
  // this rank runs; with_embedding / with_head for the first / last stage.
  // Every tensor (values, gradients, moments) lives on `device`.
  ParamStore(const GptConfig& config, const ParallelConfig& parallel, const RankCoords& coords,
             const std::vector<int>& layers, bool with_embedding, bool with_head, Device device = Device::host);

  // Initial values from the seed; gradients and Adam moments zeroed.
  void initialize(uint64_t seed);
  void zero_grads();
  // compute = value rounded to the compute dtype (nothing to do in f32),
  // for every block or some.
  void refresh_compute();
  void refresh_compute(const std::vector<dp::TrainedParam*>& params);
  // The blocks as the optimizer trains them, in store order.
  dp::TrainedSet trained_set();
  DType compute_dtype() const { return compute_dtype_; }

  Device device() const { return device_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  // The block of a named parameter (expert parameters: of a local expert).
  Param& get(const std::string& name, int local_expert = -1);
  bool holds(const std::string& name) const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<Param> params_;
  int64_t layers_ = 0;
  Device device_;
  DType compute_dtype_;
};

}  // namespace sextant::model
