#include "kernels/ops/attention_impl.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ops {

std::string attention_impl_name(AttentionImpl impl) { return impl == AttentionImpl::cudnn ? "cudnn" : "own"; }

AttentionImpl parse_attention_impl(const std::string& name) {
  if (std::optional<AttentionImpl> i =
          find_named<AttentionImpl>({{"own", AttentionImpl::own}, {"cudnn", AttentionImpl::cudnn}}, name))
    return *i;
  throw UsageError(cat("attention_impl must be own or cudnn, not '", name, "'"));
}

bool fused_attention_supports(DType dtype, int64_t head_dim) {
  return (dtype == DType::bf16 || dtype == DType::f16) && head_dim > 0 && head_dim % 8 == 0 && head_dim <= 128;
}

OptionSpec attention_impl_option() {
  return OptionSpec::choice("attention_impl", {"own", "cudnn"},
                            "attention kernels on a GPU: cudnn (cuDNN's fused SDPA for bf16/f16 with head_dim a "
                            "multiple of 8 up to 128, our kernels otherwise; default on cuda) or own");
}

void record_attention_impl(const SweepRequest& req, nlohmann::json& params) {
  if (req.device == Device::cuda || req.has("attention_impl"))
    params["attention_impl"] = req.get<std::string>("attention_impl", attention_impl_name(AttentionImpl::cudnn));
}

AttentionImpl attention_impl_of(const nlohmann::json& params) {
  return parse_attention_impl(params.value("attention_impl", std::string("own")));
}

void require_attention_impl_runs(AttentionImpl impl, Device device) {
  require(impl == AttentionImpl::own || device == Device::cuda,
          "--set attention_impl=cudnn needs --device cuda (on the host every block runs the host kernel)");
}

}  // namespace sextant::ops
