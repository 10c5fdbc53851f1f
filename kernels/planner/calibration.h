// A calibration: the component rates of one machine, measured, from which
// the calibrated planner (step_cost.h) builds a step time.
//
//   gemm        t(m, n, k) = overhead + 2mnk / flops_rate + 4(mk + kn + mn) / bytes_rate,
//               fitted to measured gemms (ops/gemm, or the step model's own shapes)
//   attention   t = overhead + flops / rate        (the attention block op, forward + backward)
//   elementwise t = overhead + bytes / rate        (LayerNorm, GELU, residual adds, Adam: memory-bound)
//   moe routing t = overhead + tokens / rate       (the MoE layer's work outside its ops: routing
//               bookkeeping, permutes into expert order and back, the weighted combine; forward
//               and backward apart; 0: not measured, those bytes are costed as elementwise)
//   links       t = latency + bus bytes / busbw   per collective, group kind (intra-/inter-node)
//               and group size, fitted to measured sizes (collectives suite, or the sweep's own)
//   p2p         the latency of one pipeline boundary message (pipeline's p2p_latency_s)
//
// Rates are one rank's with the cores to itself (the ops suite runs on one
// rank while the others wait; the sweep times short windows, shorter than a
// scheduler time slice). step_cost.h scales the compute by how much slower
// it runs where ranks share the cores: measured (the sweep's contention
// probe) or estimated from ranks and cores. The bubble is not a rate:
// step_cost.h runs the pipeline simulator with the costs built from these.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sextant::plan {

// C [m, n] = op(A) op(B), reduction k; ta, tb: A or B transposed.
struct GemmSample {
  double m = 0, n = 0, k = 0, seconds = 0;
  bool ta = false, tb = false;
};
struct GemmModel {
  double overhead_s = 0, flops_per_s = 0, bytes_per_s = 0;
  std::map<std::string, double> measured;  // "m n k ta tb" -> seconds: exact shapes win over the fit
  double seconds(double m, double n, double k, bool ta = false, bool tb = false) const;
};
// Least squares on the relative error with non-negative coefficients.
GemmModel fit_gemm(const std::vector<GemmSample>& samples);

struct RateSample {
  double work = 0, seconds = 0;  // FLOPs or bytes
};
struct RateModel {
  double overhead_s = 0, per_s = 0;
  double seconds(double work) const;
};
RateModel fit_rate(const std::vector<RateSample>& samples);

// One collective: t = latency + bus bytes / busbw, bus bytes as nccl-tests
// counts them (all_reduce 2(n-1)/n of the buffer, all_gather /
// reduce_scatter / all_to_all (n-1)/n, sendrecv the message).
struct LinkModel {
  double latency_s = 0, busbw_Bps = 0;
  double seconds(double bus_bytes) const;
};
RateModel fit_link_as_rate(const std::vector<RateSample>& bus_bytes_samples);
// The bus-byte factor of an operation over n ranks.
double bus_factor(const std::string& op, int n);

struct Calibration {
  std::string source;      // "step/sweep, this run" or the results file
  int cores_per_node = 1;  // of the machine measured
  GemmModel gemm;
  RateModel attention, elementwise;
  RateModel moe_forward, moe_backward;  // per token the MoE layer routes on a rank
  // "op/kind/n", e.g. "all_reduce/intra/2"; kind intra or inter.
  std::map<std::string, LinkModel> links;
  double p2p_latency_s = 0;
  // Seconds of a reference kernel (a 128^3 sgemm, every rank at once) at the
  // machine's speed the compute rates above stand for; a run that times the
  // same kernel beside its steps scales compute by the ratio (a shared or
  // virtual machine's cores change speed over seconds). 0: not recorded.
  double reference_s = 0;

  // The link of op over n ranks of this kind: the exact group size, else
  // the nearest measured one of the kind, else of any kind; zero cost when
  // nothing of op was measured (n = 1 never communicates).
  LinkModel link(const std::string& op, bool inter_node, int n) const;
  double collective_seconds(const std::string& op, bool inter_node, int n, double buffer_bytes) const;
};
void to_json(nlohmann::json& j, const Calibration& c);
void from_json(const nlohmann::json& j, Calibration& c);

// From a results document: ops/gemm (every shape, in `dtype`), ops/attention,
// ops/layernorm and ops/gelu (bytes/s), collectives (time per size, group
// kind and size), pipeline p2p_latency_s. A step/sweep case that recorded
// its own calibration wins. Throws UsageError naming what is missing.
Calibration calibration_from_results(const nlohmann::json& doc, const std::string& dtype = "f32");

}  // namespace sextant::plan
