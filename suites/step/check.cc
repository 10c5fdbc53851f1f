// Conformance (docs/CONFORMANCE.md): K steps of the distributed model from the initial
// weights, and after every step its loss, every gradient (gathered from its
// shards; replicas must agree bit for bit) and every parameter, against the
// float64 reference (reference/gpt.h) with the same model at world size 1 as
// the baseline. MoE routing is compared token by token: where a run chose
// other experts than the reference at a near tie (routing_tie_band), the
// reference follows it and that run is held to the following reference; a
// token sent elsewhere outside the band is reported by number and fails.
#include "suites/step/check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "harness/assemble.h"
#include "harness/grid_comms.h"
#include "harness/memo.h"
#include "harness/memory_use.h"
#include "harness/strings.h"
#include "kernels/model/data.h"
#include "reference/gpt.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {

Tensor scalar(double v) { return Tensor::from_values({1}, {v}, DType::f64); }

// Every parameter's value (or summed gradient) as a whole tensor on root.
// Values come from the trainer (pending ZeRO gathers stay pending).
std::map<std::string, Tensor> gather_params(model::GptTrainer& t, Communicator& host, Checker* checker, bool grads) {
  std::map<std::string, Tensor> out;
  const std::vector<model::ParamSpec>& specs = t.params().specs();
  const std::vector<model::Param>& params = t.params().params();
  const std::vector<Tensor> values = grads ? std::vector<Tensor>{} : t.parameter_values();
  for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
    std::vector<Block> blocks;
    for (size_t k = 0; k < params.size(); ++k)
      if (params[k].block.spec == i) blocks.push_back({grads ? params[k].grad : values[k], params[k].block.offset});
    Assembled a = assemble(host, blocks, specs[i].shape, DType::f32);
    if (host.rank() != 0) continue;
    if (checker && (a.uncovered || a.mismatched))
      checker->fail(cat(specs[i].name, grads ? " gradient" : "", ": ", a.uncovered, " elements held by no rank, ",
                        a.mismatched, " elements where replicas disagree"));
    out[specs[i].name] = a.tensor;
  }
  return out;
}

// Blocks of consecutive global token rows of a [tokens, k] routing table.
std::vector<Block> routing_blocks(const std::vector<int64_t>& token_index, const moe::SlotTable& slots) {
  std::vector<Block> blocks;
  const int k = slots.topk;
  size_t start = 0;
  for (size_t r = 1; r <= token_index.size(); ++r) {
    if (r < token_index.size() && token_index[r] == token_index[r - 1] + 1) continue;
    const int64_t rows = static_cast<int64_t>(r - start);
    Tensor t = Tensor::empty({rows, k}, DType::f64);
    for (int64_t i = 0; i < rows * k; ++i) t.data<double>()[i] = slots.expert[start * k + i];
    blocks.push_back({t, {token_index[start], 0}});
    start = r;
  }
  return blocks;
}

// Per MoE layer, the experts each token of the batch went to: [B s, k] on root.
std::vector<Tensor> gather_routing(model::GptTrainer& t, Communicator& host, Checker* checker) {
  const model::GptConfig& c = t.config();
  std::vector<Tensor> out;
  for (int l = 0; l < c.layers; ++l) {
    if (!c.moe[l]) continue;
    std::vector<Block> blocks;
    for (const auto& layer : t.stages().layers())
      if (layer->index() == l)
        for (int mb = 0; mb < c.microbatches; ++mb)
          for (Block& b : routing_blocks(t.stages().data(mb).token_index, layer->routing(mb).slots))
            blocks.push_back(std::move(b));
    Assembled a = assemble(host, blocks, {c.tokens_per_step(), c.topk}, DType::f64);
    if (host.rank() == 0 && checker && (a.uncovered || a.mismatched))
      checker->fail(cat("routing of layer ", l, ": ", a.uncovered, " slots of no rank, ", a.mismatched, " disagree"));
    out.push_back(a.tensor);
  }
  return out;
}

// This rank's layers' FP8 decode scales, named as fp8_scale_names.
Fp8Scales local_fp8_scales(model::GptTrainer& t) {
  Fp8Scales out;
  for (const auto& layer : t.stages().layers())
    for (const auto& [linear, state] : layer->fp8_linears())
      for (int i = 0; i < tp::kFp8Operands; ++i) {
        out.names.push_back(cat("layers.", layer->index(), ".", linear, ".", tp::kFp8OperandNames[i]));
        out.values.push_back(state->scale_inv[i]);
      }
  return out;
}

}  // namespace

std::vector<std::string> fp8_scale_names(const model::GptConfig& c) {
  std::vector<std::string> out;
  if (!c.fp8) return out;
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* linear : model::GptLayer::kFp8LinearNames)
      for (const char* operand : tp::kFp8OperandNames) out.push_back(cat("layers.", l, ".", linear, ".", operand));
  return out;
}

Bound model_bound(const model::GptConfig& c, DType dtype, OpClass op, double growth) {
  if (!c.fp8) return tolerance_bound(dtype, op, growth);
  // The loss, gradients and parameters alike (the fp8_model row). One layer: QKV, the output projection, fc1 and fc2
  // forward, their four dgrads and a wgrad.
  using tp::kFp8Dgrad, tp::kFp8Forward, tp::kFp8Wgrad;
  const tp::Fp8Casts layer = tp::fp8_path(
      {kFp8Forward, kFp8Forward, kFp8Forward, kFp8Forward, kFp8Dgrad, kFp8Dgrad, kFp8Dgrad, kFp8Dgrad, kFp8Wgrad});
  return fp8_bound(OpClass::model, tp::cast_unit_roundoffs(*c.fp8, layer), dtype, growth);
}

RunRecord run_steps(model::GptTrainer& t, Communicator& host, int steps, Checker* checker) {
  RunRecord run;
  t.reset();
  for (int k = 0; k < steps; ++k) {
    StepRecord rec;
    model::StepReport report;
    t.forward_backward(report);
    t.reduce_gradients();
    t.gather_gradients();
    rec.loss = report.loss;
    rec.grads = gather_params(t, host, checker, true);
    rec.routing = gather_routing(t, host, checker);
    if (t.config().fp8 && t.config().fp8->per_tensor()) rec.fp8_scales = local_fp8_scales(t);
    t.optimizer_step();
    rec.params = gather_params(t, host, checker, false);
    run.push_back(std::move(rec));
  }
  return run;
}

namespace {

// The model as one device runs it: the config with every knob of how it is
// parallelised at its one-device value. The baseline runs it; with the
// dtype it is also what the baseline and the reference depend on.
model::GptConfig one_device(const model::GptConfig& dist) {
  model::GptConfig c = dist;
  c.microbatches = 1;
  c.schedule = pp::ScheduleId::one_f_one_b;
  c.cp_comm = cp::Variant::p2p;
  c.a2a_size = model::GptConfig{}.a2a_size;
  c.cp_layout = model::GptConfig{}.cp_layout;
  c.regather = true;
  c.distributed_optimizer = false;
  c.bucket_mb = 0;
  c.overlap_grad_reduce = c.overlap_param_gather = false;
  return c;
}

struct RunKey {
  model::GptConfig model;  // one_device()
  uint64_t seed;
  int steps;
  Device device;  // the baseline's (host for the reference)
  bool operator==(const RunKey&) const = default;
};

Tensor routing_table(const ref::MoeRouting& r) {
  Tensor t = Tensor::empty({r.tokens, r.topk}, DType::f64);
  for (int64_t i = 0; i < r.tokens * r.topk; ++i) t.data<double>()[i] = r.expert[i];
  return t;
}

ref::GptParams reference_params(const model::GptConfig& c, uint64_t seed) {
  ref::GptParams p;
  for (int l = 0; l < c.layers; ++l) {
    p.layers.emplace_back();
    p.layers.back().is_moe = c.moe[l];
  }
  const std::vector<model::ParamSpec> specs = model::param_specs(c);
  std::vector<Tensor*> tensors = p.tensors();
  if (tensors.size() != specs.size())
    throw RuntimeError(cat("reference GPT has ", tensors.size(), " parameter tensors, the model ", specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) *tensors[i] = model::init_global(specs[i], seed, DType::f32).to(DType::f64);
  return p;
}

std::map<std::string, Tensor> named(ref::GptParams& p, const std::vector<model::ParamSpec>& specs) {
  std::map<std::string, Tensor> out;
  std::vector<Tensor*> tensors = p.tensors();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (tensors[i]->shape() != specs[i].shape)
      throw RuntimeError(cat("reference ", specs[i].name, " is ", shape_string(tensors[i]->shape()), ", the model's ",
                             shape_string(specs[i].shape)));
    out[specs[i].name] = tensors[i]->clone();
  }
  return out;
}

}  // namespace

// A parameter's distance from the loss in layers (TrainingGrowthRule): specs
// come in the reference's order, so layer -1 before the first layer is the
// embedding and after it the final LayerNorm and the head.
int depth_from_loss(const std::vector<model::ParamSpec>& specs, size_t i, int layers) {
  if (specs[i].layer >= 0) return layers - specs[i].layer;
  const bool before_layers = std::none_of(specs.begin(), specs.begin() + static_cast<std::ptrdiff_t>(i),
                                          [](const model::ParamSpec& p) { return p.layer >= 0; });
  return before_layers && layers > 0 ? layers + 1 : 0;
}

double training_growth(const model::GptConfig& c, int step, int depth = 0) {
  return training_growth_rule().growth(c.adam.lr, step, depth);
}

// tested: the run whose routing to follow at near ties (null: none).
RunRecord reference_steps(const model::GptConfig& c, uint64_t seed, int steps, const RunRecord* tested,
                          DType tested_dtype) {
  ref::GptDims dims;
  dims.vocab = c.vocab, dims.hidden = c.hidden, dims.heads = c.heads, dims.head_dim = c.head_dim, dims.ffn = c.ffn;
  dims.kv_heads = c.kv_heads, dims.v_head_dim = c.v_head_dim;
  dims.layers = c.layers, dims.seq = c.seq, dims.eps = c.eps;
  dims.seq_lens = c.seq_lens;
  if (c.pad_to > 1 || c.tail_padding > 0)  // each sequence's rows: its tokens rounded up to pad_to; then the tail
    for (int64_t n : c.seq_lens) dims.seq_rows.push_back((n + c.pad_to - 1) / c.pad_to * c.pad_to);
  dims.window = c.window;
  dims.moe.experts = c.experts, dims.moe.topk = c.topk;  // dropless, aux and z losses off
  const std::vector<model::ParamSpec> specs = model::param_specs(c);
  ref::GptParams params = reference_params(c, seed);
  ref::GptAdam adam;
  adam.config = {c.adam.lr, c.adam.beta1, c.adam.beta2, c.adam.eps, c.adam.weight_decay};
  const model::TokenSource source = model::token_source(c, seed);
  RunRecord run;
  for (int k = 0; k < steps; ++k) {
    const model::GlobalBatch batch = model::global_batch(c, source, k);
    ref::RoutingFollow follow{{}, routing_tie_band(c, tested_dtype, k + 1)};
    if (tested)
      for (const Tensor& table : tested->at(k).routing)
        follow.expert.emplace_back(table.data<double>(), table.data<double>() + table.numel());
    ref::GptStep step =
        ref::gpt_forward_backward(dims, params, batch.inputs, batch.targets, c.batch, tested ? &follow : nullptr);
    StepRecord rec;
    rec.loss = step.loss;
    for (const ref::MoeRouting& r : step.routing) rec.ties_followed += r.followed;
    rec.grads = named(step.grads, specs);
    for (const ref::MoeRouting& r : step.routing) rec.routing.push_back(routing_table(r));
    ref::gpt_adam_step(params, step.grads, adam);
    rec.params = named(params, specs);
    run.push_back(std::move(rec));
  }
  return run;
}

const RunRecord& reference_run(const model::GptConfig& dist, uint64_t seed, int steps) {
  static Memo<RunKey, RunRecord> memo(4);
  model::GptConfig c = one_device(dist);
  c.dtype = DType::f32;  // the reference reads f32 initial weights whatever the run's dtype
  c.fp8.reset();         // and computes in float64, unquantized
  return memo.get(RunKey{c, seed, steps, Device::host},
                  [&] { return reference_steps(c, seed, steps, nullptr, DType::f64); });
}

RunRecord following_reference(const model::GptConfig& dist, uint64_t seed, const RunRecord& tested,
                              DType tested_dtype) {
  model::GptConfig c = one_device(dist);
  c.dtype = DType::f32;
  c.fp8.reset();
  return reference_steps(c, seed, static_cast<int>(tested.size()), &tested, tested_dtype);
}

// The model row's gate is the largest error it accepts from a correct run;
// a router logit off by that much (relative to the token's largest) may
// swap two experts whose logits lie closer, and either choice is right.
double routing_tie_band(const model::GptConfig& c, DType tested_dtype, int step) {
  return baseline_gate(tested_dtype, OpClass::model) * training_growth(c, step);
}

// The same model on this rank alone: no parallelism, one microbatch, plain Adam.
const RunRecord& baseline_run(const model::GptConfig& dist, Communicator& self, Communicator& host_self, uint64_t seed,
                              int steps) {
  static Memo<RunKey, RunRecord> memo(4);
  const model::GptConfig c = one_device(dist);
  return memo.get(RunKey{c, seed, steps, self.device()}, [&] {
    GridComms grid = make_grid_comms(self, ParallelConfig{});
    model::ModelComms comms = model::make_model_comms(grid, self, host_self, self, c);
    model::GptTrainer trainer(c, comms, seed);
    return run_steps(trainer, host_self, steps, nullptr);
  });
}

std::vector<int64_t> routing_differences(const Tensor& got, const Tensor& want) {
  std::vector<int64_t> tokens;
  const int64_t k = want.dim(1);
  for (int64_t t = 0; t < want.dim(0); ++t) {
    std::vector<double> a, b;
    for (int64_t j = 0; j < k; ++j) a.push_back(got.at(t * k + j)), b.push_back(want.at(t * k + j));
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) tokens.push_back(t);
  }
  return tokens;
}

// Whether two runs route any token of any step to other experts.
bool routing_differs(const RunRecord& a, const RunRecord& b) {
  for (size_t k = 0; k < std::min(a.size(), b.size()); ++k)
    for (size_t l = 0; l < std::min(a[k].routing.size(), b[k].routing.size()); ++l)
      if (!routing_differences(a[k].routing[l], b[k].routing[l]).empty()) return true;
  return false;
}

void compare_routing(Checker& checker, const std::string& who, const std::string& label, const Tensor& got,
                     const Tensor& want, double tie_band) {
  const std::vector<int64_t> differ = routing_differences(got, want);
  if (differ.empty()) return;
  const std::vector<int64_t> first(differ.begin(), differ.begin() + std::min<size_t>(differ.size(), 16));
  checker.note(cat("routing_differs.", who, ".", label), {{"tokens", differ.size()}, {"first", first}});
  checker.fail(cat(label, ": the ", who, " routes ", differ.size(), " of ", want.dim(0),
                   " tokens to other experts than the float64 reference, outside the tie band of ", tie_band,
                   " (first: ", join(first, ", "), "); routing flips make the gradients incomparable"));
}

// Slots per expert in a [T, k] routing table.
std::vector<int64_t> expert_load(const Tensor& table, int experts) {
  std::vector<int64_t> load(static_cast<size_t>(experts), 0);
  for (int64_t i = 0; i < table.numel(); ++i) load.at(static_cast<size_t>(table.at(i))) += 1;
  return load;
}

// Every input of the reference run: the initial parameters and each step's
// token ids and targets.
void dump_inputs(const model::GptConfig& c, uint64_t seed, int steps, Checker& checker) {
  ref::GptParams initial = reference_params(c, seed);
  for (const auto& [name, t] : named(initial, model::param_specs(c))) checker.input("param0." + name, t);
  const model::TokenSource source = model::token_source(c, seed);
  auto ids = [](const std::vector<int64_t>& v, int64_t rows) {
    return Tensor::from_values({rows, static_cast<int64_t>(v.size()) / rows}, std::vector<double>(v.begin(), v.end()),
                               DType::f64);
  };
  for (int k = 0; k < steps; ++k) {
    const model::GlobalBatch batch = model::global_batch(c, source, k);
    checker.input(cat("step", k + 1, ".inputs"), ids(batch.inputs, c.batch));
    checker.input(cat("step", k + 1, ".targets"), ids(batch.targets, c.batch));
  }
}

// Per-tensor FP8 recipes (collective). The ranks that hold a layer (its
// TP x DP x CP group) reduce each amax over one another before the cast, so
// they decode with the same scales bit for bit at every step; and the first
// step's weights are the one-rank run's bits, so their scales are its too.
// Activations and gradients differ from the one-rank run's by rounding
// (other reduction orders), and so may their amaxes.
void check_step_scales(const model::GptConfig& c, const RunRecord& dist, const RunRecord& base, Checker& checker) {
  if (!c.fp8 || !c.fp8->per_tensor() || dist.empty()) return;
  const std::vector<std::string> names = fp8_scale_names(c);
  Communicator& comm = checker.comm();
  // Every step's scales in name order, NaN where this rank holds no such layer; all of them on every rank.
  const size_t per_rank = dist.size() * names.size();
  std::vector<float> mine(per_rank, std::numeric_limits<float>::quiet_NaN());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = i;
  for (size_t k = 0; k < dist.size(); ++k)
    for (size_t i = 0; i < dist[k].fp8_scales.names.size(); ++i)
      mine.at(k * names.size() + index.at(dist[k].fp8_scales.names[i])) = dist[k].fp8_scales.values[i];
  std::vector<float> all(per_rank * static_cast<size_t>(comm.size()));
  comm.all_gather(mine.data(), all.data(), per_rank, DType::f32);
  // Each rank against the lowest rank that holds the same layer.
  int64_t wrong = 0, checked = 0;
  for (size_t j = 0; j < per_rank; ++j) {
    if (std::isnan(mine[j])) continue;
    int first = 0;
    while (std::isnan(all[static_cast<size_t>(first) * per_rank + j])) ++first;
    if (first == comm.rank()) continue;
    ++checked;
    const float want = all[static_cast<size_t>(first) * per_rank + j];
    if (std::bit_cast<uint32_t>(mine[j]) == std::bit_cast<uint32_t>(want) || wrong++ > 0) continue;
    checker.fail(cat("fp8_scales: step", j / names.size() + 1, ".", names[j % names.size()], " decodes with ", mine[j],
                     " on rank ", comm.rank(), " but ", want, " on rank ", first,
                     ": its amax was not reduced over the ranks that split the tensor"));
  }
  checker.exact("fp8_scales.replicas", wrong, checked);
  // The first step's weight scales against the one-rank run's.
  Fp8Scales weights, base_weights;
  std::vector<std::string> weight_names;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].ends_with(".weight")) weight_names.push_back(names[i]);
    if (checker.is_root() && names[i].ends_with(".weight")) base_weights.values.push_back(base[0].fp8_scales.values[i]);
  }
  for (size_t i = 0; i < dist[0].fp8_scales.names.size(); ++i)
    if (dist[0].fp8_scales.names[i].ends_with(".weight")) {
      weights.names.push_back(dist[0].fp8_scales.names[i]);
      weights.values.push_back(dist[0].fp8_scales.values[i]);
    }
  check_fp8_scales(checker, weight_names, weights, base_weights);
}

void check_train(State& s, Checker& checker) {
  const RunRecord dist = run_steps(*s.trainer, *s.host, s.steps, &checker);
  s.check_losses.clear();
  for (const StepRecord& r : dist) s.check_losses.push_back(r.loss);
  // The baseline and reference models below are not the measured step's.
  const MemoryNotCounted not_the_step;
  static const RunRecord kNone;
  const RunRecord& base = checker.is_root() ? baseline_run(s.model, *s.self, s.host_self(), s.seed, s.steps) : kNone;
  check_step_scales(s.model, dist, base, checker);
  if (!checker.is_root()) return;
  const RunRecord& ref = reference_run(s.model, s.seed, s.steps);
  // Each run against the reference that routes as it did at near ties.
  RunRecord ref_dist_own, ref_base_own;
  const RunRecord& ref_dist =
      routing_differs(dist, ref) ? (ref_dist_own = following_reference(s.model, s.seed, dist, checker.dtype())) : ref;
  const RunRecord& ref_base =
      routing_differs(base, ref) ? (ref_base_own = following_reference(s.model, s.seed, base, checker.dtype())) : ref;
  for (const auto& [who, r] : {std::pair{"distributed model", &ref_dist}, std::pair{"one-rank baseline", &ref_base}})
    if (r != &ref) {
      std::vector<int64_t> per_step;
      for (const StepRecord& step : *r) per_step.push_back(step.ties_followed);
      checker.note(cat("routing_ties_followed.", who), per_step);
    }
  if (checker.dumping()) dump_inputs(s.model, s.seed, s.steps, checker);
  checker.note("losses", s.check_losses);
  checker.note("reference_losses", [&] {
    std::vector<double> v;
    for (const StepRecord& r : ref) v.push_back(r.loss);
    return v;
  }());
  const std::vector<model::ParamSpec> specs = model::param_specs(s.model);
  for (int k = 0; k < s.steps; ++k) {
    const std::string step = cat("step", k + 1, ".");
    const Tensor ref_dist_loss = scalar(ref_dist[k].loss), ref_base_loss = scalar(ref_base[k].loss);
    checker.compare(step + "loss", model_bound(s.model, checker.dtype(), OpClass::loss, 1.0), scalar(dist[k].loss),
                    scalar(base[k].loss), ref_dist_loss, &ref_dist == &ref_base ? ref_dist_loss : ref_base_loss);
    for (size_t l = 0; l < ref[k].routing.size(); ++l) {
      const std::string label = cat(step, "routing.moe", l);
      if (k == 0) checker.note(cat("expert_load.moe", l), expert_load(dist[k].routing[l], s.model.experts));
      const double band = routing_tie_band(s.model, checker.dtype(), k + 1);
      compare_routing(checker, "distributed model", label, dist[k].routing[l], ref_dist[k].routing[l], band);
      compare_routing(checker, "one-rank baseline", label, base[k].routing[l], ref_base[k].routing[l], band);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string& name = specs[i].name;
      const double growth = training_growth(s.model, k + 1, depth_from_loss(specs, i, s.model.layers));
      checker.compare(step + "grad." + name, model_bound(s.model, checker.dtype(), OpClass::model, growth),
                      dist[k].grads.at(name), base[k].grads.at(name), ref_dist[k].grads.at(name),
                      ref_base[k].grads.at(name));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string& name = specs[i].name;
      const double growth = training_growth(s.model, k + 1, depth_from_loss(specs, i, s.model.layers));
      checker.compare(step + "param." + name, model_bound(s.model, checker.dtype(), OpClass::model, growth),
                      dist[k].params.at(name), base[k].params.at(name), ref_dist[k].params.at(name),
                      ref_base[k].params.at(name));
    }
  }
}

}  // namespace sextant::step
