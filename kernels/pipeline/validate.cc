#include "kernels/pipeline/validate.h"

#include "harness/strings.h"

namespace sextant::pp {

namespace {
using T = ActionType;
constexpr int kTypes = 4;

std::string at(const Step& s) { return cat("rank ", s.rank, " step ", s.step); }

[[noreturn]] void fail(const Schedule& schedule, const std::string& message, std::vector<GridMark> marks) {
  throw ScheduleError(message, format_grid(schedule, marks), marks);
}

// Row end: where a missing action of `rank` would go.
GridMark row_end(const Schedule& schedule, int rank) { return {rank, static_cast<int>(schedule.actions[rank].size())}; }
}  // namespace

ScheduleIndex::ScheduleIndex(const Schedule& schedule)
    : schedule_(schedule),
      where_(static_cast<size_t>(schedule.stages) * kTypes * static_cast<size_t>(schedule.microbatches)) {
  for (int r = 0; r < static_cast<int>(schedule.actions.size()); ++r)
    for (int t = 0; t < static_cast<int>(schedule.actions[r].size()); ++t) {
      Step& slot = where_[key(schedule.actions[r][t])];
      if (!slot.found()) slot = {r, t};
    }
}

size_t ScheduleIndex::key(const Action& a) const {
  return (static_cast<size_t>(a.stage) * kTypes + static_cast<size_t>(a.type)) * schedule_.microbatches +
         static_cast<size_t>(a.microbatch);
}

Step ScheduleIndex::find(const Action& action) const { return where_[key(action)]; }

Action ScheduleIndex::gradient_producer(int stage, int microbatch) const {
  Action input{stage + 1, T::I, microbatch};
  return find(input).found() ? input : Action{stage + 1, T::B, microbatch};
}

std::vector<std::pair<Action, Step>> ScheduleIndex::dependencies(const Action& a) const {
  std::vector<Action> deps;
  switch (a.type) {
    case T::F:
      if (a.stage > 0) deps.push_back({a.stage - 1, T::F, a.microbatch});
      break;
    case T::B:
    case T::I:
      deps.push_back({a.stage, T::F, a.microbatch});
      if (a.stage + 1 < schedule_.stages) deps.push_back(gradient_producer(a.stage, a.microbatch));
      break;
    case T::W: deps.push_back({a.stage, T::I, a.microbatch}); break;
  }
  std::vector<std::pair<Action, Step>> out;
  for (const Action& d : deps) out.emplace_back(d, find(d));
  return out;
}

namespace {

void check_shape(const Schedule& s) {
  require(s.ranks >= 1 && static_cast<int>(s.actions.size()) == s.ranks,
          cat("schedule: ", s.actions.size(), " rank rows but ranks = ", s.ranks));
  require(s.stages >= 1, cat("schedule: stages ", s.stages, " must be positive"));
  require(s.microbatches >= 1, cat("schedule: microbatches ", s.microbatches, " must be positive"));
  require(static_cast<int>(s.stage_rank.size()) == s.stages,
          cat("schedule: placement lists ", s.stage_rank.size(), " stages but stages = ", s.stages));
}

void check_placement(const Schedule& s) {
  for (int stage = 0; stage < s.stages; ++stage) {
    const int r = s.stage_rank[stage];
    if (r < 0) fail(s, cat("coverage: stage ", stage, " is run by no rank (every stage needs F and a backward)"), {});
    if (r >= s.ranks)
      fail(s, cat("placement: stage ", stage, " is placed on rank ", r, ", outside 0..", s.ranks - 1), {});
  }
  for (int r = 0; r < s.ranks; ++r)
    for (int t = 0; t < static_cast<int>(s.actions[r].size()); ++t) {
      const Action& a = s.actions[r][t];
      const std::string where = cat("rank ", r, " step ", t, " (", to_string(a), ")");
      if (a.stage >= s.stages)
        fail(s, cat("placement: ", where, " names stage ", a.stage, " but the stages are 0..", s.stages - 1), {{r, t}});
      if (a.microbatch >= s.microbatches)
        fail(s,
             cat("coverage: ", where, " names microbatch ", a.microbatch, " but the microbatches are 0..",
                 s.microbatches - 1),
             {{r, t}});
      if (s.stage_rank[a.stage] != r)
        fail(s,
             cat("placement: ", where, " runs stage ", a.stage, " which is placed on rank ", s.stage_rank[a.stage],
                 " (each stage runs on one rank)"),
             {{r, t}});
    }
}

void check_no_repeats(const Schedule& s, const ScheduleIndex& index) {
  for (int r = 0; r < s.ranks; ++r)
    for (int t = 0; t < static_cast<int>(s.actions[r].size()); ++t) {
      const Action& a = s.actions[r][t];
      Step first = index.find(a);
      if (first.rank != r || first.step != t)
        fail(s, cat("coverage: rank ", r, " step ", t, " repeats ", to_string(a), " (first at ", at(first), ")"),
             {{first.rank, first.step}, {r, t}});
    }
}

void check_coverage(const Schedule& s, const ScheduleIndex& index) {
  check_no_repeats(s, index);
  for (int stage = 0; stage < s.stages; ++stage)
    for (int mb = 0; mb < s.microbatches; ++mb) {
      const int r = s.stage_rank[stage];
      const Action f{stage, T::F, mb}, b{stage, T::B, mb}, i{stage, T::I, mb}, w{stage, T::W, mb};
      const Step sf = index.find(f), sb = index.find(b), si = index.find(i), sw = index.find(w);
      const std::string what = cat("stage ", stage, " microbatch ", mb, " on rank ", r);
      if (!sf.found()) fail(s, cat("coverage: ", what, " has no forward ", to_string(f)), {row_end(s, r)});
      if (sb.found() && (si.found() || sw.found())) {
        Step split = si.found() ? si : sw;
        fail(s,
             cat("coverage: ", what, " has both a full backward ", to_string(b), " (", at(sb), ") and a split one (",
                 at(split), ")"),
             {{sb.rank, sb.step}, {split.rank, split.step}});
      }
      if (!sb.found() && !si.found() && !sw.found())
        fail(s,
             cat("coverage: ", what, " has no backward (", to_string(b), ", or ", to_string(i), " and ", to_string(w),
                 ")"),
             {row_end(s, r)});
      if (si.found() && !sw.found())
        fail(s, cat("coverage: ", what, " has ", to_string(i), " (", at(si), ") but no ", to_string(w)),
             {{si.rank, si.step}, row_end(s, r)});
      if (sw.found() && !si.found())
        fail(s, cat("coverage: ", what, " has ", to_string(w), " (", at(sw), ") but no ", to_string(i)),
             {{sw.rank, sw.step}, row_end(s, r)});
    }
}

void check_local_order(const Schedule& s, const ScheduleIndex& index) {
  for (int r = 0; r < s.ranks; ++r)
    for (int t = 0; t < static_cast<int>(s.actions[r].size()); ++t) {
      const Action& a = s.actions[r][t];
      for (const auto& [dep, where] : index.dependencies(a))
        if (where.rank == r && where.step > t)
          fail(s,
               cat("local order: rank ", r, " step ", t, " runs ", to_string(a), " before ", to_string(dep), " (step ",
                   where.step, ") on the same rank"),
               {{r, t}, {r, where.step}});
    }
}

// Blocking-receive dry run: each rank runs its list in order; an action runs
// once everything it depends on has run (on any rank).
void check_deadlock(const Schedule& s, const ScheduleIndex& index) {
  std::vector<std::vector<char>> done(static_cast<size_t>(s.ranks));
  for (int r = 0; r < s.ranks; ++r) done[r].assign(s.actions[r].size(), 0);
  std::vector<size_t> next(static_cast<size_t>(s.ranks), 0);
  auto ready = [&](const Action& a) {
    for (const auto& [dep, where] : index.dependencies(a))
      if (!done[where.rank][where.step]) return false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < s.ranks; ++r)
      while (next[r] < s.actions[r].size() && ready(s.actions[r][next[r]])) {
        done[r][next[r]++] = 1;
        progress = true;
      }
  }
  std::vector<std::string> waits;
  std::vector<GridMark> marks;
  for (int r = 0; r < s.ranks; ++r) {
    if (next[r] == s.actions[r].size()) continue;
    const Action& a = s.actions[r][next[r]];
    for (const auto& [dep, where] : index.dependencies(a))
      if (!done[where.rank][where.step]) {
        waits.push_back(cat("rank ", r, " step ", next[r], " (", to_string(a), ") waits for ", to_string(dep), " (",
                            at(where), ")"));
        break;
      }
    marks.push_back({r, static_cast<int>(next[r])});
  }
  if (!waits.empty()) fail(s, cat("deadlock: with blocking receives ", join(waits, "; ")), marks);
}

}  // namespace

void validate(const Schedule& schedule) {
  check_shape(schedule);
  check_placement(schedule);
  ScheduleIndex index(schedule);
  check_coverage(schedule, index);
  check_local_order(schedule, index);
  check_deadlock(schedule, index);
}

}  // namespace sextant::pp
