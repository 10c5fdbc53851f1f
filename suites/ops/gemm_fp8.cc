// The FP8 linear's three gemms (kernels/ops/gemm_fp8.h) under each
// TransformerEngine scaling recipe, over several steps so that delayed
// scaling's amax history rolls, shrinks and saturates: step magnitudes 1,
// 9/8, 7/8, 1. The second step's values outgrow the range the first step's
// amax scaled for, and under most_recent the fourth's outgrow the third's, by
// at most 1/7: saturation then clips about as much as one more rounding (the
// bound in docs/CONFORMANCE.md assumes no more). Each step is checked three ways (docs/CONFORMANCE.md, "FP8"):
//   the operands   every dequantized operand bit for bit against the
//                  reference's cast of the same input (reference/fp8.h);
//   the kernel     each output against float64 of the reference's
//                  dequantized operands, at the output dtype's linear gate
//                  (on CUDA the FP8 tensor cores' accumulator's);
//   end to end     each output against float64 of the unquantized operands,
//                  within the FP8 row's bound from the formats' unit roundoff.
#include "kernels/ops/gemm_fp8.h"

#include <array>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"
#include "reference/fp8.h"
#include "reference/linear.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

constexpr std::array<double, 4> kStepMagnitude = {1.0, 1.125, 0.875, 1.0};

// One step's unquantized tensors of the linear Y = X W.
struct StepInputs {
  Tensor x, w, dy;  // X [tokens, in], W [in, out], dY [tokens, out]
};

struct State {
  ops::Fp8Recipe recipe;
  nlohmann::json params;
  int64_t tokens = 0, in = 0, out = 0;
  DType dtype = DType::f32;
  Device device = Device::host;  // where the gemms write C (the casts run on the host)
  std::vector<StepInputs> steps;
};

// The kernel side of one step: each operand quantized along its gemm's
// reduction, three FP8 gemms. delayed: the three tensors' scaling states
// (null for the other recipes).
struct StepOutputs {
  ops::Fp8Tensor x_fwd, w_fwd, dy_dgrad, w_dgrad, x_wgrad, dy_wgrad;
  Tensor y, dx, dw;
  float y_amax = 0;
};
struct DelayedStates {
  ops::DelayedScaling x, w, dy;
};

StepOutputs run_step(const State& s, const StepInputs& in, const DelayedStates* d) {
  using ops::Fp8Role;
  StepOutputs o;
  o.x_fwd = ops::quantize_fp8(in.x, Fp8Role::activation, true, s.recipe, d ? &d->x : nullptr);
  o.w_fwd = ops::quantize_fp8(in.w, Fp8Role::weight, false, s.recipe, d ? &d->w : nullptr);
  o.y = Tensor::empty({s.tokens, s.out}, s.dtype, s.device);
  o.y_amax = ops::gemm_fp8(o.x_fwd, false, o.w_fwd, false, o.y);  // Y = X W
  o.dy_dgrad = ops::quantize_fp8(in.dy, Fp8Role::gradient, true, s.recipe, d ? &d->dy : nullptr);
  o.w_dgrad = ops::quantize_fp8(in.w, Fp8Role::weight, true, s.recipe, d ? &d->w : nullptr);
  o.dx = Tensor::empty({s.tokens, s.in}, s.dtype, s.device);
  ops::gemm_fp8(o.dy_dgrad, false, o.w_dgrad, true, o.dx);  // dX = dY W^T
  o.x_wgrad = ops::quantize_fp8(in.x, Fp8Role::activation, false, s.recipe, d ? &d->x : nullptr);
  o.dy_wgrad = ops::quantize_fp8(in.dy, Fp8Role::gradient, false, s.recipe, d ? &d->dy : nullptr);
  o.dw = Tensor::empty({s.in, s.out}, s.dtype, s.device);
  ops::gemm_fp8(o.x_wgrad, true, o.dy_wgrad, false, o.dw);  // dW = X^T dY
  return o;
}

DelayedStates initial_states(const ops::Fp8Recipe& r) {
  using ops::Fp8Role;
  return {ops::DelayedScaling(r, r.format_of(Fp8Role::activation)),
          ops::DelayedScaling(r, r.format_of(Fp8Role::weight)), ops::DelayedScaling(r, r.format_of(Fp8Role::gradient))};
}

// The reference's reading of the recorded recipe params: which grid, blocks
// and scale rule an operand gets, with delayed scaling's history per tensor.
class ReferenceRecipe {
 public:
  explicit ReferenceRecipe(const nlohmann::json& p)
      : scaling_(p.at("fp8_recipe").get<std::string>()),
        hybrid_(p.at("fp8_format") == "hybrid"),
        history_(p.value("fp8_history", 0)),
        use_max_(p.value("fp8_amax_algo", std::string("max")) == "max"),
        margin_(p.value("fp8_margin", 0)),
        block_(p.value("fp8_block", 0)),
        pow2_(p.value("fp8_pow2_scales", false)) {}

  enum Tensor3 { x, w, dy };
  ref::Fp8Grid grid(Tensor3 t) const { return t == dy && hybrid_ ? ref::kE5m2Grid : ref::kE4m3Grid; }

  // t quantized for a gemm reducing along its columns (or rows).
  ref::Fp8Quantization quantization(Tensor3 t, bool reduce_along_cols) const {
    ref::Fp8Quantization q{grid(t)};
    if (scaling_ == "delayed") {
      q.rule = ref::Fp8ScaleRule::given;
      q.given_scale = ref::delayed_scale(amaxes_[t], history_, use_max_, margin_, ref::fp8_values(q.grid).back());
    } else if (scaling_ == "current") {
      q.rule = ref::Fp8ScaleRule::amax;
    } else {
      const int64_t b = scaling_ == "mxfp8" ? 32 : block_;
      q.rule = scaling_ == "mxfp8" ? ref::Fp8ScaleRule::mx_exponent
                                   : (pow2_ ? ref::Fp8ScaleRule::amax_pow2 : ref::Fp8ScaleRule::amax);
      if (scaling_ == "block" && t == w) q.block_rows = q.block_cols = b;
      else (reduce_along_cols ? q.block_cols : q.block_rows) = b, (reduce_along_cols ? q.block_rows : q.block_cols) = 1;
    }
    return q;
  }
  void record_amax(Tensor3 t, double amax) { amaxes_[t].push_back(amax); }

 private:
  std::string scaling_;
  bool hybrid_;
  int history_;
  bool use_max_;
  int margin_;
  int64_t block_;
  bool pow2_;
  std::array<std::vector<double>, 3> amaxes_;
};

double unit_roundoff(const ref::Fp8Grid& g) { return std::ldexp(1.0, -(g.mantissa_bits + 1)); }

void check(State& s, Checker& checker) {
  const bool delayed = s.recipe.scaling == ops::Fp8Scaling::delayed;
  DelayedStates states = initial_states(s.recipe);
  ReferenceRecipe rr(s.params);
  using R = ReferenceRecipe;
  for (size_t t = 0; t < s.steps.size(); ++t) {
    const StepInputs& in = s.steps[t];
    const std::string step = cat("step", t + 1, ".");
    checker.input(step + "x", in.x);
    checker.input(step + "w", in.w);
    checker.input(step + "dy", in.dy);
    StepOutputs o = run_step(s, in, delayed ? &states : nullptr);
    for (Tensor* c : {&o.y, &o.dx, &o.dw}) *c = c->to(Device::host);

    // The operands, bit for bit.
    struct Operand {
      const char* name;
      const ops::Fp8Tensor& kernel;
      const Tensor& input;
      R::Tensor3 tensor;
      bool reduce_along_cols;
    };
    const Operand operands[] = {
        {"x.fwd", o.x_fwd, in.x, R::x, true},         {"w.fwd", o.w_fwd, in.w, R::w, false},
        {"dy.dgrad", o.dy_dgrad, in.dy, R::dy, true}, {"w.dgrad", o.w_dgrad, in.w, R::w, true},
        {"x.wgrad", o.x_wgrad, in.x, R::x, false},    {"dy.wgrad", o.dy_wgrad, in.dy, R::dy, false}};
    std::vector<ref::Fp8Quantized> refq;
    for (const Operand& op : operands) {
      refq.push_back(ref::fp8_quantize(op.input, rr.quantization(op.tensor, op.reduce_along_cols)));
      const Tensor kernel = op.kernel.dequantize();
      checker.compare(step + op.name + ".fp8", exact_bound("fp8_quantization"), kernel, kernel, refq.back().value);
    }

    // The kernel's arithmetic and the end-to-end error of each gemm.
    // dX = dY W^T and dW = X^T dY quantize the same tensors along other axes,
    // so each takes its own pair: dgrad (dy.dgrad, w.dgrad), wgrad (x.wgrad, dy.wgrad).
    const Tensor dx_q = ref::linear_backward(refq[2].value, refq[4].value, refq[3].value, false).dx;
    const Tensor dw_q = ref::linear_backward(refq[5].value, refq[4].value, refq[3].value, false).dw;
    const ref::LinearGrads grads = ref::linear_backward(in.dy, in.x, in.w, false);
    struct Output {
      const char* name;
      const Tensor& kernel;
      Tensor ref_quantized, ref_exact;
      double u_a, u_b;
    };
    const double ux = unit_roundoff(rr.grid(R::x)), uw = unit_roundoff(rr.grid(R::w)),
                 udy = unit_roundoff(rr.grid(R::dy));
    const Output outputs[] = {
        {"y", o.y, ref::linear_forward(refq[0].value, refq[1].value), ref::linear_forward(in.x, in.w), ux, uw},
        {"dx", o.dx, dx_q, grads.dx, udy, uw},
        {"dw", o.dw, dw_q, grads.dw, ux, udy},
    };
    // The kernel's arithmetic: f32 accumulation on the host, Hopper's FP8
    // tensor cores' on CUDA (harness/tolerance.h, fp8_tensor_core_bound).
    const Bound arithmetic =
        s.device == Device::cuda ? fp8_tensor_core_bound(s.dtype) : tolerance_bound(s.dtype, OpClass::linear);
    for (const Output& out : outputs) {
      const Tensor kernel = on_host(out.kernel);
      checker.compare(step + out.name, arithmetic, kernel, kernel, out.ref_quantized);
      checker.compare(step + out.name + ".e2e", fp8_bound(OpClass::linear, {out.u_a, out.u_b}, s.dtype), kernel, kernel,
                      out.ref_exact);
    }
    // The output amax the gemm reports: the largest magnitude it stored.
    const Tensor y = o.y.to(DType::f64);
    double amax = 0;
    for (int64_t i = 0; i < y.numel(); ++i) amax = std::max(amax, std::fabs(y.data<double>()[i]));
    checker.exact(step + "y.amax", o.y_amax == amax ? 0 : 1, 1);

    // The end of the step: delayed scaling records each tensor's amax.
    if (delayed) {
      states.x.update(o.x_fwd.amax), states.w.update(o.w_fwd.amax), states.dy.update(o.dy_dgrad.amax);
      rr.record_amax(R::x, refq[0].amax), rr.record_amax(R::w, refq[1].amax), rr.record_amax(R::dy, refq[2].amax);
    }
  }
}

// The sweep's recipes: each scaling at TransformerEngine's defaults, delayed
// scaling also with a two-step window and margin 1 and with most_recent,
// current scaling also in E4M3 throughout, block scaling also with f32
// (not power-of-two) scales, MXFP8 also in hybrid. --set fp8_recipe picks
// one scaling; its parameters override the defaults.
std::vector<ops::Fp8Recipe> sweep_recipes(const SweepRequest& req) {
  using ops::Fp8Scaling;
  std::vector<ops::Fp8Recipe> out;
  auto add = [&](Fp8Scaling scaling, auto&& change) {
    if (req.has("fp8_recipe") && ops::parse_fp8_scaling(req.get<std::string>("fp8_recipe", "")) != scaling) return;
    ops::Fp8Recipe r = ops::default_fp8_recipe(scaling);
    change(r);
    out.push_back(r);
  };
  auto same = [](ops::Fp8Recipe&) {};
  add(Fp8Scaling::delayed, same);
  add(Fp8Scaling::delayed, [](ops::Fp8Recipe& r) { r.history_len = 2, r.margin = 1; });
  add(Fp8Scaling::delayed, [](ops::Fp8Recipe& r) { r.amax_algo = ops::AmaxAlgo::most_recent; });
  add(Fp8Scaling::current, same);
  add(Fp8Scaling::current, [](ops::Fp8Recipe& r) { r.formats = ops::Fp8Formats::e4m3; });
  add(Fp8Scaling::block, same);
  add(Fp8Scaling::block, [](ops::Fp8Recipe& r) { r.pow2_scales = false; });
  add(Fp8Scaling::mxfp8, same);
  add(Fp8Scaling::mxfp8, [](ops::Fp8Recipe& r) { r.formats = ops::Fp8Formats::hybrid; });
  for (ops::Fp8Recipe& r : out) r = ops::with_fp8_options(r, req.options);
  return out;
}

// Ragged against every block edge (128 and 32) and small enough for the
// float64 reference at each of the steps.
std::vector<std::array<int64_t, 3>> shapes(Profile profile) {
  std::vector<std::array<int64_t, 3>> out = {{7, 13, 33}, {160, 136, 300}};
  if (profile != Profile::ci) out.push_back({192, 256, 320});
  return out;
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  State s;
  s.params = c.params;
  s.recipe = ops::fp8_recipe_from_json(c.params);
  s.tokens = c.i("tokens"), s.in = c.i("in"), s.out = c.i("out");
  s.dtype = c.dtype;
  s.device = ctx.device;
  for (int64_t t = 0; t < c.i("steps"); ++t) {
    const double magnitude = kStepMagnitude[t % kStepMagnitude.size()];
    const std::string step = cat(".step", t + 1);
    s.steps.push_back({input({s.tokens, s.in}, c.dtype, "gemm_fp8.x" + step, ctx.seed, magnitude),
                       input({s.in, s.out}, c.dtype, "gemm_fp8.w" + step, ctx.seed, magnitude),
                       input({s.tokens, s.out}, c.dtype, "gemm_fp8.dy" + step, ctx.seed, magnitude)});
  }
  return s;
}

// One step from the first step's inputs (delayed scaling at its initial
// scales): six quantizations and three gemms.
void run(State& s) {
  const bool delayed = s.recipe.scaling == ops::Fp8Scaling::delayed;
  const DelayedStates states = initial_states(s.recipe);
  run_step(s, s.steps.front(), delayed ? &states : nullptr);
}

CaseDef gemm_fp8_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "gemm_fp8",
      .summary = "FP8 linear (forward, dgrad, wgrad) under each scaling recipe, over steps: operands bit for bit, "
                 "the kernel against its dequantized operands, end to end against the unquantized ones",
      .options = ops::fp8_recipe_options(),
      .kernel_faults = {KernelFault::fp8_scale_inverse_twice, KernelFault::fp8_forward_weight_e5m2,
                        KernelFault::fp8_block_scale_neighbour, KernelFault::fp8_saturation_wraps,
                        KernelFault::fp8_history_not_rolled},
      .table_metrics = {"gflops"},
      .configs =
          [](const SweepRequest& req) {
            ops::require_fp8_options_apply(req.options);
            std::vector<nlohmann::json> params;
            for (const ops::Fp8Recipe& r : sweep_recipes(req))
              if (req.device == Device::host || r.scaling != ops::Fp8Scaling::mxfp8 || req.has("fp8_recipe"))
                for (const auto& [tokens, in, out] : shapes(req.profile)) {
                  nlohmann::json p = ops::fp8_recipe_json(r);
                  p.update({{"tokens", tokens}, {"in", in}, {"out", out}, {"steps", kStepMagnitude.size()}});
                  if (std::find(params.begin(), params.end(), p) == params.end()) params.push_back(p);
                }
            return op_configs(req, params, {DType::f32, DType::bf16});
          },
      .validate =
          [](const CaseConfig& c) {
            require(c.device == Device::host || ops::fp8_recipe_from_json(c.params).scaling != ops::Fp8Scaling::mxfp8,
                    "ops/gemm_fp8 --device cuda runs delayed, current and block scaling; fp8_recipe=mxfp8 needs "
                    "Blackwell's VEC32_UE8M0 scale mode in cuBLASLt, not wired");
            require(c.dtype == DType::f32 || c.dtype == DType::bf16,
                    "ops/gemm_fp8: --dtype must be f32 or bf16 (the high-precision inputs and the output)");
          },
      .memory =
          [](const CaseConfig& c) {
            const double t = c.i("tokens"), in = c.i("in"), out = c.i("out");
            return op_memory(c, c.i("steps") * 3.0 * (t * in + in * out + t * out));
          },
      .setup = setup,
      .timed = {{"step", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            const double t = s.tokens, in = s.in, out = s.out;
            return rates(6.0 * t * in * out, dtype_size(s.dtype) * 2.0 * (t * in + in * out + t * out),
                         times.at("step"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 11, gemm_fp8_case);

}  // namespace
}  // namespace sextant::ops_suite
