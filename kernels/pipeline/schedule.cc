#include "kernels/pipeline/schedule.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "harness/strings.h"

namespace sextant::pp {

char type_letter(ActionType type) {
  switch (type) {
    case ActionType::F: return 'F';
    case ActionType::B: return 'B';
    case ActionType::I: return 'I';
    case ActionType::W: return 'W';
  }
  return '?';
}

std::string to_string(const Action& action) { return cat(action.stage, type_letter(action.type), action.microbatch); }

namespace {

// Digits at text[pos...]; advances pos. -1 when there are none.
int read_number(const std::string& text, size_t& pos) {
  size_t start = pos;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == start || pos - start > 6) return -1;
  return std::stoi(text.substr(start, pos - start));
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

}  // namespace

Action parse_action(const std::string& text, const std::string& where) {
  const std::string bad =
      cat("schedule ", where, ": unknown action '", text, "' (expected <stage><F|B|I|W><microbatch>, e.g. 1F3)");
  size_t pos = 0;
  Action a;
  a.stage = read_number(text, pos);
  if (a.stage < 0 || pos >= text.size()) throw UsageError(bad);
  switch (std::toupper(static_cast<unsigned char>(text[pos]))) {
    case 'F': a.type = ActionType::F; break;
    case 'B': a.type = ActionType::B; break;
    case 'I': a.type = ActionType::I; break;
    case 'W': a.type = ActionType::W; break;
    default: throw UsageError(bad);
  }
  ++pos;
  a.microbatch = read_number(text, pos);
  if (a.microbatch < 0 || pos != text.size()) throw UsageError(bad);
  return a;
}

std::vector<int> Schedule::stages_of(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < static_cast<int>(stage_rank.size()); ++s)
    if (stage_rank[s] == rank) out.push_back(s);
  return out;
}

size_t Schedule::max_steps() const {
  size_t n = 0;
  for (const auto& list : actions) n = std::max(n, list.size());
  return n;
}

int Schedule::max_in_flight(int rank) const {
  const auto& list = actions.at(static_cast<size_t>(rank));
  int held = 0, most = 0;
  for (const Action& a : list) {
    if (a.type == ActionType::F) most = std::max(most, ++held);
    if (a.type == ActionType::B || a.type == ActionType::W) --held;
  }
  return most;
}

int Schedule::max_deferred_weight_grads(int rank) const {
  const auto& list = actions.at(static_cast<size_t>(rank));
  int pending = 0, most = 0;
  for (const Action& a : list) {
    if (a.type == ActionType::I) most = std::max(most, ++pending);
    if (a.type == ActionType::W) --pending;
  }
  return most;
}

std::string to_csv(const Schedule& schedule) {
  std::ostringstream os;
  for (const auto& list : schedule.actions) {
    for (size_t i = 0; i < list.size(); ++i) os << (i ? "," : "") << to_string(list[i]);
    os << "\n";
  }
  return os.str();
}

Schedule schedule_from_csv(const std::string& text, int microbatches, int stages) {
  Schedule s;
  s.name = "csv";
  std::istringstream in(text);
  std::string line;
  int max_stage = -1, max_mb = -1;
  while (std::getline(in, line)) {
    std::string row = trim(line);
    if (!row.empty() && row[0] == '#') continue;
    const int rank = static_cast<int>(s.actions.size());
    std::vector<Action>& list = s.actions.emplace_back();
    std::vector<std::string> cells = split(row, ',');
    for (const std::string& raw : cells) {
      std::string cell = trim(raw);
      if (cell.empty()) continue;
      list.push_back(parse_action(cell, cat("CSV rank ", rank, " step ", list.size())));
      max_stage = std::max(max_stage, list.back().stage);
      max_mb = std::max(max_mb, list.back().microbatch);
    }
  }
  // Trailing blank lines are not ranks.
  while (!s.actions.empty() && s.actions.back().empty()) s.actions.pop_back();
  require(!s.actions.empty(), "schedule CSV: no actions (expected one row per rank)");
  s.ranks = static_cast<int>(s.actions.size());
  s.stages = stages > 0 ? stages : max_stage + 1;
  s.microbatches = microbatches > 0 ? microbatches : max_mb + 1;
  // Placement: the rank whose row first runs the stage. A stage run on two
  // ranks, or never run, is reported by validate() with the grid.
  s.stage_rank.assign(static_cast<size_t>(std::max(s.stages, max_stage + 1)), -1);
  for (int r = 0; r < s.ranks; ++r)
    for (const Action& a : s.actions[r])
      if (s.stage_rank[a.stage] < 0) s.stage_rank[a.stage] = r;
  s.stage_rank.resize(static_cast<size_t>(s.stages));
  return s;
}

std::string format_grid(const Schedule& schedule, const std::vector<GridMark>& marks) {
  const size_t steps = schedule.max_steps();
  auto marked = [&](int rank, int step) {
    return std::any_of(marks.begin(), marks.end(), [&](const GridMark& m) { return m.rank == rank && m.step == step; });
  };
  size_t width = 3;
  for (const auto& list : schedule.actions)
    for (const Action& a : list) width = std::max(width, to_string(a).size());
  width += 2;  // room for the brackets of a marked cell
  auto pad = [&](const std::string& s) { return s + std::string(width > s.size() ? width - s.size() : 0, ' '); };

  std::ostringstream os;
  const std::string label = "rank " + std::to_string(schedule.ranks - 1);
  os << std::string(label.size() + 3, ' ');
  for (size_t t = 0; t < steps; ++t) os << pad(" " + std::to_string(t));
  os << "\n";
  for (int r = 0; r < static_cast<int>(schedule.actions.size()); ++r) {
    std::string name = "rank " + std::to_string(r);
    os << (marked(r, -1) ? ">" : " ") << name << std::string(label.size() + 2 - name.size(), ' ');
    const auto& list = schedule.actions[r];
    for (size_t t = 0; t < list.size(); ++t) {
      std::string cell = to_string(list[t]);
      os << pad(marked(r, static_cast<int>(t)) ? "[" + cell + "]" : " " + cell);
    }
    for (const GridMark& m : marks)
      if (m.rank == r && m.step >= static_cast<int>(list.size())) os << pad("[...]");
    os << "\n";
  }
  return os.str();
}

}  // namespace sextant::pp
