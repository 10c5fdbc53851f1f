#include "harness/kernel_fault.h"

#include "harness/error.h"

namespace sextant {

const std::vector<KernelFaultInfo>& kernel_faults() {
  static const std::vector<KernelFaultInfo> table = {
      {KernelFault::attention_forward_scale, "attention_forward_scale", "attention forward",
       "scores scaled by 1/d instead of 1/sqrt(d)", false},
      {KernelFault::attention_backward_softmax_grad, "attention_backward_softmax_grad", "attention backward",
       "dS = P * dP, missing the - rowsum(dO * O) term", false},
      {KernelFault::attention_merge_lse, "attention_merge_lse", "LSE merge",
       "merged LSE is max(lse_a, lse_b), missing log1p(exp(min - max))", false},
      {KernelFault::causal_mask_diagonal, "causal_mask_diagonal", "causal mask",
       "a query does not see its own key (k < q instead of k <= q)", true},
      {KernelFault::layernorm_forward_variance, "layernorm_forward_variance", "layernorm forward",
       "variance divided by h - 1 instead of h", false},
      {KernelFault::layernorm_backward_mean_term, "layernorm_backward_mean_term", "layernorm backward",
       "dx misses the - xhat * mean(g * xhat) term", false},
      {KernelFault::gelu_backward_coefficient, "gelu_backward_coefficient", "GELU backward",
       "the derivative of 0.044715 x^3 taken as 0.044715 x^2", false},
      {KernelFault::softmax_backward, "softmax_backward", "softmax", "dx = y * dy, missing the - sum(y * dy) term",
       false},
      {KernelFault::cross_entropy_gradient, "cross_entropy_gradient", "cross-entropy",
       "dlogits = softmax, missing the - 1 at the target", false},
      {KernelFault::embedding_backward_duplicates, "embedding_backward_duplicates", "embedding",
       "a repeated token overwrites its gradient row instead of adding to it", false},
      {KernelFault::adam_bias_correction, "adam_bias_correction", "Adam", "the second moment is not bias-corrected",
       false},
      {KernelFault::router_topk_repeats, "router_topk_repeats", "router top-k",
       "choice j skips only the choices before j - 1, so the second choice repeats the first", true},
      {KernelFault::moe_permute_order, "moe_permute_order", "MoE permute",
       "rows within an expert gathered in reverse token order while the map says token order", false},
      {KernelFault::moe_unpermute_order, "moe_unpermute_order", "MoE unpermute",
       "grouped rows read back as if they were in token order", false},
      {KernelFault::moe_combine_twice, "moe_combine_twice", "MoE combine",
       "expert outputs weighted by the routing probability twice", false},
      {KernelFault::pipeline_skip_weight_grad, "pipeline_skip_weight_grad", "pipeline executor",
       "the weight gradient of the last microbatch is never computed", true},
      {KernelFault::gemm_ignores_beta, "gemm_ignores_beta", "gemm wrapper",
       "an accumulating call (beta = 1) overwrites C", true},
  };
  return table;
}

const KernelFaultInfo& kernel_fault_info(KernelFault fault) {
  for (const KernelFaultInfo& info : kernel_faults())
    if (info.fault == fault) return info;
  throw RuntimeError("no kernel fault " + std::to_string(static_cast<int>(fault)));
}

std::optional<KernelFault> find_kernel_fault(const std::string& name) {
  for (const KernelFaultInfo& info : kernel_faults())
    if (name == info.name) return info.fault;
  return std::nullopt;
}

PlantedKernelFault::PlantedKernelFault(KernelFault fault) {
  if (fault != KernelFault::none && detail::planted_kernel_fault.load() != KernelFault::none)
    throw RuntimeError("a kernel fault is already planted");
  detail::planted_kernel_fault.store(fault);
}

PlantedKernelFault::~PlantedKernelFault() { detail::planted_kernel_fault.store(KernelFault::none); }

}  // namespace sextant
