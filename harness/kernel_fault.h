// Planted faults inside shared kernels: the ops that every run executes, the
// one-device baseline included (attention blocks, LayerNorm, GELU, softmax,
// cross-entropy, embedding, Adam, the MoE router and permutations, the
// pipeline executor, the gemm wrapper). Each is a bug a real implementation
// has had. A suite's distributed-only faults (a skipped ring step, a missing
// reduction) are cleared for its baseline and caught by the distributed
// bound; these are not cleared, so only the absolute gate on the baseline
// (harness/tolerance.h) can catch them, and a test proves that it does.
//
// Kernels sit deep under the suites, so a fault point is read from the
// process rather than threaded through every signature: the runner plants a
// fault for one case (PlantedKernelFault, a scope) and kernels ask
// kernel_fault_planted(KernelFault::x) on their host paths. The check costs
// one relaxed atomic load per kernel call.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace sextant {

enum class KernelFault {
  none,
  attention_forward_scale,          // scores scaled by 1/d instead of 1/sqrt(d) in the forward
  attention_backward_softmax_grad,  // dS = P * dP: the - rowsum(dO * O) term is missing
  attention_merge_lse,              // merged LSE = max(lse_a, lse_b), without the log1p(exp(min - max)) term
  causal_mask_diagonal,             // a query does not see its own key (k < q instead of k <= q)
  attention_window_off_by_one,      // a sliding window one key wider than asked (left + 1, else right + 1)
  attention_gqa_head_map,           // query head h reads KV head h % kv instead of h / (heads / kv)
  attention_scale_from_v_dim,       // MLA: softmax scale 1/sqrt(d_v) from V's head dim, not 1/sqrt(d_qk)
  layernorm_forward_variance,       // variance divided by h - 1 (unbiased) instead of h
  layernorm_backward_mean_term,     // dx misses the - xhat * mean(g * xhat) term
  gelu_backward_coefficient,        // d/dx of 0.044715 x^3 taken as 0.044715 x^2 (the factor 3 lost)
  softmax_backward,                 // dx = y * dy: the - sum(y * dy) term is missing
  cross_entropy_gradient,           // dlogits = softmax: the - 1 at the target is missing
  cross_entropy_counts_ignored,     // the mean divides by every row, ignored (padding) targets included
  embedding_backward_duplicates,    // a token seen twice overwrites its gradient row instead of adding
  adam_bias_correction,             // the second moment is not bias-corrected
  router_topk_repeats,         // top-k excludes only the choices before the previous one: choice 2 repeats choice 1
  router_choice_bias,          // the top-k sees expert 0's logit raised by 1% of the token's largest |logit|
  moe_permute_order,           // rows grouped by expert in reverse token order while the map says forward
  moe_unpermute_order,         // grouped rows read back as if they were in token order
  moe_combine_twice,           // expert outputs weighted by the routing probability twice
  pipeline_skip_weight_grad,   // the executor skips the weight gradient of the last microbatch
  gemm_ignores_beta,           // C = alpha A B overwrites C when the caller asked to accumulate (beta = 1)
  attention_pieces_drop_last,  // the piece driver (cuDNN's path) loses a masked block's last piece
  fp8_scale_inverse_twice,     // the FP8 gemm multiplies A's values by its decode scale twice
  fp8_forward_weight_e5m2,     // weights quantized to E5M2 where the recipe says E4M3
  fp8_block_scale_neighbour,   // a block's scale computed from the amax of the next block
  fp8_saturation_wraps,        // a value past the format's range wraps around instead of saturating
  fp8_history_not_rolled,      // delayed scaling overwrites the newest amax instead of rolling the history
};

struct KernelFaultInfo {
  KernelFault fault;
  const char* name;    // as --fault takes it
  const char* family;  // the op family it breaks
  const char* bug;     // one line
  bool cuda;           // also planted in the CUDA path (else --device cuda refuses it)
  // Whether the one-device baseline runs the faulty code, so that the gate
  // catches it; false for code a case checks beside its baseline (the piece
  // driver against the whole block), where the distributed side fails.
  bool in_baseline = true;
};

inline const std::vector<KernelFaultInfo>& kernel_faults() {
  static const std::vector<KernelFaultInfo> table = {
      {KernelFault::attention_forward_scale, "attention_forward_scale", "attention forward",
       "scores scaled by 1/d instead of 1/sqrt(d)", false},
      {KernelFault::attention_backward_softmax_grad, "attention_backward_softmax_grad", "attention backward",
       "dS = P * dP, missing the - rowsum(dO * O) term", false},
      {KernelFault::attention_merge_lse, "attention_merge_lse", "LSE merge",
       "merged LSE is max(lse_a, lse_b), missing log1p(exp(min - max))", false},
      {KernelFault::causal_mask_diagonal, "causal_mask_diagonal", "causal mask",
       "a query does not see its own key (k < q instead of k <= q)", true},
      {KernelFault::attention_window_off_by_one, "attention_window_off_by_one", "sliding-window mask",
       "the window is one key wider than asked: a query also sees the key LEFT + 1 before it (RIGHT + 1 after it "
       "where only that side is bounded)",
       true},
      {KernelFault::attention_gqa_head_map, "attention_gqa_head_map", "attention (GQA)",
       "query head h reads KV head h % kv (heads repeated) instead of h / (heads / kv) (each KV head's own "
       "consecutive query heads)",
       false},
      {KernelFault::attention_scale_from_v_dim, "attention_scale_from_v_dim", "attention (MLA)",
       "q/k and v head dims differ (MLA) and the softmax scale is taken from v's: 1/sqrt(d_v) instead of "
       "1/sqrt(d_qk)",
       true},
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
      {KernelFault::cross_entropy_counts_ignored, "cross_entropy_counts_ignored", "cross-entropy",
       "the mean (loss and gradient) divides by every row, rows with the ignored padding target included", true},
      {KernelFault::embedding_backward_duplicates, "embedding_backward_duplicates", "embedding",
       "a repeated token overwrites its gradient row instead of adding to it", false},
      {KernelFault::adam_bias_correction, "adam_bias_correction", "Adam", "the second moment is not bias-corrected",
       false},
      {KernelFault::router_topk_repeats, "router_topk_repeats", "router top-k",
       "choice j skips only the choices before j - 1, so the second choice repeats the first", true},
      {KernelFault::router_choice_bias, "router_choice_bias", "router top-k",
       "a selection bias applied where none is set (as aux-loss-free balancing adds one): the top-k sees expert "
       "0's logit raised by 1% of the token's largest |logit|, the probabilities the true logits",
       false},
      {KernelFault::moe_permute_order, "moe_permute_order", "MoE permute",
       "rows within an expert gathered in reverse token order while the map says token order", false},
      {KernelFault::moe_unpermute_order, "moe_unpermute_order", "MoE unpermute",
       "grouped rows read back as if they were in token order", false},
      {KernelFault::moe_combine_twice, "moe_combine_twice", "MoE combine",
       "expert outputs weighted by the routing probability twice", false},
      {KernelFault::pipeline_skip_weight_grad, "pipeline_skip_weight_grad", "pipeline executor",
       "the weight gradient of the last microbatch is never computed", true},
      {KernelFault::attention_pieces_drop_last, "attention_pieces_drop_last", "attention pieces",
       "a masked block cut into several pieces loses its last one (keys some rows should see)", true, false},
      {KernelFault::gemm_ignores_beta, "gemm_ignores_beta", "gemm wrapper",
       "an accumulating call (beta = 1) overwrites C", true},
      {KernelFault::fp8_scale_inverse_twice, "fp8_scale_inverse_twice", "FP8 gemm",
       "A's values multiplied by its decode scale (scale_inv) twice", true},
      {KernelFault::fp8_forward_weight_e5m2, "fp8_forward_weight_e5m2", "FP8 quantization",
       "weights quantized to E5M2 where the recipe says E4M3 (forward operands)", true},
      {KernelFault::fp8_block_scale_neighbour, "fp8_block_scale_neighbour", "FP8 block scaling",
       "each block's scale computed from the amax of the block after it (block and mxfp8 recipes)", true},
      {KernelFault::fp8_saturation_wraps, "fp8_saturation_wraps", "FP8 cast",
       "a scaled value past the format's largest finite value wraps around (exponent overflow) instead of "
       "saturating",
       true},
      {KernelFault::fp8_history_not_rolled, "fp8_history_not_rolled", "FP8 delayed scaling",
       "each step's amax overwrites the newest history slot instead of rolling the history, so the window "
       "holds one step",
       true},
  };
  return table;
}
const KernelFaultInfo& kernel_fault_info(KernelFault fault);
// The fault of that name, or nothing when it is not a kernel fault.
std::optional<KernelFault> find_kernel_fault(const std::string& name);

namespace detail {
inline std::atomic<KernelFault> planted_kernel_fault{KernelFault::none};
}

// Whether `fault` is planted in this process now.
inline bool kernel_fault_planted(KernelFault fault) {
  return detail::planted_kernel_fault.load(std::memory_order_relaxed) == fault;
}

// Plants a fault for the lifetime of the scope (none: a scope that plants
// nothing). Scopes do not nest.
class PlantedKernelFault {
 public:
  explicit PlantedKernelFault(KernelFault fault);
  ~PlantedKernelFault();
  PlantedKernelFault(const PlantedKernelFault&) = delete;
  PlantedKernelFault& operator=(const PlantedKernelFault&) = delete;
};

}  // namespace sextant
