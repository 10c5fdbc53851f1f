#include "kernels/ops/fp8_recipe.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"

namespace sextant::ops {

namespace {

const char* const kScalingNames[] = {"delayed", "current", "block", "mxfp8"};
constexpr int kMxBlock = 32;  // OCP MX: 32 elements share one E8M0 scale

// fp8_max / amax in f32 (TransformerEngine's compute_scale_from_amax): 1
// where the amax is zero or not finite, the largest float where the quotient
// overflows; pow2 truncates the mantissa (rounds down to a power of two).
float scale_from_amax(float amax, float fp8_max, bool pow2) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  float scale = fp8_max / amax;
  if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
  if (pow2) scale = std::bit_cast<float>(std::bit_cast<uint32_t>(scale) & 0xff800000u);
  return scale;
}

// MX: the E8M0 exponent of amax / fp8_max rounded up to a power of two, so
// that the block's largest value divided by it fits the format.
int mx_exponent(float amax, float fp8_max) {
  const uint32_t bits = std::bit_cast<uint32_t>(amax / fp8_max);
  int biased = static_cast<int>((bits >> 23) & 0xffu);
  if ((bits & 0x7fffffu) != 0) ++biased;
  return std::min(biased, 254) - 127;
}

}  // namespace

Fp8Format Fp8Recipe::format_of(Fp8Role role) const {
  return role == Fp8Role::gradient && formats == Fp8Formats::hybrid ? Fp8Format::e5m2 : Fp8Format::e4m3;
}

std::string Fp8Recipe::name() const { return kScalingNames[static_cast<int>(scaling)]; }

Fp8Recipe default_fp8_recipe(Fp8Scaling scaling) {
  Fp8Recipe r;
  r.scaling = scaling;
  r.formats = scaling == Fp8Scaling::block || scaling == Fp8Scaling::mxfp8 ? Fp8Formats::e4m3 : Fp8Formats::hybrid;
  return r;
}

std::vector<std::string> fp8_scaling_names() { return {std::begin(kScalingNames), std::end(kScalingNames)}; }

Fp8Scaling parse_fp8_scaling(const std::string& name) {
  for (int i = 0; i < 4; ++i)
    if (name == kScalingNames[i]) return static_cast<Fp8Scaling>(i);
  throw UsageError("unknown FP8 recipe '" + name + "' (one of " + join(fp8_scaling_names(), ", ") + ")");
}

std::vector<OptionSpec> fp8_recipe_options() {
  return {
      OptionSpec::choice("fp8_recipe", fp8_scaling_names(),
                         "FP8 scaling (TransformerEngine's DelayedScaling, Float8CurrentScaling, "
                         "Float8BlockScaling, MXFP8BlockScaling)"),
      OptionSpec::choice("fp8_format", {"hybrid", "e4m3"},
                         "FP8 formats: hybrid (E4M3 forward, E5M2 gradients) or e4m3 throughout; default: "
                         "the recipe's (hybrid for delayed and current, e4m3 for block and mxfp8)"),
      OptionSpec::integer("fp8_history", 1, 1 << 20, "delayed scaling: amax history length (default 1024)"),
      OptionSpec::choice("fp8_amax_algo", {"max", "most_recent"},
                         "delayed scaling: the amax a scale comes from (default max)"),
      OptionSpec::integer("fp8_margin", 0, 64, "delayed scaling: scale = fp8_max / amax / 2^margin (default 0)"),
      OptionSpec::integer("fp8_block", 1, 1 << 16, "block scaling: run (1 x B) and tile (B x B) edge (default 128)"),
      OptionSpec::boolean("fp8_pow2_scales", "block scaling: scales rounded down to powers of two (default true)"),
  };
}

nlohmann::json fp8_recipe_json(const Fp8Recipe& r) {
  nlohmann::json j = {{"fp8_recipe", r.name()}, {"fp8_format", r.formats == Fp8Formats::hybrid ? "hybrid" : "e4m3"}};
  if (r.scaling == Fp8Scaling::delayed) {
    j["fp8_history"] = r.history_len;
    j["fp8_amax_algo"] = r.amax_algo == AmaxAlgo::max ? "max" : "most_recent";
    j["fp8_margin"] = r.margin;
  }
  if (r.scaling == Fp8Scaling::block) {
    j["fp8_block"] = r.block;
    j["fp8_pow2_scales"] = r.pow2_scales;
  }
  return j;
}

Fp8Recipe fp8_recipe_from_json(const nlohmann::json& p) {
  Fp8Recipe r = default_fp8_recipe(parse_fp8_scaling(p.value("fp8_recipe", std::string("current"))));
  if (p.contains("fp8_format")) r.formats = p.at("fp8_format") == "e4m3" ? Fp8Formats::e4m3 : Fp8Formats::hybrid;
  r.history_len = p.value("fp8_history", r.history_len);
  if (p.contains("fp8_amax_algo")) r.amax_algo = p.at("fp8_amax_algo") == "max" ? AmaxAlgo::max : AmaxAlgo::most_recent;
  r.margin = p.value("fp8_margin", r.margin);
  r.block = p.value("fp8_block", r.block);
  r.pow2_scales = p.value("fp8_pow2_scales", r.pow2_scales);
  return r;
}

Fp8Recipe with_fp8_options(const Fp8Recipe& r, const nlohmann::json& options) {
  nlohmann::json params = fp8_recipe_json(r);  // read as the recorded params are
  for (const OptionSpec& option : fp8_recipe_options())
    if (option.name != "fp8_recipe" && options.contains(option.name)) params[option.name] = options.at(option.name);
  return fp8_recipe_from_json(params);
}

void require_fp8_options_apply(const nlohmann::json& options) {
  if (!options.contains("fp8_recipe")) return;
  const std::string recipe = options.at("fp8_recipe").get<std::string>();
  for (const char* key : {"fp8_history", "fp8_amax_algo", "fp8_margin"})
    if (options.contains(key) && recipe != "delayed")
      throw UsageError(cat("--set ", key, " applies to fp8_recipe=delayed only (fp8_recipe=", recipe, ")"));
  for (const char* key : {"fp8_block", "fp8_pow2_scales"})
    if (options.contains(key) && recipe != "block")
      throw UsageError(cat("--set ", key, " applies to fp8_recipe=block only (fp8_recipe=", recipe, ")"));
}

Fp8Blocks fp8_blocks(const Fp8Recipe& recipe, Fp8Role role, bool reduce_along_cols) {
  switch (recipe.scaling) {
    case Fp8Scaling::delayed:
    case Fp8Scaling::current: return {0, 0};
    case Fp8Scaling::block:
      if (role == Fp8Role::weight) return {recipe.block, recipe.block};
      return reduce_along_cols ? Fp8Blocks{1, recipe.block} : Fp8Blocks{recipe.block, 1};
    case Fp8Scaling::mxfp8: return reduce_along_cols ? Fp8Blocks{1, kMxBlock} : Fp8Blocks{kMxBlock, 1};
  }
  throw RuntimeError("fp8_blocks: unknown scaling");
}

Tensor Fp8Tensor::dequantize() const {
  Tensor out = Tensor::empty({rows, cols}, DType::f32);
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = fp8_decode(codes[r * cols + c], format) * scale_inv_at(r, c);
  return out;
}

DelayedScaling::DelayedScaling(const Fp8Recipe& recipe, Fp8Format format) : recipe_(recipe), format_(format) {}

void DelayedScaling::update(float amax) {
  if (kernel_fault_planted(KernelFault::fp8_history_not_rolled) && !history_.empty())
    history_.front() = amax;  // the newest slot is overwritten, the window never moves
  else history_.push_front(amax);
  while (static_cast<int>(history_.size()) > recipe_.history_len) history_.pop_back();
  const float used =
      recipe_.amax_algo == AmaxAlgo::max ? *std::max_element(history_.begin(), history_.end()) : history_.front();
  if (used > 0 && std::isfinite(used)) scale_ = (fp8_info(format_).max / used) / std::ldexp(1.0f, recipe_.margin);
}

Fp8Tensor quantize_fp8(const Tensor& x, Fp8Role role, bool reduce_along_cols, const Fp8Recipe& recipe,
                       const DelayedScaling* delayed, std::optional<float> tensor_amax) {
  if (x.ndim() != 2 || !x.is_host())
    throw RuntimeError("quantize_fp8: want a host matrix, got " + shape_string(x.shape()));
  if (recipe.scaling == Fp8Scaling::delayed && !delayed)
    throw RuntimeError("quantize_fp8: delayed scaling needs the tensor's DelayedScaling state");
  Fp8Tensor q;
  q.format = recipe.format_of(role);
  if (role == Fp8Role::weight && kernel_fault_planted(KernelFault::fp8_forward_weight_e5m2)) q.format = Fp8Format::e5m2;
  q.rows = x.shape()[0], q.cols = x.shape()[1];
  const Fp8Blocks b = fp8_blocks(recipe, role, reduce_along_cols);
  q.blocks = {b.rows ? b.rows : std::max<int64_t>(q.rows, 1), b.cols ? b.cols : std::max<int64_t>(q.cols, 1)};
  const Tensor xf = x.to(DType::f32);
  const float* px = xf.data<float>();

  // Per-block amax (the whole tensor's beside it).
  const int64_t grid_rows = (q.rows + q.blocks.rows - 1) / q.blocks.rows, grid_cols = q.block_grid_cols();
  std::vector<float> amax(grid_rows * grid_cols, 0.0f);
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      float& a = amax[(r / q.blocks.rows) * grid_cols + c / q.blocks.cols];
      a = std::max(a, std::fabs(px[r * q.cols + c]));
    }
  q.amax = amax.empty() ? 0.0f : *std::max_element(amax.begin(), amax.end());
  if (tensor_amax && recipe.per_tensor()) amax.assign(amax.size(), q.amax = *tensor_amax);

  // Per-block multiplier before the cast and its decode inverse.
  const float fp8_max = fp8_info(q.format).max;
  std::vector<float> scale(amax.size());
  q.scale_inv.resize(amax.size());
  const bool neighbour = kernel_fault_planted(KernelFault::fp8_block_scale_neighbour) && !recipe.per_tensor();
  for (size_t i = 0; i < amax.size(); ++i) {
    const float a = neighbour ? amax[(i + 1) % amax.size()] : amax[i];
    switch (recipe.scaling) {
      case Fp8Scaling::delayed: scale[i] = delayed->scale(); break;
      case Fp8Scaling::current: scale[i] = scale_from_amax(a, fp8_max, false); break;
      case Fp8Scaling::block: scale[i] = scale_from_amax(a, fp8_max, recipe.pow2_scales); break;
      case Fp8Scaling::mxfp8: {
        const int e = mx_exponent(a, fp8_max);
        scale[i] = std::ldexp(1.0f, -e);
        q.scale_inv[i] = e8m0_decode(e8m0_encode(e));
        continue;
      }
    }
    q.scale_inv[i] = 1.0f / scale[i];
  }

  const bool wraps = kernel_fault_planted(KernelFault::fp8_saturation_wraps);
  q.codes.resize(static_cast<size_t>(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      const float v = px[r * q.cols + c] * scale[(r / q.blocks.rows) * grid_cols + c / q.blocks.cols];
      q.codes[r * q.cols + c] = wraps ? fp8_encode_wrapping(v, q.format) : fp8_encode(v, q.format);
    }
  return q;
}

float fp8_amax(const Tensor& x) {
  if (!x.is_host()) throw RuntimeError("fp8_amax: want a host tensor");
  const Tensor xf = x.to(DType::f32);
  const float* px = xf.data<float>();
  float a = 0;
  for (int64_t i = 0; i < xf.numel(); ++i) a = std::max(a, std::fabs(px[i]));
  return a;
}

}  // namespace sextant::ops
