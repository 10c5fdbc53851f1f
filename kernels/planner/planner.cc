#include "kernels/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/planner/memory.h"
#include "kernels/planner/time_model.h"

namespace sextant::plan {

void to_json(nlohmann::json& j, const Estimate& e) {
  const Config& c = e.config;
  j = {{"config",
        {{"tp", c.tp},
         {"cp", c.cp},
         {"pp", c.pp},
         {"dp", c.dp},
         {"ep", c.ep},
         {"etp", c.etp},
         {"vpp", c.vpp},
         {"sp", c.sp},
         {"recompute", recompute_name(c.recompute)},
         {"distributed_optimizer", c.distributed_optimizer}}},
       {"microbatches", e.microbatches},
       {"memory_bytes",
        {{"weights", e.weights},
         {"gradients", e.gradients},
         {"optimizer", e.optimizer},
         {"activations", e.activations},
         {"communication", e.communication},
         {"total", e.memory}}},
       {"fits", e.fits},
       {"time_s",
        {{"compute", e.compute},
         {"tp_comm", e.tp_comm},
         {"cp_comm", e.cp_comm},
         {"ep_comm", e.ep_comm},
         {"dp_comm", e.dp_comm},
         {"pp_comm", e.pp_comm},
         {"bubble", e.bubble},
         {"step", e.step}}},
       {"model_flops", e.model_flops},
       {"mfu", e.mfu},
       {"tokens_per_s", e.tokens_per_s}};
}

// Megatron's num_floating_point_operations (megatron/training/training.py), for `sequences`
// sequences of the model's length: forward + backward = 3x forward, a matmul
// of n params costs 2n per token forward.
double model_flops_per_step(const ModelSpec& m, int64_t sequences) {
  const double tokens = static_cast<double>(sequences) * m.seq;
  const double h = m.hidden, qv = static_cast<double>(m.heads * (m.dhead() + m.dv())) / 2;
  const double layers = static_cast<double>(m.layers + m.mtp_layers);
  const double mlp = m.trained_dense_layers() * m.mlp_params(m.ffn) +
                     m.trained_moe_layers() * (m.topk + m.shared_experts) * m.mlp_params(m.moe_ffn);
  // MTP: each depth's [2h -> h] projection and its logits.
  const double mtp = m.mtp_layers * (2 * h * h + h * m.vocab);
  const double dense = 6.0 * tokens * (mlp + layers * m.attention_params() + h * m.vocab + mtp);
  // QK^T reads the query/key head dim, PV the value head dim: their mean.
  const double scores = (m.causal ? 6.0 : 12.0) * qv * layers * static_cast<double>(sequences) * m.seq * m.seq;
  return dense + scores;
}

namespace {

double GiB(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

}  // namespace

void validate(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& g) {
  const int64_t world = static_cast<int64_t>(g.tp) * g.cp * g.pp * g.dp;
  require(world == c.gpus,
          cat("gpus ", c.gpus, " must equal tp*cp*pp*dp = ", g.tp, "*", g.cp, "*", g.pp, "*", g.dp, " = ", world));
  require_divides("tp", g.tp, "heads", m.heads);
  require(m.kv() % g.tp == 0 || g.tp % m.kv() == 0,
          cat("tp ", g.tp, " and kv heads ", m.kv(), " must divide one another"));
  require_divides("tp", g.tp, "ffn", m.ffn > 0 ? m.ffn : g.tp);
  require_divides(g.cp > 1 && m.causal ? "2*cp" : "cp", g.cp > 1 && m.causal ? 2 * g.cp : g.cp, "seq", m.seq);
  require(g.pp * g.vpp <= m.layers, cat("pp*vpp = ", g.pp * g.vpp, " must not exceed the ", m.layers, " layers"));
  require(g.ep == 1 || m.experts > 0, cat("ep ", g.ep, " needs an MoE model (experts > 0)"));
  if (m.experts > 0) {
    require_divides("ep", g.ep, "experts", m.experts);
    require_divides("etp", g.etp, "moe ffn", m.moe_ffn);
    require(world / g.pp % (static_cast<int64_t>(g.etp) * g.ep) == 0,
            cat("etp*ep = ", g.etp * g.ep, " must divide tp*cp*dp = ", world / g.pp));
  }
  require(t.micro_batch > 0 && t.global_batch % (static_cast<int64_t>(g.dp) * t.micro_batch) == 0,
          cat("global batch ", t.global_batch, " must be a multiple of dp*micro batch = ", g.dp * t.micro_batch));
  const int64_t m_count = t.global_batch / (static_cast<int64_t>(g.dp) * t.micro_batch);
  require(g.vpp == 1 || m_count % g.pp == 0,
          cat("interleaved pipeline (vpp ", g.vpp, "): microbatches ", m_count, " must be a multiple of pp ", g.pp));
}

Estimate estimate(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& g) {
  validate(m, c, t, g);
  Estimate e;
  e.config = g;
  e.microbatches = t.global_batch / (static_cast<int64_t>(g.dp) * t.micro_batch);
  // Megatron's mixed precision, activations as memory.h lists them.
  const MemoryBreakdown mem = estimate_memory(m, t, g, megatron_layout(t.grad_reduce));
  e.weights = mem.weights, e.gradients = mem.gradients, e.optimizer = mem.optimizer;
  e.activations = mem.activations, e.communication = mem.communication;
  e.memory = mem.total();
  e.fits = GiB(e.memory) <= c.usable_memory * c.memory_gb;

  // Time: time_model.h.
  e.model_flops = model_flops_per_step(m, t.global_batch);
  const StepTime time = step_time(m, c, t, g);
  e.gemm = time.gemm, e.attention = time.attention, e.memory_bound = time.memory_bound;
  e.overhead = time.overhead, e.optimizer_time = time.optimizer;
  e.compute = time.compute(), e.bubble = time.bubble;
  e.tp_comm = time.tp, e.cp_comm = time.cp, e.ep_comm = time.ep, e.dp_comm = time.dp, e.pp_comm = time.pp;
  e.step = e.compute + e.bubble + e.tp_comm + e.cp_comm + e.ep_comm + e.dp_comm + e.pp_comm;
  e.mfu = e.model_flops / (e.step * c.gpus * c.peak_tflops * 1e12);
  e.tokens_per_s = static_cast<double>(t.global_batch) * m.seq / e.step;
  return e;
}

std::vector<Estimate> search(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t) {
  std::vector<Estimate> out;
  auto divisors = [](int64_t n) {
    std::vector<int> d;
    for (int64_t i = 1; i <= n; ++i)
      if (n % i == 0) d.push_back(static_cast<int>(i));
    return d;
  };
  for (int tp = 1; tp <= c.gpus_per_node; tp *= 2)  // TP stays inside a node
    for (int cp = 1; cp <= 64; cp *= 2)
      for (int pp : divisors(c.gpus / std::min<int64_t>(c.gpus, static_cast<int64_t>(tp) * cp))) {
        if (c.gpus % (static_cast<int64_t>(tp) * cp * pp) != 0 || pp > m.layers) continue;
        const int dp = static_cast<int>(c.gpus / (static_cast<int64_t>(tp) * cp * pp));
        for (int ep : m.experts > 0 ? divisors(m.experts) : std::vector<int>{1})
          for (int etp : m.experts > 0 && tp > 1 ? std::vector<int>{1, tp} : std::vector<int>{1})
            for (int vpp = 1; vpp <= (pp > 1 ? 8 : 1); vpp *= 2)
              // Selective recompute is not searched: it holds what none does
              // and computes more, so it never ranks above none (--check costs it).
              for (Recompute r : {Recompute::none, Recompute::full}) {
                Config g{tp, cp, pp, dp, ep, etp, vpp, tp > 1, r, true};
                try {
                  out.push_back(estimate(m, c, t, g));
                } catch (const UsageError&) {
                  // not a valid config for this model: skip
                }
              }
      }
  std::stable_sort(out.begin(), out.end(), [](const Estimate& a, const Estimate& b) {
    if (a.fits != b.fits) return a.fits;
    return a.step < b.step;
  });
  return out;
}

}  // namespace sextant::plan
