// Conformance: one step of the schedule against the float64 reference and
// the one-rank baseline. The loss and every weight gradient (each kind
// stacked over the layers: dw1 is [layers, hidden, ffn]) are gathered on
// the instance's rank 0 and compared there.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "harness/assemble.h"
#include "harness/memo.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/pipeline/timeline.h"
#include "reference/mlp.h"
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {

namespace {

Tensor with_layer_dim(const Tensor& t) {
  Shape s{1};
  s.insert(s.end(), t.shape().begin(), t.shape().end());
  return t.reshape(s);
}

// The weight gradients of a whole model, by kind, each stacked over layers:
// the stack's shape (L layers, hidden h, ffn f), the reference's gradient of
// one layer, and this rank's block of layer l's gradient with its place in
// the stack (ffn columns from ffn_offset).
struct GradKind {
  const char* name;
  Shape (*shape)(int64_t L, int64_t h, int64_t f);
  const Tensor& (*reference)(const ref::MlpGrads& g);
  Block (*block)(tp::MlpGrads& g, int64_t layer, int64_t ffn_offset);
};
const GradKind kKinds[] = {
    {"dln_gamma",
     [](int64_t L, int64_t h, int64_t) {
       return Shape{L, h};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.dln_gamma; },
     [](tp::MlpGrads& g, int64_t l, int64_t) {
       return Block{with_layer_dim(g.ln_gamma), {l, 0}};
     }},
    {"dln_beta",
     [](int64_t L, int64_t h, int64_t) {
       return Shape{L, h};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.dln_beta; },
     [](tp::MlpGrads& g, int64_t l, int64_t) {
       return Block{with_layer_dim(g.ln_beta), {l, 0}};
     }},
    {"dw1",
     [](int64_t L, int64_t h, int64_t f) {
       return Shape{L, h, f};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.dw1; },
     [](tp::MlpGrads& g, int64_t l, int64_t o) {
       return Block{with_layer_dim(g.fc1.dw), {l, 0, o}};
     }},
    {"db1",
     [](int64_t L, int64_t, int64_t f) {
       return Shape{L, f};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.db1; },
     [](tp::MlpGrads& g, int64_t l, int64_t o) {
       return Block{with_layer_dim(g.fc1.db), {l, o}};
     }},
    {"dw2",
     [](int64_t L, int64_t h, int64_t f) {
       return Shape{L, f, h};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.dw2; },
     [](tp::MlpGrads& g, int64_t l, int64_t o) {
       return Block{with_layer_dim(g.fc2.dw), {l, o, 0}};
     }},
    {"db2",
     [](int64_t L, int64_t h, int64_t) {
       return Shape{L, h};
     },
     [](const ref::MlpGrads& g) -> const Tensor& { return g.db2; },
     [](tp::MlpGrads& g, int64_t l, int64_t) {
       return Block{with_layer_dim(g.fc2.db), {l, 0}};
     }},
};

Shape kind_shape(const GradKind& kind, const Problem& p) { return kind.shape(p.layers, p.hidden, p.ffn); }

struct Gradients {
  double loss = 0;
  std::map<std::string, Tensor> grads;  // kind -> [layers, ...]
};

// The float64 reference: every global microbatch through every layer
// (reference/mlp.h), the loss 0.5 ||y - t||^2 / (M b s) summed, and each
// layer's gradients summed over the microbatches.
Gradients reference(const MlpStagesConfig& on_device, const Problem& p) {
  MlpStagesConfig c = on_device;
  c.device = Device::host;  // the f64 reference reads host tensors
  Gradients out;
  for (const GradKind& k : kKinds) out.grads[k.name] = Tensor::zeros(kind_shape(k, p), DType::f64);
  std::vector<ref::MlpParams> params;
  for (int64_t l = 0; l < c.layers; ++l) {
    const tp::MlpWeights w = layer_weights(c, l, 0, 1);  // the test dtype's values, read as f64
    params.push_back({w.ln_gamma, w.ln_beta, w.fc1.w, w.fc1.b, w.fc2.w, w.fc2.b});
  }
  const double scale = 1.0 / (static_cast<double>(c.total_microbatches) * c.batch * c.seq);
  for (int g = 0; g < c.total_microbatches; ++g) {
    std::vector<Tensor> xs{microbatch_input(c, g, 0, c.seq).to(DType::f64)};  // xs[l]: input of layer l
    for (int64_t l = 0; l < c.layers; ++l) xs.push_back(ref::mlp_forward(xs[l], params[l]));
    const std::vector<double> y = xs.back().to_vector(), t = microbatch_target(c, g, 0, c.seq).to_vector();
    Tensor dy = Tensor::empty(xs.back().shape(), DType::f64);
    for (size_t i = 0; i < y.size(); ++i) {
      out.loss += 0.5 * (y[i] - t[i]) * (y[i] - t[i]) * scale;
      dy.set(static_cast<int64_t>(i), (y[i] - t[i]) * scale);
    }
    for (int64_t l = c.layers - 1; l >= 0; --l) {
      const ref::MlpGrads gr = ref::mlp_backward(dy, xs[l], params[l]);
      for (const GradKind& kind : kKinds) {
        Tensor& sum = out.grads[kind.name];
        const Tensor& grad = kind.reference(gr);
        const int64_t n = grad.numel();
        for (int64_t i = 0; i < n; ++i) sum.set(l * n + i, sum.at(l * n + i) + grad.at(i));
      }
      dy = gr.dx;
    }
  }
  return out;
}

// The baseline: the same stages on one rank in the test dtype, every layer
// in one stage, microbatch after microbatch (F then the fused B).
Gradients baseline(const MlpStagesConfig& full, const Problem& p, Communicator& self) {
  MlpStagesConfig c = full;
  c.stages = 1;
  c.microbatches = c.total_microbatches;
  c.first_microbatch = 0;
  const tp::TpGroup one{self};
  MlpStages model(c, one, {0});
  model.zero_grad();
  for (int mb = 0; mb < c.microbatches; ++mb) {
    model.forward(0, mb, Tensor{});
    model.backward(0, mb, Tensor{});
  }
  Gradients out;
  out.loss = model.loss();
  for (const GradKind& k : kKinds) {
    Tensor stacked = Tensor::zeros(kind_shape(k, p), tp::grad_dtype(c.dtype));
    for (int64_t l = 0; l < c.layers; ++l) {
      Block b = k.block(model.grads(l), l, 0);
      write_slice(stacked, 0, l, b.data);
    }
    out.grads[k.name] = stacked;
  }
  return out;
}

struct Expected {
  Gradients ref, base;
};

// The reference and the baseline depend on the problem, not on the schedule
// or the parallel config: computed once per problem and process (root only).
struct ExpectedKey {
  uint64_t seed;
  DType dtype;
  Device device;
  int64_t layers, hidden, ffn, batch, seq;
  int total_microbatches;
  bool operator==(const ExpectedKey&) const = default;
};

const Expected& expected_for(const MlpStagesConfig& c, const Problem& p, Communicator& self) {
  static Memo<ExpectedKey, Expected> memo(4);
  const ExpectedKey key{c.seed, c.dtype, c.device, c.layers, c.hidden, c.ffn, c.batch, c.seq, c.total_microbatches};
  return memo.get(key, [&] { return Expected{reference(c, p), baseline(c, p, self)}; });
}

// Every input of the whole model: each layer's weights, each global
// microbatch's input and target (what reference() reads).
void dump_inputs(MlpStagesConfig c, Checker& checker) {
  c.device = Device::host;
  for (int64_t l = 0; l < c.layers; ++l) {
    const tp::MlpWeights w = layer_weights(c, l, 0, 1);
    for (auto [name, t] : {std::pair{"ln_gamma", &w.ln_gamma},
                           {"ln_beta", &w.ln_beta},
                           {"w1", &w.fc1.w},
                           {"b1", &w.fc1.b},
                           {"w2", &w.fc2.w},
                           {"b2", &w.fc2.b}})
      checker.input(cat("layer", l, ".", name), *t);
  }
  for (int g = 0; g < c.total_microbatches; ++g) {
    checker.input(cat("microbatch", g, ".x"), microbatch_input(c, g, 0, c.seq));
    checker.input(cat("microbatch", g, ".target"), microbatch_target(c, g, 0, c.seq));
  }
}

// A number that changes when any element of t does (for the agreement of
// schedules): the dot product with fixed pseudo-random weights.
double fingerprint(const Tensor& t) {
  const RandomSpec spec{0, tensor_id("pipeline.fingerprint"), 1.0};
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) sum += t.at(i) * random_value(spec, static_cast<uint64_t>(i));
  return sum;
}

Tensor scalar(double value, DType dtype) { return Tensor::from_values({1}, {value}, dtype); }

// Activations must all be released by the end of the step, and the most held
// at once must be what the schedule's order implies.
void check_activations(PipelineState& s, Checker& checker) {
  if (s.stages->held_activations() != 0)
    checker.fail(cat("rank ", s.host->rank(), ": ", s.stages->held_activations(),
                     " microbatches' activations still held after the step"));
  const size_t chunks = s.schedule.stages_of(s.pp_rank).size();
  const double expected = pp::peak_activations(s.schedule)[s.pp_rank] * static_cast<double>(chunks);
  if (static_cast<double>(s.stages->peak_held_activations()) != expected)
    checker.fail(cat("pipeline rank ", s.pp_rank, " held ", s.stages->peak_held_activations(),
                     " chunk activations at once, the schedule implies ", expected));
}

// The schedule as a CSV file (the form a user's --set schedule_file takes)
// must read back as the same schedule: every action of every rank counted.
void check_csv_round_trip(const PipelineState& s, Checker& checker) {
  const pp::Schedule back = pp::schedule_from_csv(pp::to_csv(s.schedule), s.schedule.microbatches, s.schedule.stages);
  int64_t wrong = 0, checked = 0;
  const size_t ranks = std::max(back.actions.size(), s.schedule.actions.size());
  for (size_t r = 0; r < ranks; ++r) {
    const std::vector<pp::Action> none;
    const std::vector<pp::Action>& a = r < s.schedule.actions.size() ? s.schedule.actions[r] : none;
    const std::vector<pp::Action>& b = r < back.actions.size() ? back.actions[r] : none;
    for (size_t t = 0; t < std::max(a.size(), b.size()); ++t) {
      ++checked;
      wrong += t >= a.size() || t >= b.size() || !(a[t] == b[t]);
    }
  }
  if (checker.is_root()) checker.exact("schedule_csv_round_trip", wrong, checked);
}

// The model of the instance as one device holds it: every layer, every
// microbatch of the global batch.
MlpStagesConfig whole_model(const PipelineState& s) {
  MlpStagesConfig c;
  c.layers = s.p.layers;
  c.hidden = s.p.hidden;
  c.ffn = s.p.ffn;
  c.batch = s.p.batch;
  c.seq = s.p.seq;
  c.microbatches = c.total_microbatches = s.p.total_microbatches();
  c.dtype = s.dtype;
  c.device = s.device;
  c.seed = s.seed;
  return c;
}

}  // namespace

void check(PipelineState& s, Checker& checker) {
  run_step(s);
  check_activations(s, checker);
  check_csv_round_trip(s, checker);
  const Problem& p = s.p;
  // The loss lives on the last stage's ranks: summed over DP replicas and, under
  // SP, over the TP ranks' token shards (without SP every TP rank holds all of it).
  const bool holds_last = s.schedule.stage_rank[s.schedule.stages - 1] == s.pp_rank;
  const double my_loss = holds_last && (p.sp || s.tp_rank == 0) ? s.stages->loss() : 0.0;
  const double loss = s.host->all_reduce_value(my_loss, ReduceOp::sum);
  const Expected* e = nullptr;
  if (checker.is_root()) {
    e = &expected_for(whole_model(s), p, *s.self);
    if (checker.dumping()) dump_inputs(whole_model(s), checker);
    checker.compare("loss", OpClass::loss, scalar(loss, DType::f64), scalar(e->base.loss, DType::f64),
                    scalar(e->ref.loss, DType::f64));
    checker.note("loss", loss);
  }
  const int64_t ffn_offset = p.ffn / p.tp * s.tp_rank;
  nlohmann::json prints = nlohmann::json::object();
  for (const GradKind& k : kKinds) {
    const std::string kind = k.name;
    std::vector<Block> blocks;
    for (int64_t l : s.stages->layers()) blocks.push_back(k.block(s.stages->grads(l), l, ffn_offset));
    Assembled a = assemble(*s.host, blocks, kind_shape(k, p), tp::grad_dtype(s.dtype));
    if (!checker.is_root()) continue;
    if (a.uncovered > 0) checker.fail(cat(kind, ": ", a.uncovered, " elements held by no rank"));
    if (a.mismatched > 0) checker.fail(cat(kind, ": ", a.mismatched, " replicated elements differ between ranks"));
    checker.compare(kind, OpClass::model, a.tensor, e->base.grads.at(kind), e->ref.grads.at(kind));
    prints[kind] = fingerprint(a.tensor);
  }
  if (checker.is_root()) checker.note("grad_fingerprint", prints);
}

}  // namespace sextant::pipeline
