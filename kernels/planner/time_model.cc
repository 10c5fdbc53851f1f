#include "kernels/planner/time_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "kernels/planner/memory.h"

namespace sextant::plan {

namespace {

// cuDNN's fused attention (PyTorch SDPA, bf16, d 128, batch 2, 16 heads) as
// fractions of the 989 TFLOP/s bf16 peak, by sequence length, the mean of
// two runs on one H200, whose SMs and clocks are H100 SXM's
// (results/runs/h200-2026-11-29 and h200-2026-12-04, bench_attention.json;
// backward: 2.5 x the forward's FLOPs over fwd_bwd less fwd). Short
// kernels reach less: each tile's prologue and epilogue weigh more against
// its loop over the keys, and a causal mask leaves fewer tiles per SM.
struct AttentionRate {
  double seq, forward, forward_causal, backward, backward_causal;  // TFLOP/s
};
constexpr AttentionRate kAttentionRates[] = {
    {4096, 567, 450, 534, 413},
    {8192, 632, 533, 544, 524},
    {16384, 610, 621, 537, 511},
};
constexpr double kAttentionRatePeak = 989;

// The rates at a kernel over `seq` keys, interpolated in log(seq) between
// the measured lengths; outside them, the nearest one's (so kernels
// shorter than 4096 keys are costed at least as fast as they run).
AttentionRate attention_rate(double seq) {
  const auto& r = kAttentionRates;
  const size_t n = std::size(r);
  if (seq <= r[0].seq) return r[0];
  if (seq >= r[n - 1].seq) return r[n - 1];
  size_t i = 1;
  while (r[i].seq < seq) ++i;
  const double w = std::log(seq / r[i - 1].seq) / std::log(r[i].seq / r[i - 1].seq);
  auto mix = [&](double a, double b) { return a + w * (b - a); };
  return {seq, mix(r[i - 1].forward, r[i].forward), mix(r[i - 1].forward_causal, r[i].forward_causal),
          mix(r[i - 1].backward, r[i].backward), mix(r[i - 1].backward_causal, r[i].backward_causal)};
}
// FP8 gemms reach a smaller fraction of their peak than bf16 ones: on one
// H200, 8192^3 per-tensor FP8 ran at 1215 of 1979 TFLOP/s, bf16 at 669 of
// 989 (results/runs/h200-2026-12-04-b/bench_ops.json).
constexpr double kFp8EfficiencyRatio = (1215.4 / 1979) / (668.8 / 989);
constexpr double kActivationBytes = 2;  // bf16 activations and their gradients
constexpr double kParamBytes = 2;       // bf16 weights, as the distributed optimizer all-gathers them
// Unfused attention's forward per score in bf16: written by the QK^T gemm,
// read and written by the softmax, read and written by dropout with its
// 1-byte mask, read by the PV gemm.
constexpr double kUnfusedScoreBytes = 6 * kActivationBytes + 1;
// Bytes per logit of the cross-entropy, forward and backward. Fused: read
// the f32 logits twice (max, then the exponentials' sum) and write the
// gradient, and the gradient read by the head's backward. Unfused, in
// Megatron's vocab-parallel cross-entropy: the bf16 -> f32 upcast (2 + 4),
// max (4), subtract (8), exp (8), sum (4), divide (8); backward the scale by
// the loss gradient (8) and the downcast to bf16 (4 + 2).
constexpr double kFusedCrossEntropyBytes = 4 * 4;
constexpr double kUnfusedCrossEntropyBytes = 6 + 4 + 8 + 8 + 4 + 8 + 8 + 6;
// A squared ReLU's extra forward traffic per element over a fused
// activation: relu writes its output (2) and the square reads it back (2).
constexpr double kSquaredReluExtraBytes = 2 * kActivationBytes;
// Adam in mixed precision per parameter it updates: read the f32 main
// gradient, master weight and both moments, write master and moments and
// the bf16 weight.
constexpr double kAdamBytes = 4 * 4 + 3 * 4 + 2;

double ring_seconds(double bytes, int n, double factor, double bw_GBps, double alpha_s) {
  if (n <= 1) return 0;
  return factor * bytes / (bw_GBps * 1e9) + (n - 1) * alpha_s;
}

// What of `comm` stays exposed when `overlap` of it runs beside `cover`.
double exposed(double comm, double overlap, double cover) {
  return (1 - overlap) * comm + overlap * std::max(0.0, comm - cover);
}

// One layer of the heaviest stage for one microbatch, seconds.
struct LayerTime {
  double gemm = 0, gemm_forward = 0, attention = 0, attention_forward = 0, memory = 0, memory_forward = 0;
  // Communication before overlap, and the forward's share of it (what full
  // recompute runs again). TP's collectives either block the gemm that
  // needs them (tp) or run beside a column-parallel linear's backward: the
  // input's re-gather beside its input-gradient gemm (beside_dgrad), the
  // input gradient's reduction beside its weight-gradient gemm
  // (beside_wgrad).
  double tp = 0, tp_forward = 0, tp_beside_dgrad = 0, tp_beside_wgrad = 0, dgrad_cover = 0, wgrad_cover = 0;
  double cp = 0, cp_forward = 0, ep = 0, ep_forward = 0;
  double compute() const { return gemm + attention + memory; }
};

class Costing {
 public:
  Costing(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& g) : m_(m), c_(c), t_(t), g_(g) {
    tokens_ = static_cast<double>(t.micro_batch) * m.seq / g.cp;  // rows of every gemm: [b s/cp, .]
    norm_tokens_ = g.sp ? tokens_ / g.tp : tokens_;
    linear_peak_ = t.precision == Precision::fp8 && c.fp8_peak_tflops > 0 ? c.fp8_peak_tflops : c.peak_tflops;
    linear_efficiency_ = t.precision == Precision::fp8 ? kFp8EfficiencyRatio : 1.0;
  }

  // x: [M, K] times w: [K, N], forward, input gradient [M, K] = dy [M, N] w^T
  // and weight gradient [K, N] = x^T dy; FP8 casts of x and dy and their
  // transposes as memory traffic. A column-parallel linear's backward gemms
  // are what its asynchronous TP collectives hide behind.
  void linear(LayerTime& l, double rows, double n, double k, double count = 1, bool fp8_capable = true,
              bool column_parallel = false) const {
    const bool fp8 = fp8_capable && t_.precision == Precision::fp8;
    const double forward = gemm(rows, n, k, fp8), dgrad = gemm(rows, k, n, fp8), wgrad = gemm(k, n, rows, fp8);
    l.gemm_forward += count * forward;
    l.gemm += count * (forward + dgrad + wgrad);
    if (column_parallel) l.dgrad_cover += count * dgrad, l.wgrad_cover += count * wgrad;
    if (fp8) {
      const double cast_bytes = count * (rows * k + rows * n) * (kActivationBytes + 1 + 1);
      l.memory += cast_bytes / bandwidth();
      l.memory_forward += count * rows * k * (kActivationBytes + 1) / bandwidth();
    }
  }

  LayerTime layer(bool moe) const {
    LayerTime l;
    const double h = m_.hidden, tp = g_.tp;
    const double kv_split = std::min<double>(tp, static_cast<double>(m_.kv()));  // KV heads repeat beyond their count
    const double q = static_cast<double>(m_.heads) * m_.dhead(), o = static_cast<double>(m_.heads) * m_.dv();
    const double kv = static_cast<double>(m_.kv()) * (m_.dhead() + m_.dv());
    // qkv: [b s/cp, h] -> [b s/cp, (q + kv) / tp] (MLA: its projections' width)
    const double qkv_width =
        m_.attention_params_override > 0 ? (m_.attention_params_override - o * h) / h / tp : q / tp + kv / kv_split;
    linear(l, tokens_, qkv_width, h, 1, true, true);
    linear(l, tokens_, h, o / tp);  // output projection
    // Attention core: per head 2 s_q s_k (d + dv) forward, half of it causal.
    const double core = 2.0 * tokens_ * m_.seq * (m_.heads / tp) * (m_.dhead() + m_.dv()) * (m_.causal ? 0.5 : 1.0);
    // Each kernel runs over one rank's keys: a CP ring step sees seq / cp.
    // Under causal CP's load-balanced ring only the diagonal step's kernel
    // is masked, 1 / cp of the core's FLOPs; the other steps' pieces (half
    // the queries on every key, or every query on half the keys) are whole
    // rectangles and run at the unmasked rate.
    const AttentionRate rate = attention_rate(static_cast<double>(m_.seq) / g_.cp);
    const double masked = m_.causal ? 1.0 / g_.cp : 0.0;
    auto seconds_per_flop = [&](double masked_rate, double whole_rate) {
      return (masked / masked_rate + (1 - masked) / whole_rate) * kAttentionRatePeak / (c_.peak_tflops * 1e12);
    };
    l.attention_forward = core * seconds_per_flop(rate.forward_causal, rate.forward);
    l.attention = l.attention_forward + 2.5 * core * seconds_per_flop(rate.backward_causal, rate.backward);
    if (t_.attention == AttentionKernel::unfused) {
      // Batched gemms over the whole [s, s] (the causal mask applied after),
      // forward and twice that backward, and the scores through memory.
      const double scores = tokens_ * m_.seq * (m_.heads / tp);
      const double gemms = 2.0 * scores * (m_.dhead() + m_.dv()) / (c_.peak_tflops * 1e12 * c_.gemm_efficiency);
      l.attention_forward = gemms + scores * kUnfusedScoreBytes / bandwidth();
      l.attention = 3 * l.attention_forward;
    }
    // Two norms with their residual adds: 5 passes of h per token each.
    double forward_bytes = 10 * norm_tokens_ * h * kActivationBytes;
    const double gates = m_.swiglu ? 2 : 1;
    // The activation's forward bytes per element of an MLP's inner width.
    const double activation_bytes = (gates + 1) * kActivationBytes + (m_.squared_relu ? kSquaredReluExtraBytes : 0);
    if (!moe) {
      linear(l, tokens_, gates * m_.ffn / tp, h, 1, true, true);
      linear(l, tokens_, h, m_.ffn / tp);
      forward_bytes += tokens_ * m_.ffn / tp * activation_bytes;
    } else {
      // Rows this rank's experts run: its tokens' topk choices (split over
      // TP under SP, whole for an expert-TP group), over its E / ep experts.
      const double rows = tokens_ * m_.topk * g_.etp / tp, local_experts = static_cast<double>(m_.experts) / g_.ep;
      const double width = static_cast<double>(m_.moe_ffn) / g_.etp;
      linear(l, norm_tokens_, static_cast<double>(m_.experts), h);  // router
      linear(l, rows / local_experts, gates * width, h, local_experts);
      linear(l, rows / local_experts, h, width, local_experts);
      if (m_.shared_experts > 0) {
        linear(l, tokens_, gates * m_.shared_experts * m_.moe_ffn / tp, h, 1, true, true);
        linear(l, tokens_, h, static_cast<double>(m_.shared_experts) * m_.moe_ffn / tp);
        forward_bytes += tokens_ * m_.shared_experts * m_.moe_ffn / tp * activation_bytes;
      }
      // The activation over every routed row; permute and unpermute read and write each row.
      forward_bytes += rows * width * activation_bytes + 4 * rows * h * kActivationBytes;
      // Dispatch and combine, forward and backward: each rank's rows, the
      // share bound for other nodes over the network, the rest over NVLink
      // at the same time.
      l.ep_forward = 2 * all_to_all_seconds(rows * h * kActivationBytes);
      l.ep = 2 * l.ep_forward;
    }
    l.memory_forward += forward_bytes / bandwidth();
    l.memory += 3 * forward_bytes / bandwidth();  // the backward reads about twice what the forward does
    // TP around attention and each TP-split MLP (in an MoE layer without
    // expert TP, the shared experts', which Megatron splits over TP), in units of one all-gather or
    // reduce-scatter of [b s/cp, h] (an all-reduce is two), as Megatron's
    // column- and row-parallel linears run them (tensor_parallel/layers.py):
    //   forward     SP: all-gather before the column-parallel linear,
    //               reduce-scatter after the row-parallel one; without SP an
    //               all-reduce after the row-parallel one
    //   backward    SP: the row-parallel linear's output gradient
    //               all-gathered (blocking); the column-parallel input
    //               re-gathered beside its input-gradient gemm and the input
    //               gradient reduce-scattered beside its weight-gradient gemm;
    //               without SP that input gradient all-reduced beside the
    //               weight-gradient gemm
    const double blocks = moe && g_.etp == 1 && m_.shared_experts == 0 ? 1 : 2;
    const double unit = ring_seconds(tokens_ * h * kActivationBytes, g_.tp, (tp - 1) / tp, link(g_.tp), alpha());
    l.tp_forward = blocks * 2 * unit;
    l.tp = l.tp_forward + (g_.sp ? blocks * unit : 0);
    l.tp_beside_dgrad = g_.sp ? blocks * unit : 0;
    l.tp_beside_wgrad = blocks * (g_.sp ? 1 : 2) * unit;
    // CP ring: K and V of this rank's chunk pass cp - 1 times forward, with
    // K, V and dK, dV backward.
    const double kv_bytes = tokens_ * kv / kv_split * kActivationBytes;
    l.cp_forward = (g_.cp - 1) * (kv_bytes / (link(g_.tp * g_.cp) * 1e9) + alpha());
    l.cp = 3 * l.cp_forward;
    return l;
  }

  // The LM head and cross-entropy of the last stage, one microbatch; the
  // head stays bf16 under FP8 (Transformer Engine's FP8 covers the layers).
  // An MTP depth runs it again after its projection of [b s/cp, 2h] to h.
  LayerTime head(bool mtp) const {
    LayerTime l;
    if (mtp) linear(l, tokens_, static_cast<double>(m_.hidden) / g_.tp, 2.0 * m_.hidden, 1, false);
    linear(l, tokens_, static_cast<double>(m_.vocab) / g_.tp, m_.hidden, 1, false);
    const double bytes =
        t_.cross_entropy == CrossEntropy::unfused ? kUnfusedCrossEntropyBytes : kFusedCrossEntropyBytes;
    l.memory += tokens_ * m_.vocab / g_.tp * bytes / bandwidth();
    return l;
  }

  // An all-to-all of `bytes` per rank over the EP group, whose members sit
  // etp ranks apart.
  double all_to_all_seconds(double bytes) const {
    if (g_.ep <= 1) return 0;
    const double per_node = std::clamp<double>(static_cast<double>(c_.gpus_per_node) / g_.etp, 1, g_.ep);
    const double remote = (g_.ep - per_node) / g_.ep, local = (per_node - 1) / g_.ep;
    return std::max(remote * bytes / (c_.network_GBps * 1e9), local * bytes / (c_.nvlink_GBps * 1e9)) +
           (g_.ep - 1) * alpha();
  }

  double bandwidth() const { return c_.hbm_GBps * 1e9; }
  double alpha() const { return c_.latency_us * 1e-6; }
  double link(int64_t span) const { return span <= c_.gpus_per_node ? c_.nvlink_GBps : c_.network_GBps; }
  // The bus bandwidth of a collective over n ranks `stride` apart. Across
  // nodes a ring crosses each node boundary once per channel, and NCCL runs
  // a channel per NIC (rail), so the group's k ranks on a node move its bytes
  // over k NICs at once, up to NVLink's rate inside the node (8-GPU H100
  // nodes with a 400 Gb/s NIC per GPU: 400-450 GB/s all_reduce busbw in
  // nccl-tests, saturncloud.io/blog/crusoe-nccl-cluster-validation).
  double collective_GBps(int64_t stride, int64_t n) const {
    if (stride * n <= c_.gpus_per_node) return c_.nvlink_GBps;
    const double per_node = std::clamp<double>(static_cast<double>(c_.gpus_per_node) / stride, 1, n);
    return std::min(c_.nvlink_GBps, per_node * c_.network_GBps);
  }
  double tokens() const { return tokens_; }

 private:
  double gemm(double rows, double n, double k, bool fp8) const {
    return fp8 ? gemm_seconds(c_, linear_peak_ * linear_efficiency_, rows, n, k)
               : gemm_seconds(c_, c_.peak_tflops, rows, n, k);
  }

  const ModelSpec& m_;
  const ClusterSpec& c_;
  const TrainSpec& t_;
  const Config& g_;
  double tokens_ = 0, norm_tokens_ = 0, linear_peak_ = 0, linear_efficiency_ = 1;
};

}  // namespace

double gemm_seconds(const ClusterSpec& c, double peak_tflops, double m, double n, double k) {
  double waves = 1;
  if (c.sms > 0) {
    const double tiles = std::ceil(m / 128) * std::ceil(n / 256);
    waves = tiles / (std::ceil(tiles / c.sms) * c.sms);
  }
  return 2 * m * n * k / (peak_tflops * 1e12 * c.gemm_efficiency * waves) + c.gemm_latency_us * 1e-6;
}

StepTime step_time(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& g) {
  const Costing cost(m, c, t, g);
  const HeldParams held = held_params(m, g);
  const LayerTime dense = cost.layer(false), moe = m.moe_layers > 0 ? cost.layer(true) : LayerTime{};
  const LayerTime head = cost.head(false), mtp_head = cost.head(true);
  const double full = g.recompute == Recompute::full ? 1 : 0, selective = g.recompute == Recompute::selective ? 1 : 0;
  const double forward_again = full + selective;
  const Overlap& o = t.overlap;

  // One microbatch through a stage of `layers` layers (and the LM head:
  // the last stage runs it once and again for each MTP depth).
  auto stage = [&](double layers, bool with_head) {
    StepTime mb;
    auto add = [&](const LayerTime& l, double count) {
      mb.gemm += count * (l.gemm + full * l.gemm_forward);
      mb.attention += count * (l.attention + forward_again * l.attention_forward);
      mb.memory_bound += count * (l.memory + full * l.memory_forward);
      // Full recompute runs the forward's collectives again. TP overlap
      // (userbuffers) hides all of TP behind the gemms; without it the
      // asynchronous ones still hide behind their own backward gemms.
      const double tp = l.tp + full * l.tp_forward, tp_async = l.tp_beside_dgrad + l.tp_beside_wgrad;
      const double async_exposed =
          std::max(0.0, l.tp_beside_dgrad - l.dgrad_cover) + std::max(0.0, l.tp_beside_wgrad - l.wgrad_cover);
      mb.tp += count * ((1 - o.tp) * (tp + async_exposed) +
                        o.tp * std::max(0.0, tp + tp_async - l.gemm - full * l.gemm_forward));
      mb.cp += count * exposed(l.cp + full * l.cp_forward, o.cp, l.attention + forward_again * l.attention_forward);
      const double recomputed = full * (l.gemm_forward + l.memory_forward) + forward_again * l.attention_forward;
      mb.ep += count * exposed(l.ep + full * l.ep_forward, o.ep, l.compute() + recomputed);
    };
    const double moe_share = static_cast<double>(held.moe_layers) / held.layers;
    add(dense, layers * (1 - moe_share));
    add(moe, layers * moe_share);
    if (with_head) add(head, 1), add(mtp_head, static_cast<double>(m.mtp_layers));
    mb.overhead = layers * c.layer_overhead_us * 1e-6 * (1 + full / 3);
    return mb;
  };
  // The heaviest stage: a first one of ceil(L / pp) layers, or the last,
  // which holds the rest, the MTP depths and the head.
  const int64_t first_layers = (m.layers + g.pp - 1) / g.pp;
  const double last_layers =
      std::max<double>(0, static_cast<double>(m.layers - (g.pp - 1) * first_layers)) + m.mtp_layers;
  StepTime mb = stage(last_layers, true);
  if (g.pp > 1) {
    const StepTime first = stage(static_cast<double>(first_layers), false);
    if (first.compute() + first.tp + first.cp + first.ep > mb.compute() + mb.tp + mb.cp + mb.ep) mb = first;
  }
  const double layers = static_cast<double>(held.layers);

  const double microbatches = static_cast<double>(t.global_batch) / (static_cast<double>(g.dp) * t.micro_batch);
  // One microbatch through one model chunk of the stage, forward and backward.
  const double chunk_forward = mb.compute() / (3.0 * g.vpp), chunk_backward = 2 * chunk_forward;
  const double mb_seconds = mb.compute() + mb.tp + mb.cp + mb.ep;
  StepTime s;
  s.gemm = microbatches * mb.gemm, s.attention = microbatches * mb.attention;
  s.memory_bound = microbatches * mb.memory_bound, s.overhead = microbatches * mb.overhead;
  s.tp = microbatches * mb.tp, s.cp = microbatches * mb.cp, s.ep = microbatches * mb.ep;
  s.bubble = (g.pp - 1.0) / g.vpp * mb_seconds;

  // Adam over this rank's shard (the distributed optimizer's) of the params.
  const int dp_cp = g.dp * g.cp, edp = g.tp * g.cp * g.dp / (g.etp * g.ep);
  const double updated = g.distributed_optimizer ? held.dense / dp_cp + held.expert / edp : held.dense + held.expert;
  s.optimizer = updated * kAdamBytes / cost.bandwidth();

  // DP over dp x cp (experts over their EDP group): the gradients
  // reduce-scattered in their wire type (TrainSpec::grad_reduce) and the
  // bf16 parameters all-gathered, or without the distributed optimizer the
  // gradients all-reduced (a reduce-scatter and an all-gather, both in the
  // wire type); the last bucket at least stays exposed.
  const double grad_bytes = t.grad_reduce == GradReduce::f32 ? 4 : 2;
  const double sync_bytes = g.distributed_optimizer ? grad_bytes : 2 * grad_bytes;
  const double gather_bytes = g.distributed_optimizer ? kParamBytes : 0, per_param = sync_bytes + gather_bytes;
  const double reduce = ring_seconds(per_param * held.dense, dp_cp, (dp_cp - 1.0) / dp_cp,
                                     cost.collective_GBps(g.tp, dp_cp), cost.alpha()) +
                        ring_seconds(per_param * held.expert, edp, (edp - 1.0) / edp,
                                     cost.collective_GBps(static_cast<int64_t>(g.etp) * g.ep, edp), cost.alpha());
  if (g.vpp == 1 || g.pp == 1) {
    // Bucket by bucket behind the last microbatch's backward and the
    // first one's forward.
    s.dp = exposed(reduce, o.dp, mb.compute());
  } else {
    // Interleaved, Megatron reduces each model chunk's gradients whole once
    // its last backward is done (align_grad_reduce, on by default;
    // core/pipeline_parallel/schedules.py), while the rank runs pp more
    // backward chunks for each chunk still to finish: the chunks' reduces
    // queue on the network behind the cooldown, the last chunk's exposed.
    // The next step's all-gather of chunk 0 waits at the first forward; the
    // other chunks' are issued ahead of their forwards.
    const double sync = reduce * sync_bytes / per_param, gather = reduce - sync;
    double queue = 0;
    for (int j = 0; j < g.vpp; ++j) queue = std::max(queue, (j + 1.0) * sync / g.vpp - j * g.pp * chunk_backward);
    s.dp = (1 - o.dp) * reduce + o.dp * (queue + std::max(0.0, gather / g.vpp - chunk_forward));
  }
  s.dp = std::max(s.dp, reduce / std::max(1.0, layers));

  // PP: an activation forward and a gradient backward per model chunk on
  // the schedule's critical path, (microbatches x vpp + pp - 1) of each;
  // each TP rank sends its 1/tp (SP, or Megatron's scatter-gather of the
  // replicated activation). Stages sit tp x cp x dp ranks apart, on NVLink
  // only where the whole pipeline fits in a node. Under the interleaved
  // schedule Overlap::pp of each message hides behind the next chunk's
  // forward.
  if (g.pp > 1) {
    const double p2p_bytes = cost.tokens() / g.tp * m.hidden * kActivationBytes;
    const double message =
        p2p_bytes / (cost.link(static_cast<int64_t>(g.tp) * g.cp * g.dp * g.pp) * 1e9) + cost.alpha();
    s.pp = 2.0 * (microbatches * g.vpp + g.pp - 1) * exposed(message, g.vpp > 1 ? o.pp : 0, chunk_forward);
  }
  return s;
}

}  // namespace sextant::plan
