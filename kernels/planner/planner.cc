#include "kernels/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/planner/memory.h"

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
  const double mlp =
      m.dense_layers() * m.mlp_params(m.ffn) + m.moe_layers * (m.topk + m.shared_experts) * m.mlp_params(m.moe_ffn);
  const double dense = 6.0 * tokens * (mlp + m.layers * m.attention_params() + h * m.vocab);
  // QK^T reads the query/key head dim, PV the value head dim: their mean.
  const double scores = (m.causal ? 6.0 : 12.0) * qv * m.layers * static_cast<double>(sequences) * m.seq * m.seq;
  return dense + scores;
}

namespace {

double GiB(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

// Time of one ring collective moving `bytes` over n ranks at bw GB/s:
// factor * bytes / bw + steps * alpha (nccl-tests bus-bandwidth factors).
double ring_time(double bytes, int n, double factor, double bw_GBps, double alpha_s) {
  if (n <= 1) return 0;
  return factor * bytes / (bw_GBps * 1e9) + (n - 1) * alpha_s;
}

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
  const HeldParams st = held_params(m, g);
  const int edp = g.tp * g.cp * g.dp / (g.etp * g.ep);
  const double dense_params = st.dense, expert_params = st.expert;
  const double sbh = static_cast<double>(m.seq) / g.cp * t.micro_batch * m.hidden;
  // Megatron's mixed precision, activations as memory.h lists them.
  const MemoryBreakdown mem = estimate_memory(m, t, g, megatron_layout());
  e.weights = mem.weights, e.gradients = mem.gradients, e.optimizer = mem.optimizer;
  e.activations = mem.activations, e.communication = mem.communication;
  e.memory = mem.total();
  e.fits = GiB(e.memory) <= c.usable_memory * c.memory_gb;

  // Compute: model FLOPs (+ one more forward of the layers under full
  // recompute, of the attention core under selective) spread over the GPUs,
  // scaled by the heaviest stage's share. The core's FLOPs, forward and
  // backward: 2 s^2 (d + dv) per head forward (QK^T and PV), half of it
  // causal, backward twice the forward.
  e.model_flops = model_flops_per_step(m, t.global_batch);
  const double attention_flops = (m.causal ? 3.0 : 6.0) * m.heads * (m.dhead() + m.dv()) * m.layers *
                                 static_cast<double>(t.global_batch) * m.seq * m.seq;
  const double hw_flops = e.model_flops * (g.recompute == Recompute::full ? 4.0 / 3.0 : 1.0) +
                          (g.recompute == Recompute::selective ? attention_flops / 3 : 0.0);
  const double imbalance = static_cast<double>(st.layers) * g.pp / m.layers;
  const double flops_rate = c.peak_tflops * 1e12 * c.gemm_efficiency;
  e.compute = hw_flops / c.gpus / flops_rate * imbalance;
  e.bubble = e.compute * (g.pp - 1.0) / (g.vpp * e.microbatches);

  const double alpha = c.latency_us * 1e-6;
  auto bw = [&](int64_t span) { return span <= c.gpus_per_node ? c.nvlink_GBps : c.network_GBps; };
  const double m_count = static_cast<double>(e.microbatches);
  const double recompute_extra = g.recompute == Recompute::full ? 1.0 : 0.0;
  // TP: 2 all-reduces (or AG + RS with SP, same bytes) per layer forward, 2 backward, exposed.
  const double act_bytes = sbh * 2.0;
  e.tp_comm = st.layers * m_count * (4.0 + 2 * recompute_extra) *
              ring_time(act_bytes, g.tp, 2.0 * (g.tp - 1) / g.tp, bw(g.tp), alpha);
  // CP: the ring passes K and V (and dK, dV in backward) cp-1 times per layer,
  // overlapped with the attention compute of the layer.
  const double kv_bytes = sbh / m.hidden * m.kv() * (m.dhead() + m.dv()) * 2.0 / g.tp;
  const double cp_raw = st.layers * m_count * 3.0 * (g.cp - 1) * (kv_bytes / (bw(g.tp * g.cp) * 1e9) + alpha);
  e.cp_comm = std::max(0.0, cp_raw - attention_flops / c.gpus / flops_rate * imbalance);
  // EP: dispatch and combine all-to-alls, forward and backward, per MoE layer.
  const double token_bytes = sbh / (g.sp ? g.tp : 1) * 2.0 * m.topk;
  e.ep_comm = st.moe_layers * m_count * (4.0 + 2 * recompute_extra) *
              ring_time(token_bytes, g.ep, (g.ep - 1.0) / g.ep, bw(static_cast<int64_t>(g.etp) * g.ep), alpha);
  // DP: reduce-scatter of fp32 gradients + all-gather of bf16 parameters over
  // dp x cp (experts over EDP); hidden behind the last microbatch's backward.
  const int dpcp = g.dp * g.cp;
  const double dp_raw =
      ring_time(6.0 * dense_params, dpcp, (dpcp - 1.0) / dpcp, bw(static_cast<int64_t>(g.tp) * dpcp), alpha) +
      ring_time(6.0 * expert_params, edp, (edp - 1.0) / edp, c.network_GBps, alpha);
  e.dp_comm = std::max(0.0, dp_raw - e.compute * 2.0 / 3.0 / m_count);
  // PP: one activation and one gradient per microbatch and boundary on the
  // critical path.
  const double p2p_bytes = act_bytes / (g.sp ? g.tp : 1);
  e.pp_comm = g.pp > 1 ? 2.0 * (m_count + g.pp - 1) * (p2p_bytes / (c.network_GBps * 1e9) + alpha) : 0.0;

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
            for (int vpp = 1; vpp <= 8; vpp *= 2)
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
