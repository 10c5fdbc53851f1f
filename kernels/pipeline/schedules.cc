#include "kernels/pipeline/schedules.h"

#include <cmath>
#include <limits>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/generators.h"

namespace sextant::pp {

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

const ScheduleInfo& schedule_info(ScheduleId id) {
  for (const ScheduleInfo& s : schedules())
    if (s.id == id) return s;
  throw RuntimeError(cat("no schedule ", static_cast<int>(id)));
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const ScheduleInfo& s : schedules()) out.push_back(s.name);
  return out;
}

std::optional<ScheduleId> find_schedule(const std::string& name) {
  for (const ScheduleInfo& s : schedules())
    if (name == s.name) return s.id;
  return std::nullopt;
}

ScheduleId parse_schedule(const std::string& name) {
  if (std::optional<ScheduleId> id = find_schedule(name)) return *id;
  throw UsageError(cat("--schedule ", name, " is not one of ", join(schedule_names(), ", ")));
}

std::string schedule_name(ScheduleId id) { return schedule_info(id).name; }

void validate_schedule_request(ScheduleId id, int p, int m, int v) {
  const ScheduleInfo& s = schedule_info(id);
  require_positive("--pp", p);
  require_positive("--microbatches", m);
  require_positive("--vpp", v);
  if (s.chunk_rule)
    require(v == s.chunks.at(0),
            cat("--vpp ", v, " must be ", s.chunks.at(0), " for schedule ", s.name, " (", s.chunk_rule, ")"));
  if (s.check_sizes) s.check_sizes(s.name, p, m, v);
}

Schedule make_schedule(ScheduleId id, int p, int m, int v) {
  validate_schedule_request(id, p, m, v);
  return schedule_info(id).generate(p, m, v);
}

int chunks_per_rank(ScheduleId id, int vpp) {
  const ScheduleInfo& s = schedule_info(id);
  return s.chunk_rule ? s.chunks.at(0) : vpp;
}

double closed_form_bubble(ScheduleId id, int p, int m, int v) { return schedule_info(id).closed_form_bubble(p, m, v); }

}  // namespace sextant::pp
