// The calibrated step model's arithmetic (step_cost.cc): what one action
// (forward F, input gradient I, weight gradient W) of one stage and
// microbatch costs on one rank, part by part, from a Calibration.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "kernels/attention/cp_variants.h"
#include "kernels/planner/calibration.h"
#include "kernels/planner/planner.h"
#include "kernels/planner/step_inputs.h"

namespace sextant::plan::step_costing {

// One rank's share of one microbatch: tokens and widths.
struct Dims {
  double mb = 0;                                   // sequences in the microbatch
  double S = 0;                                    // sequence rows per rank (seq / cp)
  double T = 0;                                    // tokens per rank in the projections: mb x S
  double Tsp = 0;                                  // tokens in LayerNorm and residual: T / tp under SP
  double h = 0, q = 0, kvd = 0, d = 0, heads = 0;  // heads: per TP rank
  double kvdv = 0, o = 0;                          // v and attention-output widths (MLA: v head dim != d)
  double qkv = 0;                                  // QKV output width per TP rank
  double f = 0, fw = 0;                            // dense FFN width per TP rank (fw: first matrix, doubled by SwiGLU)
  double Tm = 0;                                   // tokens the MoE layer routes on this rank
  double local_experts = 0, expert_tokens = 0, mf = 0, mfw = 0;
};

// Where the time of one action (F, I or W of a stage and microbatch) goes.
struct Part {
  double gemm = 0, attention = 0, elementwise = 0, tp = 0, cp = 0, ep = 0;
  double syncs = 0;  // blocking synchronisations, each weighted by its group size (Costing::sync_weight)
  double compute() const { return gemm + attention + elementwise; }
  Part& operator+=(const Part& o) {
    gemm += o.gemm, attention += o.attention, elementwise += o.elementwise, tp += o.tp, cp += o.cp, ep += o.ep;
    syncs += o.syncs;
    return *this;
  }
  Part scaled(double s) const {
    Part p = *this;
    p.gemm *= s, p.attention *= s, p.elementwise *= s, p.tp *= s, p.cp *= s, p.ep *= s, p.syncs *= s;
    return p;
  }
};
struct Action3 {
  Part f, i, w;
  Action3& operator+=(const Action3& o) {
    f += o.f, i += o.i, w += o.w;
    return *this;
  }
  Action3 scaled(double s) const { return {f.scaled(s), i.scaled(s), w.scaled(s)}; }
};

class Costing {
 public:
  Costing(const ModelSpec& m, const Config& c, const TrainSpec& t, const StepShape& shape, const Calibration& cal)
      : m_(m), c_(c), shape_(shape), cal_(cal) {
    d_.mb = static_cast<double>(t.micro_batch);
    d_.S = static_cast<double>(m.seq) / c.cp;
    d_.T = d_.mb * d_.S;
    d_.Tsp = c.sp ? d_.T / c.tp : d_.T;
    d_.h = static_cast<double>(m.hidden);
    d_.d = static_cast<double>(m.dhead());
    d_.q = static_cast<double>(m.heads) * d_.d;
    d_.kvd = static_cast<double>(m.kv()) * d_.d;
    d_.kvdv = static_cast<double>(m.kv()) * m.dv();
    d_.o = static_cast<double>(m.heads) * m.dv();
    d_.heads = static_cast<double>(m.heads) / c.tp;
    d_.qkv = (d_.q + d_.kvd + d_.kvdv) / c.tp;
    d_.f = static_cast<double>(m.ffn) / c.tp;
    d_.fw = m.swiglu ? 2 * d_.f : d_.f;
    d_.Tm = d_.Tsp;
    if (m.experts > 0) {
      const int etp = std::max(1, c.etp);
      d_.local_experts = static_cast<double>(m.experts) / c.ep;
      d_.expert_tokens = d_.Tm * m.topk * c.ep * etp / m.experts;
      d_.mf = static_cast<double>(m.moe_ffn) / etp;
      d_.mfw = m.swiglu ? 2 * d_.mf : d_.mf;
    }
  }

  // Records what is asked of the calibration instead of only reading it.
  void record_into(CostQueries* queries) { queries_ = queries; }

  double gemm(double m, double n, double k, bool ta, bool tb) const {
    if (queries_ && m > 0 && n > 0 && k > 0)
      queries_->gemms.insert({std::llround(m), std::llround(n), std::llround(k), ta, tb});
    return cal_.gemm.seconds(m, n, k, ta, tb);
  }

  // One linear layer y = x W, x [rows, in], W [in, out]: F = x W, I: dx =
  // dy W^T, W: dW = x^T dy (the transposes split_linear.cc uses).
  Action3 linear(double rows, double in, double out) const {
    Action3 a;
    a.f.gemm = gemm(rows, out, in, false, false);
    a.i.gemm = gemm(rows, in, out, false, true);
    a.w.gemm = gemm(in, out, rows, true, false);  // accumulating into the gradient (beta 1)
    return a;
  }

  double elementwise(double elements, double calls) const {
    if (elements <= 0) return 0;
    if (queries_) queries_->elementwise.insert(std::llround(elements / std::max(1.0, calls)));
    return calls * cal_.elementwise.overhead_s +
           elements * shape_.bytes_per_element / per_second(cal_.elementwise.per_s);
  }

  // `calls` collectives moving `elements` in all: their link time, and
  // their synchronisations counted into `part`: one per call unless
  // `syncs` says otherwise (calls back to back meet only at the first).
  double collective(Part& part, const std::string& op, int n, bool inter, double elements, double calls = 1,
                    std::optional<double> syncs = std::nullopt) const {
    if (n <= 1 || elements <= 0) return 0;
    if (queries_) queries_->group_sizes.insert(n);
    part.syncs += syncs.value_or(calls) * sync_weight(n);
    return calls * cal_.collective_seconds(op, inter, n, elements * shape_.bytes_per_element / calls);
  }

  // A synchronisation of n ranks, in units of the probe's wait: as
  // measured on groups of n, else the last of n - 1 partners,
  // H(n-1) / H(sync_ranks - 1) (H the harmonic number).
  double sync_weight(int n) const {
    auto harmonic = [](int k) {
      double h = 0;
      for (int i = 1; i <= k; ++i) h += 1.0 / i;
      return h;
    };
    if (n <= 1) return 0;
    if (auto it = shape_.sync_group_s.find(n); it != shape_.sync_group_s.end() && shape_.sync_s > 0)
      return it->second / shape_.sync_s;
    return harmonic(n - 1) / harmonic(std::max(1, shape_.sync_ranks - 1));
  }

  // Whether a group of `extent` consecutive ranks (its own size times the
  // sizes of the faster dimensions, order tp-cp-ep-dp-pp) spans nodes.
  bool spans(int64_t extent) const { return shape_.ranks_per_node > 0 && extent > shape_.ranks_per_node; }

  // The attention sublayer: LN, QKV, core attention over CP, output projection, residual.
  Action3 attention_sublayer() const {
    Action3 a = linear(d_.T, d_.h, d_.qkv);
    a += linear(d_.T, d_.o / c_.tp, d_.h);
    const double flops_fwd = 2 * d_.mb * d_.heads * (d_.d + m_.dv()) * d_.S * m_.seq * (m_.causal ? 0.5 : 1.0);
    const double calls = c_.cp;  // the ring calls the block kernel once per step
    if (queries_)
      queries_->attention.insert(
          {std::llround(d_.mb), std::llround(d_.S), std::llround(d_.heads), std::llround(d_.d), m_.causal ? 1 : 0});
    const double attention = cal_.attention.seconds(3.5 * flops_fwd) + (calls - 1) * cal_.attention.overhead_s;
    a.f.attention = attention / 3.5;
    a.i.attention = attention * 2.5 / 3.5;
    // LN (2 passes fwd, 4 bwd), residual (3 and 3), bias (qkv, out), QKV split and merge.
    a.f.elementwise += elementwise(5 * d_.Tsp * d_.h + 4 * d_.T * d_.qkv, 5);
    a.i.elementwise += elementwise(8 * d_.Tsp * d_.h + 3 * d_.T * d_.qkv, 5);
    tp_sublayer(a);
    cp_attention(a);
    return a;
  }

  // TP communication of one sublayer: SP all-gather in and reduce-scatter
  // out (and their mirror in backward, plus the regather for dW), or the
  // all-reduce after the row-parallel output (and of dx in backward).
  void tp_sublayer(Action3& a) const {
    if (c_.tp <= 1) return;
    const bool inter = spans(c_.tp);
    const double full = d_.T * d_.h;
    if (c_.sp) {
      a.f.tp +=
          collective(a.f, "all_gather", c_.tp, inter, full) + collective(a.f, "reduce_scatter", c_.tp, inter, full);
      a.i.tp +=
          collective(a.i, "all_gather", c_.tp, inter, full) + collective(a.i, "reduce_scatter", c_.tp, inter, full);
      // Each moves the sequence blocks between [b, s, h] and the
      // collective's [tp, b, s/tp, h]: one copy of the full activation
      // (tensor_parallel/regions.cc), read and written.
      a.f.elementwise += elementwise(2 * 2 * full, 2);
      a.i.elementwise += elementwise(2 * 2 * full, 2);
      if (shape_.regather) {
        a.w.tp += collective(a.w, "all_gather", c_.tp, inter, full);
        a.w.elementwise += elementwise(2 * full, 1);
      }
    } else {
      a.f.tp += collective(a.f, "all_reduce", c_.tp, inter, full);
      a.i.tp += collective(a.i, "all_reduce", c_.tp, inter, full);
    }
  }

  // Core attention's exchange over CP (cp_attention.h variants).
  void cp_attention(Action3& a) const {
    if (c_.cp <= 1) return;
    const bool inter = spans(static_cast<int64_t>(c_.tp) * c_.cp);
    const double kv = d_.mb * d_.S * (d_.kvd + d_.kvdv) / c_.tp;  // K and V of this rank's rows
    const double qo = d_.mb * d_.S * d_.q / c_.tp;
    auto ring = [&](int n, double fraction) {
      // n - 1 steps; each sends K, V forward and K, V, dK, dV backward, and
      // one more hop takes dK, dV home (ring.cc).
      const LinkModel l = cal_.link("sendrecv", inter, n);
      if (queries_ && n > 1) queries_->group_sizes.insert(n);
      a.f.cp += (n - 1) * l.seconds(kv * fraction * shape_.bytes_per_element);
      a.i.cp += (n - 1) * l.seconds(2 * kv * fraction * shape_.bytes_per_element) +
                l.seconds(kv * fraction * shape_.bytes_per_element);
      a.f.syncs += (n - 1) * sync_weight(2);
      a.i.syncs += n * sync_weight(2);
      // Each block's partial output merges into the running one by its LSE
      // (reads both, writes one); in the backward each step zeroes its dK,
      // dV and adds the ones passed on to it.
      a.f.elementwise += elementwise(n * 3 * qo * fraction, n);
      a.i.elementwise += elementwise(n * kv * fraction + (n - 1) * 3 * kv * fraction, 2 * n);
    };
    auto ulysses = [&](int n) {  // q, k, v in and out back; the gradients the same way
      a.f.cp += collective(a.f, "all_to_all", n, inter, qo + kv, 3) + collective(a.f, "all_to_all", n, inter, qo);
      a.i.cp += collective(a.i, "all_to_all", n, inter, qo) + collective(a.i, "all_to_all", n, inter, qo + kv, 3);
    };
    // The variant's stages (kernels/attention/cp_variants.h).
    const cp::VariantInfo& v = cp::variant_info(shape_.cp_comm);
    if (v.split()) {  // Ulysses inside groups of a2a_size, a ring across them
      const int a2a = std::max(1, std::min(shape_.a2a_size, c_.cp));
      ulysses(a2a);
      ring(c_.cp / a2a, 1.0 / a2a);
    } else if (v.a2a) {
      ulysses(c_.cp);
    } else if (v.kv == cp::KvExchange::allgather) {
      a.f.cp += collective(a.f, "all_gather", c_.cp, inter, kv * c_.cp, 2);
      a.i.cp += collective(a.i, "all_gather", c_.cp, inter, kv * c_.cp, 2) +
                collective(a.i, "reduce_scatter", c_.cp, inter, kv * c_.cp, 2);
    } else {
      ring(c_.cp, 1.0);
    }
  }

  Action3 dense_mlp() const {
    Action3 a = linear(d_.T, d_.h, d_.fw);
    a += linear(d_.T, d_.f, d_.h);
    // LN, residual, biases, GELU (2 passes forward, 3 backward).
    a.f.elementwise += elementwise(5 * d_.Tsp * d_.h + 4 * d_.T * d_.fw, 5);
    a.i.elementwise += elementwise(8 * d_.Tsp * d_.h + 5 * d_.T * d_.fw, 5);
    tp_sublayer(a);
    return a;
  }

  Action3 moe_mlp() const {
    Action3 a = linear(d_.Tm, d_.h, static_cast<double>(m_.experts));  // router
    for (int e = 0; e < static_cast<int>(std::ceil(d_.local_experts)); ++e) {
      a += linear(d_.expert_tokens, d_.h, d_.mfw);
      a += linear(d_.expert_tokens, d_.mf, d_.h);
    }
    if (m_.shared_experts > 0) {
      a += linear(d_.Tm, d_.h, m_.shared_experts * (m_.swiglu ? 2.0 : 1.0) * m_.moe_ffn / c_.tp);
      a += linear(d_.Tm, m_.shared_experts * static_cast<double>(m_.moe_ffn) / c_.tp, d_.h);
    }
    // The expert backward is not split into I and W (moe_layer.h): W goes with I.
    a.i += a.w;
    a.w = Part{};
    const double routed = d_.Tm * m_.topk * d_.h;  // token copies sent to experts
    // LN, residual, GELU on the expert rows; the router's softmax and top-k,
    // the permutes in and the combine out as measured per token, else as bytes.
    const double expert_rows = d_.expert_tokens * d_.local_experts * d_.mfw;
    if (queries_) queries_->moe_tokens.insert(std::llround(d_.Tm));
    auto measured = [](const RateModel& r) { return r.overhead_s > 0 || r.per_s > 0; };
    const bool routing_measured = measured(cal_.moe_forward) && measured(cal_.moe_backward);
    const double routing = routing_measured ? 0 : 3 * d_.Tm * m_.experts + 5 * routed;
    a.f.elementwise += elementwise(5 * d_.Tsp * d_.h + routing + 2 * expert_rows, 8);
    a.i.elementwise += elementwise(8 * d_.Tsp * d_.h + routing + 3 * expert_rows, 8);
    if (routing_measured) {
      a.f.elementwise += cal_.moe_forward.seconds(d_.Tm);
      a.i.elementwise += cal_.moe_backward.seconds(d_.Tm);
    }
    moe_exchange(a, routed);
    return a;
  }

  // The dispatcher's exchanges (moe/alltoall_dispatcher.cc), forward and
  // the same backward: per-expert counts over EP and ETP, then the rows.
  // With EP alone, one all-to-all-v per local expert each way, straight
  // into its tensor; with ETP, the EP layout all-gathered to every ETP
  // peer and the outputs reduce-scattered back. The ranks meet twice each
  // way, after the router (or the output gradient) and after the experts:
  // the exchanges between run back to back.
  void moe_exchange(Action3& a, double routed) const {
    const int etp = std::max(1, c_.etp), ep = c_.ep;
    const bool inter = spans(static_cast<int64_t>(etp) * ep);
    const double local = std::max(1.0, std::ceil(d_.local_experts));
    if (ep > 1) a.f.ep += collective(a.f, "all_to_all", ep, inter, ep * local, 1, 0);  // counts
    if (etp > 1) a.f.ep += collective(a.f, "all_gather", etp, inter, etp * ep * local, 1, 0);
    for (Part* p : {&a.f, &a.i}) {
      if (ep > 1 && etp == 1)  // dispatch and combine rounds
        p->ep += collective(*p, "all_to_all_v", ep, inter, 2 * routed, 2 * local, 2);
      if (ep > 1 && etp > 1) p->ep += collective(*p, "all_to_all_v", ep, inter, 2 * routed, 2, 2);
      if (etp > 1)
        p->ep += collective(*p, "all_gather", etp, inter, routed * etp, 1, ep > 1 ? 0 : 1) +
                 collective(*p, "reduce_scatter", etp, inter, routed * etp, 1, ep > 1 ? 0 : 1);
    }
  }

  Action3 layer(bool moe) const {
    Action3 a = attention_sublayer();
    a += moe ? moe_mlp() : dense_mlp();
    return a;
  }

  // Embedding lookup (first stage) and final LN, LM head, cross-entropy (last).
  Action3 first_stage_extra() const {
    Action3 a;
    a.f.elementwise = elementwise(2 * d_.Tsp * d_.h, 1);
    a.w.elementwise = elementwise(3 * d_.Tsp * d_.h, 1);
    if (c_.tp > 1) a.f.tp = collective(a.f, c_.sp ? "reduce_scatter" : "all_reduce", c_.tp, spans(c_.tp), d_.T * d_.h);
    return a;
  }
  Action3 last_stage_extra() const {
    const double vocab = static_cast<double>(m_.vocab) / c_.tp;
    Action3 a = linear(d_.T, d_.h, vocab);
    a.f.elementwise += elementwise(2 * d_.Tsp * d_.h + 4 * d_.T * vocab, 3);
    a.i.elementwise += elementwise(4 * d_.Tsp * d_.h + 3 * d_.T * vocab, 2);
    if (c_.tp > 1) {
      const bool inter = spans(c_.tp);
      a.f.tp += collective(a.f, "all_reduce", c_.tp, inter, d_.T, 3);  // max, sum, target logit
      if (c_.sp) {
        a.f.tp += collective(a.f, "all_gather", c_.tp, inter, d_.T * d_.h);
        a.i.tp += collective(a.i, "reduce_scatter", c_.tp, inter, d_.T * d_.h);
        if (shape_.regather) a.w.tp += collective(a.w, "all_gather", c_.tp, inter, d_.T * d_.h);
      }
    }
    return a;
  }

  // One pipeline stage (stage s of stages), one microbatch.
  Action3 stage(int s, int stages) const {
    const double layers = static_cast<double>(m_.layers) / stages;
    const double moe = static_cast<double>(m_.moe_layers) / stages;
    Action3 a = layer(false).scaled(layers - moe);
    if (moe > 0) a += layer(true).scaled(moe);
    if (s == 0) a += first_stage_extra();
    if (s == stages - 1) a += last_stage_extra();
    return a;
  }

  // One boundary message between pipeline neighbours: no synchronisation
  // wait of its own. The sender does not wait for a small message, and a
  // receiver whose sender is late waits in the simulated schedule already.
  double p2p_message() const {
    const double bytes = d_.Tsp * d_.h * shape_.bytes_per_element;
    const LinkModel l = cal_.link("sendrecv", spans(static_cast<int64_t>(c_.tp) * c_.cp * c_.dp * c_.pp), 2);
    const double latency = cal_.p2p_latency_s > 0 ? cal_.p2p_latency_s : l.latency_s;
    return latency + bytes / per_second(l.busbw_Bps);
  }

  // Gradient reduction over the data-parallel groups and Adam, per step.
  struct AfterBackward {
    double reduction = 0, optimizer = 0;  // seconds per step
  };
  AfterBackward data_parallel_and_optimizer(double core_share = 1) const {
    AfterBackward out;
    const double stages_per_rank = c_.pp;
    const double layers = static_cast<double>(m_.layers) / stages_per_rank;
    const double moe_layers = static_cast<double>(m_.moe_layers) / stages_per_rank;
    const double attention = m_.attention_params() / c_.tp;
    const double dense_mlp = m_.mlp_params(m_.ffn) / c_.tp;
    const double embedding =
        static_cast<double>(m_.vocab) * m_.hidden / c_.tp * (c_.pp == 1 && !m_.tied_embeddings ? 2 : 1);
    const double dense = layers * attention + (layers - moe_layers) * dense_mlp + embedding +
                         moe_layers * m_.shared_experts * m_.mlp_params(m_.moe_ffn) / c_.tp;
    const int etp = std::max(1, c_.etp);
    const double experts = moe_layers * (static_cast<double>(m_.experts) / c_.ep * m_.mlp_params(m_.moe_ffn) / etp +
                                         static_cast<double>(m_.hidden) * m_.experts);
    const int dpcp = c_.dp * c_.cp;
    const int edp = c_.tp * c_.cp * c_.dp / (etp * c_.ep);
    const double buckets = std::max(1.0, layers + 1);  // one per layer, and the embedding / head
    const bool dp_inter = spans(static_cast<int64_t>(c_.tp) * c_.cp * c_.dp);
    // After the backward the ranks meet once, at the first bucket, and then
    // run the buckets back to back: one wait, of the largest group.
    Part syncs;
    auto reduce = [&](int n, double params, double calls) {
      if (n <= 1) return 0.0;
      if (!shape_.zero) return collective(syncs, "all_reduce", n, dp_inter, params, calls);
      return collective(syncs, "reduce_scatter", n, dp_inter, params, calls) +
             collective(syncs, "all_gather", n, dp_inter, params, calls);
    };
    out.reduction = reduce(dpcp, dense, buckets) + reduce(edp, experts, std::max(1.0, moe_layers));
    if (syncs.syncs > 0) out.reduction += shape_.sync_s * sync_weight(std::max(dpcp, edp));
    // Adam reads the parameter, gradient and both moments and writes three
    // of them; the gradients are zeroed for the next step.
    const double updated = shape_.zero ? dense / std::max(1, dpcp) + experts / std::max(1, edp) : dense + experts;
    out.optimizer = elementwise(8 * updated + (dense + experts), 4 * buckets) * core_share;
    // Each bucket's gradients are packed into one flat buffer for the
    // collective and unpacked after it (data_parallel/optimizer.cc), on one
    // rank too: four passes over every gradient. With ZeRO the values are
    // packed and unpacked around Adam instead of the unpack; costed the same.
    out.reduction += elementwise(4 * (dense + experts), 2 * buckets) * core_share;
    return out;
  }

  // How much slower compute runs than the calibration's rates say when
  // every rank computes: the measured slowdown, else the oversubscription.
  double core_share() const { return shape_.compute_slowdown > 0 ? shape_.compute_slowdown : oversubscription(); }

  // Threads per core on a node (at least 1).
  double oversubscription() const {
    const int cores = shape_.cores_per_node > 0 ? shape_.cores_per_node : cal_.cores_per_node;
    const int ranks = shape_.ranks_per_node > 0 ? shape_.ranks_per_node : c_.tp * c_.cp * c_.pp * c_.dp;
    return std::max(1.0, static_cast<double>(ranks) * shape_.threads_per_rank / std::max(1, cores));
  }

 private:
  static double per_second(double rate) { return rate > 0 ? rate : std::numeric_limits<double>::infinity(); }

  CostQueries* queries_ = nullptr;
  const ModelSpec& m_;
  Config c_;
  const StepShape& shape_;
  const Calibration& cal_;
  Dims d_;
};

}  // namespace sextant::plan::step_costing
