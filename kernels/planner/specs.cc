#include "kernels/planner/specs.h"

#include "harness/strings.h"

namespace sextant::plan {

double ModelSpec::attention_params() const {
  if (attention_params_override > 0) return attention_params_override;
  const double q = static_cast<double>(heads * dhead()), k = static_cast<double>(kv() * dhead());
  const double v = static_cast<double>(kv() * dv()), o = static_cast<double>(heads * dv());
  return hidden * (q + k + v) + o * hidden;
}
double ModelSpec::mlp_params(int64_t width) const { return (swiglu ? 3.0 : 2.0) * hidden * width; }
double ModelSpec::embedding_params() const {
  return (tied_embeddings ? 1.0 : 2.0) * vocab * hidden + (learned_positions ? 1.0 * seq * hidden : 0.0);
}
double ModelSpec::moe_mlp_params() const { return (experts + shared_experts) * mlp_params(moe_ffn) + hidden * experts; }
double ModelSpec::total_params() const {
  return layers * attention_params() + dense_layers() * mlp_params(ffn) + moe_layers * moe_mlp_params() +
         embedding_params();
}
double ModelSpec::active_params() const {
  return layers * attention_params() + dense_layers() * mlp_params(ffn) +
         moe_layers * (topk + shared_experts) * mlp_params(moe_ffn) + embedding_params();
}
double ModelSpec::mtp_params() const {
  const double mlp = moe_layers > 0 ? moe_mlp_params() : mlp_params(ffn);
  return mtp_layers * (attention_params() + mlp + 2.0 * hidden * hidden);
}

std::string TrainSpec::settings() const {
  return cat("linears ", precision == Precision::fp8 ? "fp8" : "bf16", ", attention ",
             attention == AttentionKernel::unfused ? "unfused" : "fused", ", cross-entropy ",
             cross_entropy == CrossEntropy::unfused ? "unfused" : "fused", ", gradients reduced in ",
             grad_reduce == GradReduce::f32 ? "f32" : "bf16", ", overlap tp ", overlap.tp, " dp ", overlap.dp, " ep ",
             overlap.ep, " cp ", overlap.cp, " pp ", overlap.pp);
}

std::string Config::to_string() const {
  std::string s = cat("tp", tp, " cp", cp, " pp", pp, " dp", dp);
  if (ep > 1) s += cat(" ep", ep, " etp", etp);
  if (vpp > 1) s += cat(" vpp", vpp);
  if (sp) s += " sp";
  if (recompute == Recompute::full) s += " recompute";
  if (recompute == Recompute::selective) s += " recompute-selective";
  return s;
}

}  // namespace sextant::plan
