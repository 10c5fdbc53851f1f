// FP8 scaling recipes, as TransformerEngine defines them
// (transformer_engine/common/recipe): how a tensor's values are scaled into
// an FP8 format before the cast, and which format each operand takes.
//   delayed  DelayedScaling: one scale per tensor, from the amax history of
//            the steps before (max or most recent of the last history_len
//            amaxes), scale = fp8_max / amax / 2^margin, initially 1;
//   current  Float8CurrentScaling: one scale per tensor, fp8_max / amax of
//            the tensor itself;
//   block    Float8BlockScaling: one f32 scale per 1 x block run of
//            activations and gradients along the gemm's reduction and per
//            block x block tile of weights (DeepSeek-V3's 1x128 and 128x128),
//            fp8_max / amax rounded down to a power of two by default;
//   mxfp8    MXFP8BlockScaling: one E8M0 (power-of-two) scale per 1 x 32 run
//            along the reduction, 2^ceil(log2(amax / fp8_max)), so no value
//            saturates.
// Formats (TransformerEngine's Format): hybrid puts forward operands
// (activations, weights) in E4M3 and gradients in E5M2; e4m3 puts all in
// E4M3. TransformerEngine's defaults: hybrid for delayed and current, e4m3
// for block and mxfp8.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/options.h"
#include "harness/tensor.h"
#include "kernels/ops/fp8.h"

namespace sextant::ops {

enum class Fp8Scaling { delayed, current, block, mxfp8 };
enum class Fp8Formats { hybrid, e4m3 };
enum class AmaxAlgo { max, most_recent };
// What a quantized operand is: picks its format and block shape.
enum class Fp8Role { activation, weight, gradient };

struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::current;
  Fp8Formats formats = Fp8Formats::hybrid;
  int history_len = 1024;  // delayed
  AmaxAlgo amax_algo = AmaxAlgo::max;
  int margin = 0;
  int block = 128;          // block: the run and tile edge
  bool pow2_scales = true;  // block: scales rounded down to powers of two

  Fp8Format format_of(Fp8Role role) const;
  bool per_tensor() const { return scaling == Fp8Scaling::delayed || scaling == Fp8Scaling::current; }
  std::string name() const;  // "delayed", "current", "block", "mxfp8"
  bool operator==(const Fp8Recipe&) const = default;
};

// TransformerEngine's defaults for that scaling.
Fp8Recipe default_fp8_recipe(Fp8Scaling scaling);
Fp8Scaling parse_fp8_scaling(const std::string& name);  // throws UsageError
std::vector<std::string> fp8_scaling_names();

// The recipe's typed options (--set fp8_recipe=..., fp8_format, fp8_history,
// fp8_amax_algo, fp8_margin, fp8_block, fp8_pow2_scales).
std::vector<OptionSpec> fp8_recipe_options();
// Recipe <-> the JSON params a case records (keys as the options').
nlohmann::json fp8_recipe_json(const Fp8Recipe& recipe);
Fp8Recipe fp8_recipe_from_json(const nlohmann::json& params);
// The user's --set options (the object of them) over a recipe: each recipe
// parameter given replaces r's (fp8_recipe itself is not read).
Fp8Recipe with_fp8_options(const Fp8Recipe& r, const nlohmann::json& options);
// A parameter of another scaling than the fp8_recipe given is a mistake,
// not a no-op: throws UsageError naming both.
void require_fp8_options_apply(const nlohmann::json& options);

// The block edge lengths of an operand [rows, cols] entering a gemm whose
// reduction runs along its columns (reduce_along_cols) or its rows; 0 means
// the whole extent (per-tensor scaling).
struct Fp8Blocks {
  int64_t rows = 0, cols = 0;
};
Fp8Blocks fp8_blocks(const Fp8Recipe& recipe, Fp8Role role, bool reduce_along_cols);

// One operand of one gemm in FP8: codes [rows, cols] row-major and one
// decode scale per block (value = decode(code) x scale_inv of its block),
// blocks row-major over the grid ceil(rows / block rows) x ceil(cols /
// block cols); the last block of a row or column may be short.
struct Fp8Tensor {
  Fp8Format format = Fp8Format::e4m3;
  int64_t rows = 0, cols = 0;
  Fp8Blocks blocks;  // resolved: never 0
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
  float amax = 0;  // of the whole unquantized tensor (what delayed scaling records)

  int64_t block_grid_cols() const { return (cols + blocks.cols - 1) / blocks.cols; }
  float scale_inv_at(int64_t row, int64_t col) const {
    return scale_inv[(row / blocks.rows) * block_grid_cols() + col / blocks.cols];
  }
  Tensor dequantize() const;  // f32 [rows, cols]
};

// The per-tensor scale of delayed scaling, one per quantized tensor: the
// scale a step quantizes with comes from the amaxes of the steps before.
class DelayedScaling {
 public:
  explicit DelayedScaling(const Fp8Recipe& recipe, Fp8Format format);
  float scale() const { return scale_; }
  // The end of a step: its amax joins the history (the oldest beyond
  // history_len leaves), and the next step's scale is computed from it.
  void update(float amax);
  const std::deque<float>& history() const { return history_; }

 private:
  Fp8Recipe recipe_;
  Fp8Format format_;
  std::deque<float> history_;  // newest first
  float scale_ = 1;
};

// x: [rows, cols] on the host (f32 or bf16). delayed: the tensor's state,
// required for delayed scaling (its scale() is used; the caller updates it
// with the returned amax at the end of the step). tensor_amax: where x is
// one rank's shard of a tensor, that tensor's amax (the shards' reduced over
// the ranks holding them): per-tensor recipes then take the whole tensor's
// scale, and the result's amax is it.
Fp8Tensor quantize_fp8(const Tensor& x, Fp8Role role, bool reduce_along_cols, const Fp8Recipe& recipe,
                       const DelayedScaling* delayed = nullptr, std::optional<float> tensor_amax = std::nullopt);
// The largest |value| of x (host, f32 or bf16): what quantize_fp8 computes as the amax.
float fp8_amax(const Tensor& x);

}  // namespace sextant::ops
