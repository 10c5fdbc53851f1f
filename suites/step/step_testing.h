// What the step suite's tests share (step_test.cc, sweep_test.cc): the ci
// run options and a record's failures, one line each.
#pragma once

#include <string>
#include <vector>

#include "harness/runner.h"
#include "harness/testing/suite_run.h"

namespace sextant::step_testing {

// Profile ci at this world's rank count, `selection` the cases to run.
inline RunOptions ci(std::vector<std::string> selection = {"step/train"}) {
  RunOptions o = testing::ci_options(std::move(selection));
  o.rank_counts = {testing::world().size()};
  return o;
}

// The dense model (no MoE layers) in bf16.
inline RunOptions dense_bf16() {
  RunOptions o = ci();
  o.dtypes = {DType::bf16};
  o.options["moe_every"] = 0;
  return o;
}

// What failed, one line each (at most 12).
inline std::string failures(const CaseRecord& r) {
  std::string out;
  int shown = 0;
  for (const std::string& f : r.conformance.failures)
    if (shown++ < 12) out += "  " + f + "\n";
  for (const TensorCheck& t : r.conformance.tensors)
    if (!t.pass && shown++ < 12)
      out += "  " + t.name + " error " + std::to_string(t.error) + " bound " + std::to_string(t.bound) + "\n";
  return out;
}

}  // namespace sextant::step_testing
