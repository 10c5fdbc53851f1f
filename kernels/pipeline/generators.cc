#include "kernels/pipeline/generators.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/schedules.h"

namespace sextant::pp {

namespace {

using T = ActionType;

// An empty schedule with `v` stages per rank, placed by `place(stage)`.
template <class Place>
Schedule blank(std::string name, int p, int m, int v, Place place) {
  Schedule s;
  s.name = std::move(name);
  s.ranks = p;
  s.stages = p * v;
  s.microbatches = m;
  s.actions.resize(static_cast<size_t>(p));
  for (int stage = 0; stage < s.stages; ++stage) s.stage_rank.push_back(place(stage));
  return s;
}

Schedule one_stage_per_rank(std::string name, int p, int m) {
  return blank(std::move(name), p, m, 1, [](int stage) { return stage; });
}

}  // namespace

Schedule gpipe(int p, int m) {
  Schedule s = one_stage_per_rank("gpipe", p, m);
  for (int r = 0; r < p; ++r) {
    for (int mb = 0; mb < m; ++mb) s.actions[r].push_back({r, T::F, mb});
    for (int mb = 0; mb < m; ++mb) s.actions[r].push_back({r, T::B, mb});
  }
  return s;
}

Schedule one_f_one_b(int p, int m) {
  Schedule s = one_stage_per_rank("1f1b", p, m);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    const int warmup = std::min(p - r - 1, m);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) list.push_back({r, T::F, next_f++});
    while (next_f < m) {  // steady: one forward, one backward
      list.push_back({r, T::F, next_f++});
      list.push_back({r, T::B, next_b++});
    }
    while (next_b < m) list.push_back({r, T::B, next_b++});
  }
  return s;
}

namespace {

// Megatron's mapping of virtual microbatch k (0 <= k < m*v) on a rank to its
// chunk and microbatch (schedules.py, get_model_chunk_id and
// get_microbatch_id_in_model_chunk): groups of p microbatches per chunk.
int interleaved_chunk(int k, int p, int v, bool forward) {
  int chunk = (k % (p * v)) / p;
  return forward ? chunk : v - 1 - chunk;
}
int interleaved_microbatch(int k, int p, int v) { return (k / (p * v)) * p + k % p; }

}  // namespace

Schedule interleaved_1f1b(int p, int m, int v) {
  if (v == 1) {  // one chunk per rank: interleaving is plain 1F1B
    Schedule s = one_f_one_b(p, m);
    s.name = "interleaved";
    return s;
  }
  Schedule s = blank("interleaved", p, m, v, [p](int stage) { return stage % p; });
  const int total = m * v;
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    auto forward = [&](int k) {
      list.push_back({interleaved_chunk(k, p, v, true) * p + r, T::F, interleaved_microbatch(k, p, v)});
    };
    auto backward = [&](int k) {
      list.push_back({interleaved_chunk(k, p, v, false) * p + r, T::B, interleaved_microbatch(k, p, v)});
    };
    const int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
  }
  return s;
}

Schedule zb_h1(int p, int m) {
  Schedule s = one_stage_per_rank("zb-h1", p, m);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    std::deque<int> pending_w;  // microbatches whose I ran and W did not
    auto input_grad = [&](int mb) {
      list.push_back({r, T::I, mb});
      pending_w.push_back(mb);
    };
    auto weight_grad = [&] {
      list.push_back({r, T::W, pending_w.front()});
      pending_w.pop_front();
    };
    const int warmup = std::min(p - r - 1, m);
    int next_f = 0, next_i = 0;
    while (next_f < warmup) list.push_back({r, T::F, next_f++});
    while (next_f < m) {  // steady: F, I, and the W of r microbatches ago
      list.push_back({r, T::F, next_f++});
      input_grad(next_i++);
      if (static_cast<int>(pending_w.size()) > r) weight_grad();
    }
    while (next_i < m) {  // drain: a W fills the wait for each next gradient
      input_grad(next_i++);
      weight_grad();
    }
    while (!pending_w.empty()) weight_grad();
  }
  return s;
}

namespace {

// The ZB-V order of one rank for n microbatches (see generators.h).
std::vector<Action> zb_v_rank(int p, int r, int n) {
  const int chunk0 = r, chunk1 = 2 * p - 1 - r;  // the two arms of the V
  std::vector<Action> list;
  int f0 = 0, f1 = 0, i0 = 0, i1 = 0, w0 = 0, w1 = 0;
  auto add = [&](int stage, T type, int& counter) { list.push_back({stage, type, counter++}); };
  for (int k = 0; k < 2 * (p - r) - 1; ++k) add(chunk0, T::F, f0);
  for (int k = 0; k < r; ++k) {
    add(chunk1, T::F, f1);
    add(chunk0, T::F, f0);
  }
  for (int k = 0; k < p - r; ++k) {
    add(chunk1, T::F, f1);
    add(chunk1, T::I, i1);
    add(chunk1, T::W, w1);
  }
  while (f1 < f0 || f0 < n) {  // steady
    if (f0 < n) add(chunk0, T::F, f0);
    add(chunk0, T::I, i0);
    add(chunk0, T::W, w0);
    add(chunk1, T::F, f1);
    add(chunk1, T::I, i1);
    add(chunk1, T::W, w1);
  }
  for (int k = 0; k < r; ++k) {  // drain: input gradients first
    add(chunk0, T::I, i0);
    add(chunk1, T::I, i1);
  }
  for (int k = 0; k < p - r; ++k) {
    add(chunk0, T::I, i0);
    add(chunk0, T::W, w0);
  }
  while (w1 < i1) add(chunk1, T::W, w1);
  while (w0 < i0) add(chunk0, T::W, w0);
  return list;
}

}  // namespace

Schedule zb_v(int p, int m) {
  Schedule s = blank("zb-v", p, m, 2, [p](int stage) { return stage < p ? stage : 2 * p - 1 - stage; });
  // The order fills the pipeline with 2p - 1 microbatches; with fewer, build
  // it for 2p - 1 and drop the microbatches that do not exist (as torch does).
  const int n = std::max(m, 2 * p - 1);
  for (int r = 0; r < p; ++r)
    for (const Action& a : zb_v_rank(p, r, n))
      if (a.microbatch < m) s.actions[r].push_back(a);
  return s;
}

namespace {

// DualPipeV's order on one rank (see generators.h). Counters per stage: the
// next microbatch to run forward, backward (B or I) and W.
class DualPipeVRank {
 public:
  DualPipeVRank(int p, int r) : p_(p), r_(r), s0_(r), s1_(2 * p - 1 - r) {}

  std::vector<Action> build(int m) {
    const int p = p_, r = r_;
    for (int k = 0; k < 2 * (p - r - 1); ++k) forward(s0_);
    for (int k = 0; k < r + 1; ++k) forward(s0_), forward(s1_);
    for (int k = 0; k < p - r - 1; ++k) {
      backward(s1_, T::I);
      weight_if_pending();
      forward(s1_);
    }
    // Main step: F0 with B1, then F1 with B0 (DualPipe overlaps each pair;
    // here the pair runs forward first).
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {
      forward(s0_), backward(s1_, T::B);
      forward(s1_), backward(s0_, T::B);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      backward(s1_, T::B);
      forward(s1_), backward(s0_, T::B);
    }
    // Drain: the second half splits backwards to fill the bubble with W.
    bool split = false;
    const int drain = r + 1;
    for (int k = 0; k < drain; ++k) {
      if (k == drain / 2 && r % 2 == 1) split = true;
      backward(s1_, split ? T::I : T::B);
      if (k == drain / 2 && r % 2 == 0) split = true;
      backward(s0_, split ? T::I : T::B);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      weight_if_pending();
      backward(s0_, split ? T::I : T::B);
    }
    while (!pending_w_.empty()) weight_if_pending();
    return list_;
  }

 private:
  void forward(int stage) { list_.push_back({stage, T::F, next_f_[stage]++}); }
  void backward(int stage, T type) {
    list_.push_back({stage, type, next_b_[stage]});
    if (type == T::I) pending_w_.push_back({stage, T::W, next_b_[stage]});
    ++next_b_[stage];
  }
  void weight_if_pending() {
    if (pending_w_.empty()) return;
    list_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }

  int p_, r_, s0_, s1_;
  std::map<int, int> next_f_, next_b_;
  std::deque<Action> pending_w_;
  std::vector<Action> list_;
};

}  // namespace

Schedule dualpipe_v(int p, int m) {
  Schedule s = blank("dualpipe-v", p, m, 2, [p](int stage) { return stage < p ? stage : 2 * p - 1 - stage; });
  for (int r = 0; r < p; ++r) s.actions[r] = DualPipeVRank(p, r).build(m);
  return s;
}

// ---- The table of schedules (schedules.h): each generator with its size
// rules, the chunks the sweeps run and its closed-form bubble.

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Textbook bubble fraction of the step (idle / makespan) with equal costs,
// F : I : W = 1 : 1 : 1 per stage (B = I + W), no latency; the simulator
// reproduces each exactly (simulate_test.cc):
//   gpipe, 1f1b   (p-1) / (m + p - 1)                 Narayanan et al. 2021
//   interleaved   (p-1) / (v m + p - 1)               bubble time / v
//   zb-h1         (p-1) / (3m + p - 1), m >= p        Qi et al. 2024: bubble
//                 (p-1)(F + I - W) against 1F1B's (p-1)(F + I + W)
//   zb-v          (p-1) / (6m + p - 1), m >= 2p - 1   only the fill of the V,
//                 p-1 chunk forwards (a chunk costs half a stage), is idle
//   dualpipe-v    the same, m >= 2p, with each F&B pair run forward first
//                 (DualPipe's overlap of the pair is not modelled)
// NaN where the form does not apply (fewer microbatches than stated).
double flush_bubble(int p, int m, int) { return (p - 1.0) / (m + p - 1.0); }
double interleaved_bubble(int p, int m, int v) { return (p - 1.0) / (static_cast<double>(v) * m + p - 1.0); }
double zb_h1_bubble(int p, int m, int) { return m >= p ? (p - 1.0) / (3.0 * m + p - 1.0) : kNan; }
double zb_v_bubble(int p, int m, int) { return m >= 2 * p - 1 ? (p - 1.0) / (6.0 * m + p - 1.0) : kNan; }
double dualpipe_v_bubble(int p, int m, int) { return m >= 2 * p ? (p - 1.0) / (6.0 * m + p - 1.0) : kNan; }

void interleaved_sizes(const char* name, int p, int m, int) {
  require(m % p == 0, cat("--microbatches ", m, " must be divisible by --pp ", p, " for schedule ", name,
                          " (Megatron runs microbatches in groups of pp per chunk)"));
}
void dualpipe_v_sizes(const char* name, int p, int m, int) {
  require(m >= 2 * p, cat("--microbatches ", m, " must be at least 2 * --pp = ", 2 * p, " for schedule ", name,
                          " (DualPipe fills both arms of the V)"));
}

}  // namespace

const std::vector<ScheduleInfo>& schedules() {
  static const std::vector<ScheduleInfo> table = {
      {ScheduleId::gpipe,
       "gpipe",
       "every forward, then every backward (peak activations m per rank)",
       {1},
       "one stage per rank",
       false,
       1,
       [](int p, int m, int) { return gpipe(p, m); },
       nullptr,
       flush_bubble},
      {ScheduleId::one_f_one_b,
       "1f1b",
       "1F1B: p - r - 1 warm-up forwards, then one forward one backward (peak p - r)",
       {1},
       "one stage per rank",
       false,
       1,
       [](int p, int m, int) { return one_f_one_b(p, m); },
       nullptr,
       flush_bubble},
      {ScheduleId::interleaved,
       "interleaved",
       "interleaved 1F1B (Megatron): v chunks per rank round-robin, bubble divided by v",
       {1, 2},
       nullptr,
       true,
       1,
       interleaved_1f1b,
       interleaved_sizes,
       interleaved_bubble},
      {ScheduleId::zb_h1,
       "zb-h1",
       "ZB-H1: 1F1B with the backward split into I and W, W delayed to fill the drain",
       {1},
       "one stage per rank",
       true,
       1,
       [](int p, int m, int) { return zb_h1(p, m); },
       nullptr,
       zb_h1_bubble},
      {ScheduleId::zb_v,
       "zb-v",
       "ZB-V: two chunks per rank in a V, I/W split, zero bubble at 1F1B memory",
       {2},
       "two chunks per rank in a V",
       true,
       1,
       [](int p, int m, int) { return zb_v(p, m); },
       nullptr,
       zb_v_bubble},
      {ScheduleId::dualpipe_v,
       "dualpipe-v",
       "DualPipeV: the V of ZB-V with DualPipe's F0 B1 / F1 B0 main phase (m >= 2p)",
       {2},
       "two chunks per rank in a V",
       false,
       2,
       [](int p, int m, int) { return dualpipe_v(p, m); },
       dualpipe_v_sizes,
       dualpipe_v_bubble},
  };
  return table;
}

}  // namespace sextant::pp
