#include "kernels/pipeline/p2p_order.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/simulate.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {

Crossing input_crossing(const Action& a) {
  return a.type == ActionType::F ? Crossing{MessageKind::activation, a.stage - 1, a.stage - 1}
                                 : Crossing{MessageKind::gradient, a.stage, a.stage + 1};
}

Crossing output_crossing(const Action& a) {
  return a.type == ActionType::F ? Crossing{MessageKind::activation, a.stage, a.stage + 1}
                                 : Crossing{MessageKind::gradient, a.stage - 1, a.stage - 1};
}

// Each message from the side that consumes it; the gradient for stage s is
// made by B or I of s+1, whichever the schedule runs.
std::vector<Message> step_messages(const Schedule& schedule) {
  const ScheduleIndex index(schedule);
  std::vector<Message> messages;
  for (int r = 0; r < schedule.ranks; ++r) {
    const auto& actions = schedule.actions[r];
    for (int t = 0; t < static_cast<int>(actions.size()); ++t) {
      const Action& a = actions[t];
      if (a.type == ActionType::W) continue;
      const Crossing in = input_crossing(a);
      if (in.peer_stage < 0 || in.peer_stage >= schedule.stages || schedule.stage_rank[in.peer_stage] == r) continue;
      const Action producer = in.kind == MessageKind::activation ? Action{in.peer_stage, ActionType::F, a.microbatch}
                                                                 : index.gradient_producer(a.stage, a.microbatch);
      const Step made = index.find(producer);
      if (!made.found()) throw RuntimeError(cat("pipeline: nothing produces the input of ", to_string(a)));
      messages.push_back({in.kind, in.boundary, a.microbatch, made.rank, r, made.step, t});
    }
  }
  return messages;
}

std::vector<std::vector<P2pOp>> p2p_order(const Schedule& schedule, const std::vector<Message>& messages) {
  // 1. A feasible timeline (unit costs; B = I + W = 2).
  const Timeline timeline = simulate(schedule, CostModel::uniform(schedule.stages, 1, 1, 1)).timeline;
  auto produced = [&](const Message& m) { return timeline.ranks[m.from][m.produced_at].end; };
  // 2. One global order.
  std::vector<int> order(messages.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int k) {
    const Message& m = messages[k];
    return std::tuple(produced(m), m.from, m.to, static_cast<int>(m.kind), m.boundary, m.microbatch);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  // 3. Each rank issues its part just before its first action starting at or after e_k.
  auto before_step = [&](int rank, double e) {
    const auto& row = timeline.ranks[rank];
    return static_cast<int>(
        std::partition_point(row.begin(), row.end(), [e](const TimedAction& a) { return a.start < e; }) - row.begin());
  };
  std::vector<std::vector<P2pOp>> plan(static_cast<size_t>(schedule.ranks));
  for (int k : order) {
    const Message& m = messages[k];
    const double e = produced(m);
    const int send_at = before_step(m.from, e), recv_at = before_step(m.to, e);
    // The argument above, checked: a send follows its producer, a receive precedes its consumer.
    if (send_at != m.produced_at + 1 || recv_at > m.consumed_at)
      throw RuntimeError(cat("pipeline: message order: step ", send_at, "/", recv_at, " for a message made at step ",
                             m.produced_at, " and used at step ", m.consumed_at, " (bug)"));
    plan[m.from].push_back({k, true, send_at});
    plan[m.to].push_back({k, false, recv_at});
  }
  return plan;
}

namespace {

// An operation's place: rank and index into its ops.
using OpRef = std::pair<int, int>;

std::string op_text(const WireOp& op, int rank, const std::function<std::string(int)>& describe) {
  return cat("rank ", rank, (op.send ? " sends " : " receives "), describe ? describe(op.tag) : cat("tag ", op.tag),
             (op.send ? " to rank " : " from rank "), op.peer, " (issued before its step ", op.before_step, ")");
}

// Pairs every op with its partner: the i-th send from a to b with the i-th
// receive at b from a, as NCCL matches them.
std::vector<std::vector<OpRef>> match_in_order(const std::vector<std::vector<WireOp>>& plans,
                                               const std::function<std::string(int)>& describe) {
  const int n = static_cast<int>(plans.size());
  std::map<std::pair<int, int>, std::vector<OpRef>> sends, recvs;  // (from, to) -> ops in order
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < static_cast<int>(plans[r].size()); ++i) {
      const WireOp& op = plans[r][i];
      if (op.peer < 0 || op.peer >= n || op.peer == r)
        throw RuntimeError(cat("pipeline: message order: ", op_text(op, r, describe), ": no such peer"));
      (op.send ? sends[{r, op.peer}] : recvs[{op.peer, r}]).push_back({r, i});
    }
  std::vector<std::vector<OpRef>> partner(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) partner[r].assign(plans[r].size(), {-1, -1});
  for (const auto& [pair, s] : sends) {
    const std::vector<OpRef>& rv = recvs[pair];
    for (size_t i = 0; i < std::max(s.size(), rv.size()); ++i) {
      if (i >= s.size() || i >= rv.size()) {
        const OpRef lone = i < s.size() ? s[i] : rv[i];
        throw RuntimeError(cat("pipeline: message order: ",
                               op_text(plans[lone.first][lone.second], lone.first, describe), " but has no partner"));
      }
      const WireOp &a = plans[s[i].first][s[i].second], &b = plans[rv[i].first][rv[i].second];
      if (a.tag != b.tag || a.count != b.count)
        throw RuntimeError(cat("pipeline: message order: message ", i, " from rank ", pair.first, " to rank ",
                               pair.second, " is ", describe ? describe(a.tag) : cat("tag ", a.tag), " (", a.count,
                               " elements) at the sender but ", describe ? describe(b.tag) : cat("tag ", b.tag), " (",
                               b.count, " elements) at the receiver; NCCL matches in issue order"));
      partner[s[i].first][s[i].second] = rv[i];
      partner[rv[i].first][rv[i].second] = s[i];
    }
  }
  for (const auto& [pair, rv] : recvs)
    if (!sends.count(pair) && !rv.empty())
      throw RuntimeError(cat("pipeline: message order: ",
                             op_text(plans[rv[0].first][rv[0].second], rv[0].first, describe), " but has no partner"));
  return partner;
}

}  // namespace

// The dry run: each rank stands in its first unfinished group (everything
// before it has finished); an op finishes when its partner's rank stands in
// the group holding the partner; a group finishes when all its ops have.
void check_stream_order(const std::vector<std::vector<WireOp>>& plans,
                        const std::function<std::string(int tag)>& describe) {
  const int n = static_cast<int>(plans.size());
  const std::vector<std::vector<OpRef>> partner = match_in_order(plans, describe);
  std::vector<std::vector<bool>> done(static_cast<size_t>(n));
  std::vector<int> head(static_cast<size_t>(n), 0);  // first op of the current group
  for (int r = 0; r < n; ++r) done[r].assign(plans[r].size(), false);
  auto group_end = [&](int r, int first) {
    int i = first;
    while (i < static_cast<int>(plans[r].size()) && plans[r][i].before_step == plans[r][first].before_step) ++i;
    return i;
  };
  auto in_current_group = [&](OpRef op) {
    const int first = head[op.first];
    return first < static_cast<int>(plans[op.first].size()) && op.second >= first &&
           op.second < group_end(op.first, first);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      const int first = head[r];
      if (first >= static_cast<int>(plans[r].size())) continue;
      const int last = group_end(r, first);
      bool all = true;
      for (int i = first; i < last; ++i) {
        if (!done[r][i] && in_current_group(partner[r][i])) {
          done[r][i] = done[partner[r][i].first][partner[r][i].second] = true;
          progress = true;
        }
        all = all && done[r][i];
      }
      if (all) head[r] = last, progress = true;
    }
  }
  std::string stuck;
  for (int r = 0; r < n; ++r)
    for (int i = head[r];
         i < static_cast<int>(plans[r].size()) && plans[r][i].before_step == plans[r][head[r]].before_step; ++i)
      if (!done[r][i]) {
        stuck += cat("; ", op_text(plans[r][i], r, describe));
        break;  // the first waiting op of each stuck rank
      }
  if (!stuck.empty())
    throw RuntimeError(
        cat("pipeline: message order deadlocks under NCCL's rules (in-order matching, one stream)", stuck));
}

}  // namespace sextant::pp
