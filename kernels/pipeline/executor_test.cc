// The executor under MPI (1, 2 and 4 ranks): every schedule computes the
// loss and weight gradients of a single-process run and of a float64
// reference, the planted faults fail, and every action is recorded.
#include "kernels/pipeline/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/assemble.h"
#include "harness/comm_nccl_rules.h"
#include "harness/compare.h"
#include "harness/strings.h"
#include "harness/testing/mpi_world.h"
#include "harness/tolerance.h"
#include "kernels/pipeline/generators.h"
#include "kernels/pipeline/testing/linear_stages.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {
namespace {

using testing::world;

// The float64 reference, plain loops: y = tanh(x W_s) through every stage,
// loss = sum_mb 0.5 ||y - t||^2 / (m rows), dW_s = sum_mb x_s^T dz_s.
struct Reference {
  double loss = 0;
  Tensor grads;  // [stages, hidden, hidden]
};

Reference reference(LinearStagesConfig c) {
  c.dtype = DType::f64;
  const int S = c.stages, n = c.rows, h = c.hidden;
  Reference ref{0, Tensor::zeros({S, h, h}, DType::f64)};
  std::vector<Tensor> w;
  for (int s = 0; s < S; ++s) w.push_back(LinearStages::make_weight(c, s));
  for (int mb = 0; mb < c.microbatches; ++mb) {
    std::vector<std::vector<double>> xs{LinearStages::make_input(c, mb).to_vector()};  // xs[s]: input of stage s
    for (int s = 0; s < S; ++s) {
      std::vector<double> y(n * h, 0.0);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < h; ++j) {
          double z = 0;
          for (int k = 0; k < h; ++k) z += xs[s][i * h + k] * w[s].at(k * h + j);
          y[i * h + j] = std::tanh(z);
        }
      xs.push_back(y);
    }
    const std::vector<double> t = LinearStages::make_target(c, mb).to_vector();
    const double scale = 1.0 / (c.microbatches * n);
    std::vector<double> dy(n * h);
    for (int i = 0; i < n * h; ++i) {
      ref.loss += 0.5 * (xs[S][i] - t[i]) * (xs[S][i] - t[i]) * scale;
      dy[i] = (xs[S][i] - t[i]) * scale;
    }
    for (int s = S - 1; s >= 0; --s) {
      std::vector<double> dz(n * h), dx(n * h, 0.0);
      for (int i = 0; i < n * h; ++i) dz[i] = dy[i] * (1 - xs[s + 1][i] * xs[s + 1][i]);
      for (int k = 0; k < h; ++k)
        for (int j = 0; j < h; ++j) {
          double g = 0;
          for (int i = 0; i < n; ++i) g += xs[s][i * h + k] * dz[i * h + j];
          ref.grads.set((s * h + k) * h + j, ref.grads.at((s * h + k) * h + j) + g);
        }
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < h; ++k)
          for (int j = 0; j < h; ++j) dx[i * h + k] += dz[i * h + j] * w[s].at(k * h + j);
      dy = dx;
    }
  }
  return ref;
}

struct Result {
  double loss = 0;
  Tensor grads;  // [stages, hidden, hidden], complete on world rank 0
};

// The same model on one process, microbatch after microbatch (no executor).
Result sequential(const LinearStagesConfig& c) {
  std::vector<int> all(c.stages);
  for (int s = 0; s < c.stages; ++s) all[s] = s;
  LinearStages model(c, all);
  for (int mb = 0; mb < c.microbatches; ++mb) {
    Tensor x;
    for (int s = 0; s < c.stages; ++s) x = model.forward(s, mb, x);
    Tensor g;
    for (int s = c.stages - 1; s >= 0; --s) g = model.backward(s, mb, g);
  }
  Result r{model.loss(), Tensor::zeros({c.stages, c.hidden, c.hidden}, c.dtype)};
  for (int s = 0; s < c.stages; ++s)
    for (int64_t i = 0; i < c.hidden * c.hidden; ++i)
      r.grads.set(s * c.hidden * c.hidden + i, model.weight_grad(s).at(i));
  return r;
}

struct Distributed {
  Result result;
  Timeline timeline;
};

// The schedule on `pp` (the world's ranks): loss summed, gradients assembled on rank 0.
Distributed distributed(const Schedule& schedule, const LinearStagesConfig& c, int steps = 1,
                        Communicator& pp = world()) {
  LinearStages model(c, schedule.stages_of(pp.rank()));
  PipelineExecutor executor(schedule, pp, model, ExecutorOptions{Fault::none, &world()});  // host bookkeeping on MPI
  std::vector<TimedAction> mine;
  for (int step = 0; step < steps; ++step) {  // later steps reuse the buffers
    model.zero_grad();
    mine = executor.run_step();
  }
  EXPECT_EQ(model.held_activations(), 0u) << "activations left after the step";
  Distributed d;
  d.timeline = executor.gather(mine);
  d.result.loss = pp.all_reduce_value(model.loss(), ReduceOp::sum);
  std::vector<Block> blocks;
  for (int s : schedule.stages_of(pp.rank()))
    blocks.push_back(block_along(model.weight_grad(s).reshape({1, c.hidden, c.hidden}), 0, s));
  Assembled a = assemble(pp, blocks, {c.stages, c.hidden, c.hidden}, c.dtype);
  if (pp.rank() == 0) {
    EXPECT_EQ(a.uncovered, 0);
  }
  d.result.grads = a.tensor;
  return d;
}

LinearStagesConfig config_for(const Schedule& s) {
  LinearStagesConfig c;
  c.stages = s.stages;
  c.microbatches = s.microbatches;
  c.rows = 3;
  c.hidden = 8;
  c.seed = 7;
  return c;
}

// Conformance as docs/CONFORMANCE.md states it, for the loss and the gradients.
struct Verdict {
  bool pass = true;
  std::string detail;
};
Verdict check(const Result& dist, const Result& base, const Reference& ref, DType dtype) {
  Verdict v;
  auto one = [&](const std::string& name, const Tensor& d, const Tensor& b, const Tensor& r) {
    const double err = compare(d, r).rel_l2, base_err = compare(b, r).rel_l2;
    const double bound = distributed_bound(dtype, OpClass::model, base_err);
    v.detail += cat(name, " error ", err, " bound ", bound, "; ");
    v.pass = v.pass && err <= bound;
  };
  one("loss", Tensor::from_values({1}, {dist.loss}, DType::f64), Tensor::from_values({1}, {base.loss}, DType::f64),
      Tensor::from_values({1}, {ref.loss}, DType::f64));
  one("grads", dist.grads, base.grads, ref.grads);
  return v;
}

std::vector<Schedule> schedules_at(int p) {
  std::vector<Schedule> out;
  for (int m : {p, 2 * p}) {
    out.push_back(gpipe(p, m));
    out.push_back(one_f_one_b(p, m));
    out.push_back(interleaved_1f1b(p, m, 2));
    out.push_back(zb_h1(p, m));
    out.push_back(zb_v(p, m));
  }
  out.push_back(zb_v(p, 1));  // the V cut short
  out.push_back(dualpipe_v(p, 2 * p));
  return out;
}

// On MPI, and under NCCL's rules (no tags, sends that wait for their
// receive, one stream): the message order must make both work.
TEST(Executor, EverySchedulePassesConformance) {
  const int p = world().size();
  auto nccl_rules = NcclRulesCommunicator::create(world());
  for (Communicator* pp : std::vector<Communicator*>{&world(), nccl_rules.get()}) {
    for (const Schedule& s : schedules_at(p)) {
      const LinearStagesConfig c = config_for(s);
      Distributed d = distributed(s, c, 2, *pp);
      if (world().rank() != 0) continue;
      const Reference ref = reference(c);
      const Result base = sequential(c);
      Verdict v = check(d.result, base, ref, c.dtype);
      EXPECT_TRUE(v.pass) << pp->backend() << " " << s.name << " p" << p << " m" << s.microbatches << ": " << v.detail;
      EXPECT_GT(std::abs(ref.loss), 0.0);
      for (int stage = 0; stage < s.stages; ++stage)  // every stage's gradient takes part in the check
        EXPECT_GT(compare(narrow(base.grads, 0, stage, 1), narrow(ref.grads, 0, stage, 1)).ref_norm, 1e-3)
            << s.name << " stage " << stage;
    }
  }
}

TEST(Executor, RecordsEveryActionInOrder) {
  const int p = world().size();
  Schedule s = zb_v(p, 2 * p);
  Distributed d = distributed(s, config_for(s));
  ASSERT_EQ(static_cast<int>(d.timeline.ranks.size()), p);
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(d.timeline.ranks[r].size(), s.actions[r].size()) << "rank " << r;
    for (size_t t = 0; t < s.actions[r].size(); ++t) {
      const TimedAction& a = d.timeline.ranks[r][t];
      EXPECT_EQ(a.action, s.actions[r][t]);
      EXPECT_GE(a.start, 0.0);
      EXPECT_GE(a.end, a.start);
      if (t > 0) {  // one rank runs one action at a time
        EXPECT_GE(a.start, d.timeline.ranks[r][t - 1].end);
      }
    }
  }
  TimelineStats stats = summarize(d.timeline);
  EXPECT_GT(stats.makespan, 0.0);
  for (int r = 0; r < p; ++r) EXPECT_GT(stats.busy[r], 0.0);
}

TEST(Executor, PlantedFaultsFail) {
  const int p = world().size();
  // Gradients of microbatch 0 accumulated twice: the gradient check fails.
  Schedule s = one_f_one_b(p, 2 * p);
  LinearStagesConfig c = config_for(s);
  c.accumulate_twice = true;
  Distributed d = distributed(s, c);
  if (world().rank() == 0) {
    c.accumulate_twice = false;
    Verdict v = check(d.result, sequential(c), reference(c), c.dtype);
    EXPECT_FALSE(v.pass) << v.detail;
  }
  if (p < 2) return;  // no messages to misdirect
  // An activation sent to the wrong peer: caught on every rank before anything runs.
  LinearStages model(config_for(s), s.stages_of(world().rank()));
  try {
    PipelineExecutor executor(s, world(), model, ExecutorOptions{Fault::wrong_peer});
    ADD_FAILURE() << "wrong_peer was not caught";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("nobody receives the activation of stage 0 microbatch 0"), std::string::npos)
        << e.what();
  }
  // Every receive posted before the first action (the order MPI's tags
  // allow): refused before anything runs, since NCCL would hang on it.
  try {
    PipelineExecutor executor(s, world(), model, ExecutorOptions{Fault::eager_receives});
    ADD_FAILURE() << "eager_receives was not caught";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks under NCCL's rules"), std::string::npos) << e.what();
  }
}

TEST(Executor, RejectsBadSchedulesAndSizes) {
  const int p = world().size();
  Schedule missing = one_f_one_b(p, 2);
  missing.actions[p - 1].pop_back();  // the last backward
  LinearStages model(config_for(missing), missing.stages_of(world().rank()));
  EXPECT_THROW((void)PipelineExecutor(missing, world(), model), ScheduleError);
  Schedule wrong_size = one_f_one_b(p + 1, 2);
  EXPECT_THROW((void)PipelineExecutor(wrong_size, world(), model), UsageError);
  Schedule ok = one_f_one_b(p, 2);
  if (p == 1) {  // a message fault needs messages
    EXPECT_THROW((void)PipelineExecutor(ok, world(), model, ExecutorOptions{Fault::wrong_peer}), UsageError);
  }
}

}  // namespace
}  // namespace sextant::pp
