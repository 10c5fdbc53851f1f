// The shared driver: setup (stages, executor, message latency), the timed
// step, and the case table every schedule fills in.
#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/pipeline/validate.h"
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {

namespace {

// Seconds one boundary-sized message takes between pipeline neighbours: every
// rank sends to the next and receives from the previous at once, a few
// rounds; the fastest round, slowest rank. The simulator's latency.
double measure_p2p_latency(Communicator& pp, const Shape& boundary, DType dtype) {
  const int n = pp.size();
  if (n == 1) return 0.0;
  Tensor out = Tensor::zeros(boundary, dtype, pp.device()), in = Tensor::zeros(boundary, dtype, pp.device());
  const size_t count = static_cast<size_t>(out.numel());
  const int next = (pp.rank() + 1) % n, prev = (pp.rank() + n - 1) % n;
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    pp.barrier();
    const double t0 = now_seconds();
    std::vector<RequestPtr> requests;
    pp.group_start();  // one group: on NCCL a lone receive from prev would wait forever
    requests.push_back(pp.irecv(in.raw(), count, dtype, prev, round));
    requests.push_back(pp.isend(out.raw(), count, dtype, next, round));
    pp.group_end();
    wait_all(requests);
    if (pp.device() == Device::cuda) cuda_synchronize();  // NCCL's wait does not block the host
    best = std::min(best, now_seconds() - t0);
  }
  return pp.all_reduce_value(best, ReduceOp::max);
}

MlpStagesConfig stages_config(const PipelineState& s, pp::Fault fault) {
  MlpStagesConfig c;
  c.layers = s.p.layers;
  c.stages = s.schedule.stages;
  c.hidden = s.p.hidden;
  c.ffn = s.p.ffn;
  c.batch = s.p.batch;
  c.seq = s.p.seq;
  c.microbatches = s.p.microbatches;
  c.total_microbatches = s.p.total_microbatches();
  c.first_microbatch = s.dp_rank * s.p.microbatches;
  c.dtype = s.dtype;
  c.device = s.device;
  c.seed = s.seed;
  c.accumulate_twice = fault == pp::Fault::accumulate_twice;
  return c;
}

}  // namespace

PipelineState setup_state(CaseContext& ctx) {
  PipelineState s;
  s.p = problem_of(ctx.config);
  s.pp_comm = &ctx.grid.get(Dim::pp);
  s.dp_comm = &ctx.grid.get(Dim::dp);
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.tp_rank = ctx.grid.get(Dim::tp).rank();
  s.dp_rank = s.dp_comm->rank();
  s.pp_rank = s.pp_comm->rank();
  s.seed = ctx.seed;
  s.dtype = ctx.config.dtype;
  s.device = ctx.device;
  s.id = ctx.config.id();
  s.out_dir = ctx.out_dir;
  const pp::Fault fault = pp::faults().parse(ctx.config.fault);
  s.schedule = build_schedule(s.p, fault);
  try {
    pp::validate(s.schedule);             // before anything is built or sent
  } catch (const pp::ScheduleError& e) {  // a planted schedule fault: the record keeps the grid
    throw RuntimeError(cat(e.what(), "\n", e.grid()));
  }
  const tp::TpGroup group{ctx.grid.get(Dim::tp), s.p.sp};
  s.stages = std::make_unique<MlpStages>(stages_config(s, fault), group, s.schedule.stages_of(s.pp_rank));
  pp::ExecutorOptions options;
  options.fault = fault;
  // The executor's bookkeeping (plan check, timeline gather) moves host data:
  // over MPI, on a host grid of the same ranks where the PP group is on the device.
  if (s.pp_comm->device() != Device::host)
    s.host_grid = std::make_unique<GridComms>(make_grid_comms(ctx.host_comm, ctx.config.parallel));
  options.host = s.host_grid ? &s.host_grid->get(Dim::pp) : s.pp_comm;
  s.executor = std::make_unique<pp::PipelineExecutor>(s.schedule, *s.pp_comm, *s.stages, options);
  s.p2p_latency = measure_p2p_latency(*s.pp_comm, s.stages->boundary_shape(0), s.dtype);
  return s;
}

void run_step(PipelineState& s) {
  s.stages->zero_grad();
  s.steps.push_back(s.executor->run_step());
  s.steps_cpu.push_back(s.stages->action_cpu_seconds());
  s.stages->reduce_grads(*s.dp_comm);
}

CaseDef make_pipeline_case(const ScheduleKind& kind) {
  return make_case(CaseTable<PipelineState>{
      .suite = "pipeline",
      .name = kind.name,
      .summary = kind.summary,
      .options = pipeline_options(),
      .faults = pp::faults().docs(),
      .kernel_faults = {KernelFault::pipeline_skip_weight_grad, KernelFault::layernorm_backward_mean_term,
                        KernelFault::gelu_backward_coefficient},
      .table_metrics = {"bubble_measured_mean", "bubble_simulated", "bubble_closed_form", "microbatches_per_s"},
      .configs = [&kind](const SweepRequest& req) { return sweep(req, kind); },
      .validate = [&kind](const CaseConfig& c) { validate_problem(c, kind); },
      .memory = pipeline_memory,
      .setup = setup_state,
      .timed = {{"step", run_step}},
      .check = check,
      .metrics = pipeline_metrics,
  });
}

}  // namespace sextant::pipeline
