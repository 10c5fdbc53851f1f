// step/sweep's own calibration (kernels/planner/calibration.h): this
// machine's component rates measured on the instance's ranks, every rank at
// once so that the cores are shared as they are in the step, at exactly
// the shapes the calibrated planner asks for (step_cost.h collect_queries):
// each gemm shape with its transposes, the attention blocks, LayerNorm and
// GELU at the activation sizes, the MoE layer's routing and permutes at its
// token counts, and the collectives and ring messages on groups of each
// size the configs use (consecutive ranks, all groups at once). Host only:
// on a device the rates would be the host's.
#include <cblas.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "harness/op_times.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "harness/topology.h"
#include "kernels/moe/moe_layer.h"
#include "kernels/ops/attention_block.h"
#include "kernels/ops/gelu.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/layernorm.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {

enum class Clock { wall, compute };

// The ranks that time together, and whether they share their node's cores
// (more ranks x threads on it than cores).
struct Timing {
  Communicator& comm;
  bool shared_cores = false;
};
bool shares_cores(int ranks_per_node) {
  const int threads = std::max(1, openblas_get_num_threads());
  return ranks_per_node * threads > static_cast<int>(std::thread::hardware_concurrency());
}

// Seconds per call of fn on every rank at once: the median of 5 windows of
// the same number of calls on every rank (collectives must match), enough
// for `window` seconds; each window the mean over its calls; the mean over
// ranks. The ranks start each window together. Clock::compute measures
// what fn takes with a core to itself: a rank descheduled in a window (the
// ranks share the cores) counts the CPU time its threads got, not the wall
// time it waited. Where ranks share the cores each call first yields its
// core: the step's ranks hand a core to each other at every wait (Open MPI
// yields when oversubscribed), so an op often starts after another rank ran
// on the core and took its caches. Without the yield a rank ran its whole
// window alone, and the step at 8 ranks on 2 cores came out 11% slower than
// predicted (median over configs), 8% with it.
double timed(const Timing& t, const std::function<void()>& fn, double window = 1e-3, Clock clock = Clock::compute) {
  Communicator& comm = t.comm;
  fn();  // warm-up: first touch of the buffers
  comm.barrier();
  double start = now_seconds();
  fn();
  const double once = comm.all_reduce_value(now_seconds() - start, ReduceOp::max);
  const int calls = static_cast<int>(std::clamp(std::ceil(window / std::max(once, 1e-9)), 2.0, 1e5));
  const int threads = std::max(1, openblas_get_num_threads());
  std::vector<double> per_call;
  for (int w = 0; w < 5; ++w) {
    comm.barrier();
    start = now_seconds();
    const double cpu = process_cpu_seconds();
    for (int i = 0; i < calls; ++i) {
      if (t.shared_cores) sched_yield();
      fn();
    }
    double seconds = now_seconds() - start;
    if (clock == Clock::compute) seconds = std::min(seconds, (process_cpu_seconds() - cpu) / threads);
    per_call.push_back(seconds / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return comm.all_reduce_value(per_call[2], ReduceOp::sum) / comm.size();
}

// Larger than most servers' last-level cache per socket.
constexpr double kColdBytes = 64.0 * (1 << 20);

Tensor random(const Shape& shape, const char* name) {
  return random_tensor(shape, DType::f32, RandomSpec{7, tensor_id(name), 1.0});
}

// How many copies of a working set of `bytes` make a pool larger than the
// last-level cache, so that cycling through them reads cold data as the
// step does (its saved activations do not fit in the cache); at most 64, so
// a small op's pool stays in cache as a small activation does in the step
// (with no cap, the 1-rank step came out 10-22% under its prediction).
int pool_size(double bytes) { return static_cast<int>(std::clamp(std::ceil(kColdBytes / bytes), 1.0, 64.0)); }

// The reference kernel's seconds per call, every rank at once.
double reference_kernel_s(const Timing& t) {
  ReferenceSgemm kernel;
  return timed(t, [&] { kernel.run(); });
}

// Scales samples to the machine's speed when the calibration started:
// each sample's seconds times reference_s / the reference kernel's time
// just before it.
class SpeedReference {
 public:
  explicit SpeedReference(const Timing& t) : timing_(t), reference_s_(reference_kernel_s(t)) {}
  // Call before a sample; then scaled(seconds) for it.
  void before_sample() { now_s_ = reference_kernel_s(timing_); }
  double scaled(double seconds) const { return now_s_ > 0 ? seconds * reference_s_ / now_s_ : seconds; }
  double reference_s() const { return reference_s_; }

 private:
  Timing timing_;
  double reference_s_ = 0, now_s_ = 0;
};

std::vector<plan::GemmSample> measure_gemms(const Timing& t, const plan::CostQueries& q, SpeedReference& speed) {
  std::vector<plan::GemmSample> out;
  for (const auto& [m, n, k, ta, tb] : q.gemms) {
    const size_t sa = static_cast<size_t>(m * k), sb = static_cast<size_t>(k * n), sc = static_cast<size_t>(m * n);
    const int sets = pool_size(4.0 * (sa + sb + sc));
    std::vector<float> a(sa * sets, 0.5f), b(sb * sets, 0.25f), c(sc * sets, 0.0f);
    const float beta = ta ? 1.0f : 0.0f;  // weight gradients accumulate
    int next = 0;
    speed.before_sample();
    const double s = timed(t, [&] {
      const size_t i = static_cast<size_t>(next++ % sets);
      ops::gemm_f32(ta, tb, m, n, k, 1.0f, a.data() + i * sa, ta ? m : k, b.data() + i * sb, tb ? k : n, beta,
                    c.data() + i * sc, n);
    });
    out.push_back(
        {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), speed.scaled(s), ta != 0, tb != 0});
  }
  return out;
}

// The attention block forward and backward on one CP block of rows
// (queries and keys of the same rows: the diagonal block under a causal
// mask), cycling through a pool of inputs as the gemms do: one set would
// stay in the core's cache, which the step's saved activations are not.
std::vector<plan::RateSample> measure_attention(const Timing& t, const plan::CostQueries& q, SpeedReference& speed) {
  std::vector<plan::RateSample> out;
  for (const auto& [b, s, heads, d, causal] : q.attention) {
    const int sets = pool_size(4.0 * 4 * b * s * heads * d);
    std::vector<std::array<Tensor, 4>> pool;  // q, k, v, dout
    for (int i = 0; i < sets; ++i)
      pool.push_back({random({b, s, heads, d}, "calibrate.q"), random({b, s, heads, d}, "calibrate.k"),
                      random({b, s, heads, d}, "calibrate.v"), random({b, s, heads, d}, "calibrate.dout")});
    const ops::AttentionMask mask = causal ? ops::AttentionMask::causal_blocks(0, s, 0, s) : ops::AttentionMask::none();
    int next = 0;
    speed.before_sample();
    const double seconds = timed(t, [&] {
      const auto& [qt, k, v, dout] = pool[static_cast<size_t>(next++ % sets)];
      const ops::AttentionOut fwd = ops::attention_block_forward(qt, k, v, mask, DType::f32);
      ops::attention_block_backward(qt, k, v, fwd.out, fwd.lse, dout, mask);
    });
    const double flops_fwd = 4.0 * b * heads * d * s * s * (causal ? 0.5 : 1.0);
    out.push_back({3.5 * flops_fwd, speed.scaled(seconds)});
  }
  return out;
}

// LayerNorm and GELU forward and backward, allocating their outputs as the
// step does: 5 passes over the elements each (the ops suite's count).
std::vector<plan::RateSample> measure_elementwise(const Timing& t, const plan::CostQueries& q, int64_t hidden,
                                                  SpeedReference& speed) {
  std::vector<plan::RateSample> out;
  // Five sizes across the range asked for: the fit's overhead and rate need no more.
  const std::vector<int64_t> all(q.elementwise.begin(), q.elementwise.end());
  std::set<int64_t> sizes;
  for (size_t i = 0; i < 5 && !all.empty(); ++i) sizes.insert(all[(all.size() - 1) * i / 4]);
  for (int64_t elements : sizes) {
    const int64_t rows = std::max<int64_t>(1, elements / hidden);
    const int sets = pool_size(2.0 * 4 * rows * hidden);
    std::vector<Tensor> xs, dys;
    for (int i = 0; i < sets; ++i) {
      xs.push_back(random({rows, hidden}, "calibrate.x"));
      dys.push_back(random({rows, hidden}, "calibrate.dy"));
    }
    const Tensor gamma = random({hidden}, "calibrate.gamma"), beta = random({hidden}, "calibrate.beta");
    int next = 0;
    speed.before_sample();
    const double layernorm = timed(t, [&] {
      const Tensor& x = xs[static_cast<size_t>(next % sets)];
      const Tensor& dy = dys[static_cast<size_t>(next++ % sets)];
      Tensor y = Tensor::empty(x.shape(), DType::f32), dx = Tensor::empty(x.shape(), DType::f32);
      Tensor dgamma = Tensor::empty({hidden}, DType::f32), dbeta = Tensor::empty({hidden}, DType::f32);
      const ops::LayerNormStats stats = ops::layernorm_forward(x, gamma, beta, y);
      ops::layernorm_backward(dy, x, gamma, stats, dx, dgamma, dbeta);
    });
    const double layernorm_s = speed.scaled(layernorm);
    speed.before_sample();
    const double gelu = timed(t, [&] {
      const Tensor& x = xs[static_cast<size_t>(next % sets)];
      const Tensor& dy = dys[static_cast<size_t>(next++ % sets)];
      Tensor y = Tensor::empty(x.shape(), DType::f32), dx = Tensor::empty(x.shape(), DType::f32);
      ops::gelu_forward(x, y);
      ops::gelu_backward(dy, x, dx);
    });
    const double bytes = 5.0 * rows * hidden * 4;
    out.push_back({bytes, layernorm_s / 2});  // two calls: forward and backward
    out.push_back({bytes, speed.scaled(gelu) / 2});
  }
  return out;
}

// Seconds of fn's work outside its timed ops (harness/op_times.h), with a
// core to itself: the wall time less the ops', scaled by the share of it
// this thread ran (ranks that share the cores wait for one in between; the
// work outside the ops runs on this thread alone).
double outside_ops_s(const std::function<void()>& fn) {
  OpTimes times;
  const double start = now_seconds(), cpu = thread_cpu_seconds();
  fn();
  const double wall = now_seconds() - start;
  const double ran = std::min(1.0, (thread_cpu_seconds() - cpu) / std::max(wall, 1e-12));
  double ops = 0;
  for (const auto& [op, seconds] : times.seconds()) ops += seconds;
  return std::max(0.0, wall - ops) * ran;
}

// The MoE layer's work outside its ops (the router's softmax, top-k and
// bookkeeping, the permutes into expert order and back, the weighted
// combine), forward and backward apart: every rank at once, each with its
// experts to itself, at the token counts the configs route on a rank; the
// median of 7 calls, the mean over ranks, seconds against tokens. Each
// rank holds every expert it runs, so a large model's are limited to what
// fits in kExpertBytes (at least top-k of them): the routing's cost per
// token hardly depends on their number.
void measure_moe_routing(Communicator& comm, const plan::CostQueries& q, const model::GptConfig& m,
                         SpeedReference& speed, plan::Calibration& cal) {
  if (q.moe_tokens.empty() || m.experts <= 0) return;
  std::unique_ptr<Communicator> self = comm.split(comm.rank(), 0);
  constexpr double kExpertBytes = 64.0 * (1 << 20);
  const double expert_bytes = 2.0 * m.hidden * m.moe_ffn * sizeof(float);
  const int experts = std::min(m.experts, std::max(m.topk, static_cast<int>(kExpertBytes / expert_bytes)));
  moe::MoeOptions options;
  options.router.experts = experts, options.router.topk = m.topk;
  options.dispatcher = m.dispatcher;
  moe::MoeWeights weights;
  weights.router = random({m.hidden, experts}, "calibrate.router");
  for (int e = 0; e < experts; ++e) {
    weights.w1.push_back(random({m.hidden, m.moe_ffn}, "calibrate.w1"));
    weights.w2.push_back(random({m.moe_ffn, m.hidden}, "calibrate.w2"));
  }
  moe::MoeLayer layer(options, {self.get(), self.get(), self.get(), self.get()}, weights);
  std::vector<plan::RateSample> forward, backward;
  std::set<int64_t> counts;  // each asked for and its half: the fit's overhead and rate
  for (int64_t tokens : q.moe_tokens) counts.insert(tokens), counts.insert(std::max<int64_t>(1, tokens / 2));
  for (int64_t tokens : counts) {
    const Tensor x = random({tokens, m.hidden}, "calibrate.x"), dy = random({tokens, m.hidden}, "calibrate.dy");
    layer.forward(x), layer.backward(dy);  // warm-up
    std::vector<double> f, b;
    speed.before_sample();
    comm.barrier();
    for (int i = 0; i < 7; ++i) {
      f.push_back(outside_ops_s([&] { layer.forward(x); }));
      b.push_back(outside_ops_s([&] { layer.backward(dy); }));
    }
    std::sort(f.begin(), f.end()), std::sort(b.begin(), b.end());
    const double ranks = comm.size();
    forward.push_back({static_cast<double>(tokens), speed.scaled(comm.all_reduce_value(f[3], ReduceOp::sum) / ranks)});
    backward.push_back({static_cast<double>(tokens), speed.scaled(comm.all_reduce_value(b[3], ReduceOp::sum) / ranks)});
  }
  cal.moe_forward = plan::fit_rate(forward);
  cal.moe_backward = plan::fit_rate(backward);
}

// The links the planner prices, by the collectives suite's case names: one
// collective of `elements` (the whole buffer, nccl-tests' convention).
struct LinkOp {
  const char* name;
  void (*run)(Communicator& g, std::vector<float>& send, std::vector<float>& recv, size_t elements);
};
const LinkOp kLinkOps[] = {
    {"all_reduce", [](Communicator& g, std::vector<float>& s, std::vector<float>& r,
                      size_t n) { g.all_reduce(s.data(), r.data(), n, DType::f32, ReduceOp::sum); }},
    {"all_gather", [](Communicator& g, std::vector<float>& s, std::vector<float>& r,
                      size_t n) { g.all_gather(s.data(), r.data(), n / g.size(), DType::f32); }},
    {"reduce_scatter", [](Communicator& g, std::vector<float>& s, std::vector<float>& r,
                          size_t n) { g.reduce_scatter(s.data(), r.data(), n / g.size(), DType::f32, ReduceOp::sum); }},
    {"all_to_all", [](Communicator& g, std::vector<float>& s, std::vector<float>& r,
                      size_t n) { g.all_to_all(s.data(), r.data(), n / g.size(), DType::f32); }},
    {"all_to_all_v",
     [](Communicator& g, std::vector<float>& s, std::vector<float>& r, size_t n) {
       const size_t part = n / g.size();
       std::vector<size_t> counts(g.size(), part), displs(g.size());
       for (int p = 0; p < g.size(); ++p) displs[p] = p * part;
       g.all_to_all_v(s.data(), counts, displs, r.data(), counts, displs, DType::f32);
     }},
    {"sendrecv",  // a ring: to the next rank, from the previous
     [](Communicator& g, std::vector<float>& s, std::vector<float>& r, size_t n) {
       std::vector<RequestPtr> reqs;
       g.group_start();
       reqs.push_back(g.irecv(r.data(), n, DType::f32, (g.rank() + g.size() - 1) % g.size(), 0));
       reqs.push_back(g.isend(s.data(), n, DType::f32, (g.rank() + 1) % g.size(), 0));
       g.group_end();
       wait_all(reqs);
     }},
};

// Seconds per call of fn as the step makes it, on every rank at once:
// after the rank has just written the send buffer and worked through more
// than a core's own cache (prepare), the ranks starting together. The
// median over calls, the mean over ranks. Where ranks share cores, each
// call also waits for its partners to be scheduled.
double timed_as_in_step(Communicator& comm, const std::function<void()>& prepare, const std::function<void()>& fn) {
  constexpr int kCalls = 15;
  fn();  // warm-up: first touch of the buffers
  std::vector<double> per_call;
  for (int i = 0; i < kCalls; ++i) {
    prepare();
    comm.barrier();
    const double start = now_seconds();
    fn();
    per_call.push_back(now_seconds() - start);
  }
  std::sort(per_call.begin(), per_call.end());
  return comm.all_reduce_value(per_call[kCalls / 2], ReduceOp::sum) / comm.size();
}

// Every operation on groups of n consecutive ranks, all groups at once:
// time = latency + bus bytes / busbw.
//   latency  fitted to small messages in a loop of calls, the ranks in step
//            (how long they wait for each other is the contention probe's
//            to measure, not the link's);
//   busbw    from the difference between two large messages made as the
//            step makes them (timed_as_in_step: input just written, caches cold),
//            in which the waits for partners cancel. In a loop the large
//            buffers stay in the cores' caches and the calls overlap, which
//            made a 256 KiB reduce-scatter look 2.5 times as fast as inside
//            the step.
void measure_links(const Timing& t, int n, plan::Calibration& cal) {
  Communicator& comm = t.comm;
  std::unique_ptr<Communicator> group = comm.split(comm.rank() / n, comm.rank());
  const NodeMap nodes = detect_nodes(comm);
  std::vector<int> members;
  for (int r = comm.rank() / n * n; r < comm.rank() / n * n + n; ++r) members.push_back(r);
  const int spanning = static_cast<int>(comm.all_reduce_value(nodes_spanned(nodes, members) > 1, ReduceOp::max));
  // Larger than a core's own caches (2 MiB of L2 and less on most servers).
  std::vector<float> scratch(static_cast<size_t>(4 << 20) / sizeof(float), 0.0f);
  for (const LinkOp& link : kLinkOps) {
    const char* op = link.name;
    auto sample = [&](size_t bytes, bool as_in_step) {
      const size_t elements = bytes / 4 / n * n;
      std::vector<float> send(elements, 1.0f), recv(elements, 0.0f);
      float value = 1.0f;
      auto prepare = [&] {
        value = value == 1.0f ? 2.0f : 1.0f;  // the activation the step just computed
        std::fill(scratch.begin(), scratch.end(), value);
        std::fill(send.begin(), send.end(), value);
      };
      auto call = [&] { link.run(*group, send, recv, elements); };
      const double seconds = as_in_step ? timed_as_in_step(comm, prepare, call) : timed(t, call, 2e-4, Clock::wall);
      return plan::RateSample{elements * 4.0 * plan::bus_factor(op, n), seconds};
    };
    const plan::RateModel loop = plan::fit_rate({sample(size_t{1} << 10, false), sample(size_t{1} << 15, false)});
    const plan::RateSample small = sample(size_t{1} << 17, true), large = sample(size_t{1} << 20, true);
    // Noise can make the difference vanish: then the large message's own rate.
    const double slope = (large.seconds - small.seconds) / (large.work - small.work);
    cal.links[cat(op, "/", spanning ? "inter" : "intra", "/", n)] = {
        loop.overhead_s, slope > 0 ? 1 / slope : large.work / std::max(large.seconds, 1e-12)};
  }
}

}  // namespace

SchedTimes sched_times() {
  SchedTimes t;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    double on_cpu_ns = 0, waiting_ns = 0;
    if (!(in >> on_cpu_ns >> waiting_ns)) continue;
    t.on_cpu += on_cpu_ns * 1e-9, t.waiting += waiting_ns * 1e-9, t.available = true;
  }
  return t;
}

constexpr int64_t kReferenceN = 128;

ReferenceSgemm::ReferenceSgemm() : a_(kReferenceN * kReferenceN, 0.5f), b_(a_.size(), 0.25f), c_(a_.size(), 0.0f) {}

void ReferenceSgemm::run() {
  constexpr int64_t n = kReferenceN;
  ops::gemm_f32(false, false, n, n, n, 1.0f, a_.data(), n, b_.data(), n, 0.0f, c_.data(), n);
}

ContentionProbe::ContentionProbe(Communicator& comm, const std::set<int>& group_sizes, int ranks_per_node)
    : shared_cores_(shares_cores(ranks_per_node)) {
  uncontended_s_ = timed(
      {comm, shared_cores_}, [&] { kernel_.run(); }, 2e-4);
  calls_ = std::max(5, static_cast<int>(5e-3 / uncontended_s_));
  for (int n : group_sizes)
    if (n > 1 && n < comm.size() && comm.size() % n == 0) groups_[n] = comm.split(comm.rank() / n, comm.rank());
}

void ContentionProbe::start() { started_ = sched_times(); }

void ContentionProbe::stop() {
  const SchedTimes now = sched_times();
  spent_.on_cpu += now.on_cpu - started_.on_cpu;
  spent_.waiting += now.waiting - started_.waiting;
  spent_.available = now.available;
}

double ContentionProbe::probed_slowdown(Communicator& comm) {
  comm.barrier();
  const double start = now_seconds();
  for (int i = 0; i < calls_; ++i) kernel_.run();
  return (now_seconds() - start) / (calls_ * uncontended_s_);
}

Contention ContentionProbe::measure(Communicator& comm) {
  Contention out;
  const bool scheduler = comm.all_reduce_value(spent_.available && spent_.on_cpu > 0 ? 1 : 0, ReduceOp::min) > 0;
  const double mine = scheduler ? (spent_.on_cpu + spent_.waiting) / spent_.on_cpu : probed_slowdown(comm);
  spent_ = SchedTimes{};
  out.slowdown = comm.all_reduce_value(mine, ReduceOp::max);  // the step waits for its slowest rank
  out.reference_s = reference_kernel_s({comm, shared_cores_});
  if (comm.size() == 1) return out;
  constexpr int kRounds = 5;
  const int per_round = std::max(1, calls_ / kRounds);
  out.sync_s = sync_wait(comm, comm, per_round);
  out.sync_chunk_s = per_round * uncontended_s_;
  out.sync_short_s = sync_wait(comm, comm, 1);  // collectives close together
  out.sync_short_chunk_s = uncontended_s_;
  for (auto& [n, group] : groups_) out.sync_group_s[n] = sync_wait(comm, *group, per_round);
  return out;
}

// The same sgemm calls without and with an all-reduce on `group` every
// per_round of them, 3 times in turn: the difference is what the
// synchronisations cost. The slowest rank's, per all-reduce.
double ContentionProbe::sync_wait(Communicator& comm, Communicator& group, int per_round) {
  constexpr int kRounds = 5, kPasses = 3;
  auto rounds = [&](bool sync) {
    comm.barrier();
    const double start = now_seconds();
    for (int r = 0; r < kRounds; ++r) {
      for (int i = 0; i < per_round; ++i) kernel_.run();
      if (sync) group.all_reduce_value(kernel_.result(), ReduceOp::sum);
    }
    return now_seconds() - start;
  };
  double extra = 0;
  for (int pass = 0; pass < kPasses; ++pass) extra -= rounds(false), extra += rounds(true);
  return std::max(0.0, comm.all_reduce_value(extra / (kPasses * kRounds), ReduceOp::max));
}

plan::Calibration calibrate_here(Communicator& comm, const plan::CostQueries& queries, const model::GptConfig& model,
                                 int ranks_per_node) {
  const Timing timing{comm, shares_cores(ranks_per_node)};
  plan::Calibration cal;
  cal.source = cat("step/sweep, measured in this run on ", comm.size(), " ranks");
  cal.cores_per_node = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  SpeedReference speed(timing);
  cal.reference_s = speed.reference_s();
  cal.gemm = plan::fit_gemm(measure_gemms(timing, queries, speed));
  cal.attention = plan::fit_rate(measure_attention(timing, queries, speed));
  cal.elementwise = plan::fit_rate(measure_elementwise(timing, queries, model.hidden, speed));
  measure_moe_routing(comm, queries, model, speed, cal);
  for (int n : queries.group_sizes)
    if (n > 1 && n <= comm.size() && comm.size() % n == 0) measure_links(timing, n, cal);
  return cal;
}

}  // namespace sextant::step
