#include "kernels/pipeline/schedules.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::pp {

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
