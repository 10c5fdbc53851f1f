// screen/compute: the same gemm and attention on the same inputs on every rank.
//
// Speed: each rank times its own gemm repeats (the device stream on a GPU;
// CPU seconds on a host, where a rank's wall time is the scheduler's choice
// whenever anything else shares its core; --set compute_clock=wall asks for
// wall seconds) and a rank slower than its class (same device kind) in
// either kernel is a suspect.
// Numerics: every repeat's outputs are hashed bitwise; inputs and kernels are
// identical, so every rank must produce the same bits. A rank whose hash
// differs from the majority's is a silent-data-corruption suspect, named
// with the tensor, how many elements differ and the first that does.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "harness/device.h"
#include "harness/peaks.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/attention_block.h"
#include "kernels/ops/gemm.h"
#include "suites/screen/screen.h"

namespace sextant::screen {
namespace {

const MetricDef& kTflops = define_metric(
    {"screen", "tflops_per_rank", "json", Better::neither, "compute: each rank's gemm TFLOP/s (its median repeat)"});
const MetricDef& kAttentionTflops =
    define_metric({"screen", "tflops_attention_per_rank", "json", Better::neither,
                   "compute: each rank's attention forward TFLOP/s (its median repeat)"});
const MetricDef& kHashes =
    define_metric({"screen", "output_hash_per_rank", "json", Better::neither,
                   "compute: each rank's gemm output hash (FNV-1a of the bits) of the last repeat"});
const MetricDef& kClock = define_metric({"screen", "compute_clock", "json", Better::neither,
                                         "compute: what timed the repeats: device, wall or process_cpu"});

const char* const kFigure = "tflops";

struct Mismatch {
  int repeats_bad = 0;
  int64_t differing = 0, first_index = -1;  // of the first repeat that differed
};

// The outputs every rank must agree on bit for bit.
const char* const kOutputs[] = {"gemm.c", "attention.out"};

struct State {
  Communicator* host = nullptr;
  Device device = Device::host;
  std::vector<RankIdentity> who;
  int64_t n = 0;
  int repeats = 0;
  Tensor a, b, c;  // a, b: [n, n] on the device; c = a b
  Tensor q, k, v;  // [1, n, heads, head_dim] on the device: a sequence of n
  int64_t heads = 4, head_dim = 32;
  ops::AttentionOut attention;
  ScreenFault fault = ScreenFault::none;
  bool planted_here = false;
  double magnitude = 0;
  TimerClock clock = TimerClock::wall;
  std::string device_class;
  std::vector<double> seconds;            // every timed gemm of this rank
  std::vector<double> attention_seconds;  // every timed attention forward
  std::vector<Mismatch> mismatches[2];    // each rank's, per output (kOutputs), after check
  std::vector<std::string> last_hash;     // each rank's last gemm output hash
  SuspectRule slow_rule;                  // what names a slow rank
};

const char* clock_name(TimerClock c) {
  switch (c) {
    case TimerClock::device: return "device";
    case TimerClock::process_cpu: return "process_cpu";
    default: return "wall";  // wall_synced: wall seconds, the device synchronized
  }
}

// Flips one mantissa bit of the element a third of the way into c.
void flip_bit(Tensor& c) {
  const size_t size = dtype_size(c.dtype()), offset = static_cast<size_t>(c.numel() / 3) * size;
  const int bit = size == 4 ? 20 : 4;
  unsigned char bytes[8] = {};
  char* at = static_cast<char*>(c.raw()) + offset;
  if (c.is_host()) std::memcpy(bytes, at, size);
  else cuda_copy(bytes, at, size);
  bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
  if (c.is_host()) std::memcpy(at, bytes, size);
  else cuda_copy(at, bytes, size);
}

// One repeat: the gemm and the attention forward (slow_rank: 1 + magnitude
// of each), each timed on this rank's clock when `timed`, then the planted
// bit flip in the gemm's output.
void repeat(State& s, bool timed) {
  const int times =
      s.planted_here && s.fault == ScreenFault::slow_rank ? 1 + static_cast<int>(std::lround(s.magnitude)) : 1;
  std::vector<double> discard;
  {
    ScopedTimer timer(timed ? s.seconds : discard, s.clock);
    for (int i = 0; i < times; ++i) ops::gemm(s.a, false, s.b, false, s.c);
  }
  {
    ScopedTimer timer(timed ? s.attention_seconds : discard, s.clock);
    for (int i = 0; i < times; ++i)
      s.attention = ops::attention_block_forward(s.q, s.k, s.v, ops::AttentionMask::none(), s.q.dtype());
  }
  if (s.planted_here && s.fault == ScreenFault::bitflip) flip_bit(s.c);
}

double attention_flops(const State& s) {
  // QK^T and PV: 2 gemms of 2 s^2 d per head.
  return 4.0 * static_cast<double>(s.n) * static_cast<double>(s.n) * static_cast<double>(s.heads * s.head_dim);
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  State s;
  s.host = &ctx.host_comm;
  s.device = ctx.device;
  s.who = identify_ranks(ctx);
  s.n = c.i("n");
  s.repeats = static_cast<int>(c.i("repeats"));
  s.fault = screen_faults().parse(c.fault);
  s.planted_here = s.fault != ScreenFault::none && ctx.host_comm.rank() == fault_rank(c);
  if (s.fault != ScreenFault::none)
    s.magnitude = c.fault_magnitude > 0 ? c.fault_magnitude : screen_faults().row(s.fault).magnitude;
  // Every rank draws the same inputs: the seed and names do not depend on the rank.
  s.a = random_tensor({s.n, s.n}, c.dtype, {ctx.seed, tensor_id("screen.gemm.a")}).to(ctx.device);
  s.b = random_tensor({s.n, s.n}, c.dtype, {ctx.seed, tensor_id("screen.gemm.b")}).to(ctx.device);
  s.c = Tensor::zeros({s.n, s.n}, c.dtype, ctx.device);
  const Shape qkv{1, s.n, s.heads, s.head_dim};
  s.q = random_tensor(qkv, c.dtype, {ctx.seed, tensor_id("screen.attention.q"), 2.0}).to(ctx.device);
  s.k = random_tensor(qkv, c.dtype, {ctx.seed, tensor_id("screen.attention.k"), 1.5}).to(ctx.device);
  s.v = random_tensor(qkv, c.dtype, {ctx.seed, tensor_id("screen.attention.v")}).to(ctx.device);
  const std::string clock = c.s("clock");
  s.clock = clock == "wall"              ? TimerClock::wall_synced
            : ctx.device == Device::cuda ? TimerClock::device
                                         : TimerClock::process_cpu;
  // The class a rank is judged in: its device model (a GPU's name; the host).
  s.device_class = ctx.device == Device::host
                       ? "host"
                       : cat("cuda ", describe_cuda_devices().at(static_cast<size_t>(cuda_current_device())).name);
  s.slow_rule = configured_rule(kFigure, ctx.device, c.params);
  return s;
}

// One output's hash on every rank, held to the majority of the rank's class
// (same device kind: another GPU model may run another kernel and round
// otherwise, and still be right). A rank that differs compares its output
// with a majority rank's of its class. Returns every rank's hash.
// A class without a strict majority names nobody: it goes into
// `no_majority` (every rank decides from the same gathered hashes, so all
// take the same branch).
std::vector<std::string> compare_output(Communicator& host, const std::vector<std::string>& classes,
                                        const Tensor& output, std::vector<Mismatch>& found,
                                        std::set<std::string>& no_majority) {
  const int n = host.size(), me = host.rank();
  const Tensor out = output.to(Device::host);
  const std::vector<std::string> hashes = all_gather_strings(host, content_hash(out));
  const Vote vote = vote_by_class(hashes, classes);
  no_majority.insert(vote.no_majority.begin(), vote.no_majority.end());
  const std::map<std::string, std::string>& majority = vote.majority;
  auto differs = [&](int q) { return majority.count(classes[q]) && hashes[q] != majority.at(classes[q]); };
  bool any = false;
  for (int q = 0; q < n; ++q) any = any || differs(q);
  if (!any) return hashes;
  int64_t differing = 0, first = -1;
  Tensor theirs = out.clone();
  for (const auto& [cls, hash] : majority) {  // the same order on every rank
    int reference = -1;
    bool bad = false;
    for (int q = 0; q < n; ++q) {
      if (classes[q] != cls) continue;
      if (hashes[q] == hash && reference < 0) reference = q;
      bad = bad || hashes[q] != hash;
    }
    if (!bad) continue;
    host.broadcast(theirs.raw(), static_cast<size_t>(theirs.numel()), theirs.dtype(), reference);
    if (classes[me] != cls || hashes[me] == hash) continue;
    const size_t size = dtype_size(out.dtype());
    const auto* mine = static_cast<const char*>(out.raw());
    const auto* good = static_cast<const char*>(theirs.raw());
    for (int64_t i = 0; i < out.numel(); ++i)
      if (std::memcmp(mine + i * size, good + i * size, size) != 0) {
        if (first < 0) first = i;
        ++differing;
      }
  }
  const std::vector<std::string> diffs = all_gather_strings(host, cat(differing, " ", first));
  for (int q = 0; q < n; ++q) {
    if (!differs(q)) continue;
    Mismatch& m = found[q];
    if (m.repeats_bad++ == 0) {
      const std::vector<std::string> fields = split(diffs[q], ' ');
      m.differing = std::stoll(fields.at(0));
      m.first_index = std::stoll(fields.at(1));
    }
  }
  return hashes;
}

// Every repeat's outputs, hashed on every rank and held to the majority's bits.
void check(State& s, Checker& checker) {
  Communicator& host = *s.host;
  const int me = host.rank();
  for (auto& found : s.mismatches) found.assign(static_cast<size_t>(host.size()), {});
  const std::vector<std::string> classes = all_gather_strings(host, s.device_class);
  std::set<std::string> no_majority[2];
  for (int r = 0; r < s.repeats; ++r) {
    repeat(s, false);
    s.last_hash = compare_output(host, classes, s.c, s.mismatches[0], no_majority[0]);
    compare_output(host, classes, s.attention.out, s.mismatches[1], no_majority[1]);
  }
  for (size_t o = 0; o < 2; ++o)
    for (const std::string& cls : no_majority[o])
      if (checker.is_root())
        checker.fail(cat(kOutputs[o], ": the output bits of the ranks of class '", cls,
                         "' differ and no strict majority of them agrees, so no rank can be named (",
                         std::count(classes.begin(), classes.end(), cls), " ranks)"));
  for (size_t o = 0; o < 2; ++o) {
    const Mismatch& mine = s.mismatches[o][me];
    const int64_t elements = o == 0 ? s.c.numel() : s.attention.out.numel();
    checker.exact(cat(kOutputs[o], " bitwise against the majority of ranks"), mine.repeats_bad, s.repeats);
    if (mine.repeats_bad == 0) continue;
    const RankIdentity& w = s.who[me];
    checker.fail(cat(kOutputs[o], " on rank ", me, " (host ", w.host, w.gpu ? cat(", gpu ", *w.gpu) : std::string(),
                     ") differs from the majority of ranks in ", mine.repeats_bad, " of ", s.repeats, " repeats: ",
                     mine.differing, " of ", elements, " elements, the first at index ", mine.first_index));
  }
}

// Each rank's TFLOP/s from its logged repeats ([rank][repeat] in `all`),
// and the ranks slower than their class, with the repeats they were slow in.
// A rank is named once, by the first kernel it is slow in.
std::vector<double> judge_speed(State& s, const std::vector<double>& mine, double flops, const std::string& kernel,
                                nlohmann::json& suspects, std::set<size_t>& named) {
  Communicator& host = *s.host;
  const int n = host.size();
  const size_t count = mine.size();
  std::vector<double> all(count * static_cast<size_t>(n));
  host.all_gather(mine.data(), all.data(), count, DType::f64);
  std::vector<double> tflops(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const std::vector<double> own(all.begin() + r * count, all.begin() + (r + 1) * count);
    const double median = percentile_of(own, 0.5);
    tflops[r] = median > 0 ? flops / median / 1e12 : -1;
  }
  const std::vector<std::string> classes = all_gather_strings(host, s.device_class);
  const SuspectRule& slow = s.slow_rule;
  for (const Outlier& o : outliers(tflops, classes, slow)) {
    if (!named.insert(o.index).second) continue;
    // In how many repeats this rank was worse than the repeat's median by the effect.
    int bad = 0;
    for (size_t j = 0; j < count; ++j) {
      std::vector<double> repeat_times;
      for (int r = 0; r < n; ++r) repeat_times.push_back(all[r * count + j]);
      if (all[o.index * count + j] * (1 - slow.min_effect) > percentile_of(repeat_times, 0.5)) ++bad;
    }
    nlohmann::json j = suspect_json("slow_rank", s.who[o.index], cat(kernel, " tflops"));
    j.update({{"value", o.value},
              {"class_median", o.class_median},
              {"class", o.class_name},
              {"rule", describe_rule(slow)},
              {"repeats_bad", bad},
              {"repeats", count}});
    suspects.push_back(j);
  }
  return tflops;
}

Metrics metrics(State& s, const RegionTimes& times) {
  const TimeStats& t = times.at("gemm");
  s.seconds = without_warmup(s.seconds, t);
  s.attention_seconds = without_warmup(s.attention_seconds, t);
  nlohmann::json suspects = nlohmann::json::array();
  const double gemm_flops = 2.0 * static_cast<double>(s.n) * static_cast<double>(s.n) * static_cast<double>(s.n);
  std::set<size_t> named;
  const std::vector<double> gemm = judge_speed(s, s.seconds, gemm_flops, "gemm", suspects, named);
  const std::vector<double> attention =
      judge_speed(s, s.attention_seconds, attention_flops(s), "attention", suspects, named);
  for (size_t o = 0; o < 2; ++o)
    for (size_t r = 0; r < s.mismatches[o].size(); ++r) {
      const Mismatch& m = s.mismatches[o][r];
      if (m.repeats_bad == 0) continue;
      nlohmann::json j = suspect_json("sdc", s.who[r], "output_hash");
      j.update({{"value", nullptr},
                {"class_median", nullptr},
                {"class", s.device_class},
                {"rule", "output bits differ from the majority of ranks' (same inputs, same kernel)"},
                {"tensor", kOutputs[o]},
                {"differing_elements", m.differing},
                {"first_index", m.first_index},
                {"repeats_bad", m.repeats_bad},
                {"repeats", s.repeats}});
      suspects.push_back(j);
    }
  Metrics out;
  out.add_json(kTflops, nulls_for_unmeasured(gemm));
  out.add_json(kAttentionTflops, nulls_for_unmeasured(attention));
  if (!s.last_hash.empty()) out.add_json(kHashes, s.last_hash);
  out.add_json(kClock, clock_name(s.clock));
  out.add_json(suspects_metric(), suspects);
  return out;
}

CaseDef compute_case() {
  std::vector<OptionSpec> options = screen_options({kFigure});
  options.push_back(OptionSpec::integer("screen_n", 8, 65536, "compute: the gemm's m = n = k"));
  options.push_back(OptionSpec::integer("repeats", 1, 1000, "compute: hashed repeats per rank"));
  options.push_back(OptionSpec::choice("compute_clock", {"auto", "wall"},
                                       "compute: auto (the device stream; CPU seconds on a host) or wall seconds"));
  return make_case(CaseTable<State>{
      .suite = "screen",
      .name = "compute",
      .summary = "every rank: the same gemm and attention on the same inputs; TFLOP/s per rank, bitwise output hashes",
      .runs_first = true,
      .options = options,
      .faults = screen_faults().docs_where({{"compute"}}),
      .table_metrics = {},
      .configs =
          [](const SweepRequest& req) {
            const bool gpu = req.device == Device::cuda;
            const int64_t n = req.get<int64_t>("screen_n", req.profile == Profile::ci        ? 128
                                                           : req.profile == Profile::qualify ? (gpu ? 8192 : 384)
                                                                                             : 128);
            const int64_t repeats = req.get<int64_t>("repeats", req.profile == Profile::qualify ? 10 : 5);
            const std::string clock = req.get<std::string>("compute_clock", "auto");
            return screen_configs(req, {{"n", n}, {"repeats", repeats}, {"clock", clock}},
                                  gpu ? DType::bf16 : DType::f32, {kFigure});
          },
      .validate = validate_fault_params,
      .memory =
          [](const CaseConfig& c) {
            // a, b, c and q, k, v, out of [n, 4 x 32]; the check's host copies.
            const double bytes =
                (3.0 * static_cast<double>(c.i("n") * c.i("n")) + 4.0 * 128 * c.i("n")) * dtype_size(c.dtype);
            return MemoryEstimate{c.device == Device::host ? 3 * bytes : 2 * bytes,
                                  c.device == Device::host ? 0 : bytes};
          },
      .setup = setup,
      .timed = {{"gemm",
                 [](State& s) {
                   for (int r = 0; r < s.repeats; ++r) repeat(s, true);
                 }}},
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, compute_case);

}  // namespace
}  // namespace sextant::screen
