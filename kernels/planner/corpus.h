// Published training runs, each a model on a cluster with its parallel
// config, precision and overlap settings, the throughput its authors
// reported and where: the rows of `sextant plan --reference`, and what the
// time model's free parameters are fitted on (fit.h).
#pragma once

#include <string>
#include <vector>

#include "kernels/planner/planner.h"

namespace sextant::plan {

struct PublishedRun {
  std::string label;
  ModelSpec model;
  std::string device;
  int64_t gpus = 0, gpus_per_node = 8;
  TrainSpec train;  // the batch and every step setting
  Config config;
  // Model FLOPs (Megatron's formula, planner.h model_flops_per_step) per
  // second and GPU over the device's dense bf16 peak, as reported or
  // converted from the reported figure (how: in `source`).
  double reported_mfu = 0;
  std::string source;
  // A round figure with no measurement behind it (the tutorial's table):
  // shown beside the planner, left out of the fit and its statistics.
  bool illustrative = false;
};

// Every row; at least one per source family (Megatron-LM README scaling
// table, NeMo / Megatron-Bridge performance summaries, the Llama 3 paper,
// the DeepSeek-V3 report, the 6D tutorial's table).
const std::vector<PublishedRun>& published_runs();

ClusterSpec run_cluster(const PublishedRun& r);

}  // namespace sextant::plan
