#include "kernels/attention/dynamic_cp.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::cp {

namespace {

Bin bin_of(std::vector<int> sequences, int group, const std::vector<int64_t>& lengths) {
  Bin b{std::move(sequences), group, 0, 0};
  for (int i : b.sequences) b.tokens += lengths.at(i), b.longest = std::max(b.longest, lengths.at(i));
  return b;
}

// Places the bins, widest group first and within a group size costliest
// first, each on the aligned block of its size that is free earliest (the
// lowest such block on ties): the full-pool bins run back to back, and the
// narrower ones fill the blocks as they free up (mixing the sizes by cost
// alone leaves half the pool idle while a wide bin waits for its other half).
Schedule place(std::vector<Bin> bins, const std::vector<int64_t>& lengths, int ranks, const CostModel& cost) {
  Schedule s;
  s.bins = std::move(bins);
  s.busy.assign(static_cast<size_t>(ranks), 0.0);
  std::vector<double> free_at(static_cast<size_t>(ranks), 0.0);
  std::vector<int> by_cost(s.bins.size());
  std::iota(by_cost.begin(), by_cost.end(), 0);
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](int a, int b) {
    if (s.bins[a].group != s.bins[b].group) return s.bins[a].group > s.bins[b].group;
    return bin_cost(s.bins[a], lengths, cost) > bin_cost(s.bins[b], lengths, cost);
  });
  for (int b : by_cost) {
    const int g = s.bins[b].group;
    if (g < 1 || ranks % g != 0) throw RuntimeError(cat("dynamic CP: group ", g, " does not tile ", ranks, " ranks"));
    int best = 0;
    double best_ready = 0;
    for (int first = 0; first < ranks; first += g) {
      const double ready = *std::max_element(free_at.begin() + first, free_at.begin() + first + g);
      if (first == 0 || ready < best_ready) best = first, best_ready = ready;
    }
    const double c = bin_cost(s.bins[b], lengths, cost);
    s.order.push_back({b, best, best_ready, best_ready + c});
    for (int r = best; r < best + g; ++r) free_at[r] = best_ready + c, s.busy[r] += c;
    s.makespan = std::max(s.makespan, best_ready + c);
  }
  std::sort(s.order.begin(), s.order.end(), [](const Placement& a, const Placement& b) {
    return std::tie(a.start, a.first_rank, a.bin) < std::tie(b.start, b.first_rank, b.bin);
  });
  return s;
}

}  // namespace

std::vector<double> Schedule::busy_fraction() const {
  std::vector<double> f;
  for (double b : busy) f.push_back(makespan > 0 ? b / makespan : 0.0);
  return f;
}

std::vector<Placement> Schedule::placements_of(int rank) const {
  std::vector<Placement> mine;
  for (const Placement& p : order)
    if (rank >= p.first_rank && rank < p.first_rank + bins.at(p.bin).group) mine.push_back(p);
  return mine;
}

int group_for(int64_t longest, int64_t capacity, int max_group) {
  for (int g = 1; g <= max_group; g *= 2)
    if (static_cast<int64_t>(g) * capacity >= longest) return g;
  throw RuntimeError(cat("dynamic CP: a sequence of ", longest, " tokens does not fit ", max_group, " ranks of ",
                         capacity, " tokens"));
}

int64_t bin_pairs(const Bin& bin, const std::vector<int64_t>& lengths) {
  int64_t pairs = 0;
  for (int i : bin.sequences) pairs += lengths.at(i) * (lengths.at(i) + 1) / 2;
  return pairs;
}

double bin_cost(const Bin& bin, const std::vector<int64_t>& lengths, const CostModel& cost) {
  return static_cast<double>(bin_pairs(bin, lengths)) / bin.group + cost.ring_step * (bin.group - 1);
}

Schedule static_schedule(const std::vector<std::vector<int>>& microbatches, const std::vector<int64_t>& lengths, int cp,
                         int dp, const CostModel& cost) {
  std::vector<Bin> bins;
  for (const std::vector<int>& mb : microbatches) bins.push_back(bin_of(mb, cp, lengths));
  return place(std::move(bins), lengths, cp * dp, cost);
}

Schedule dynamic_schedule(const std::vector<int64_t>& lengths, int64_t capacity, int ranks, const CostModel& cost) {
  if (ranks < 1 || (ranks & (ranks - 1)) != 0)
    throw RuntimeError(cat("dynamic CP: the pool of ", ranks, " ranks must be a power of two"));
  std::vector<int> longest_first(lengths.size());
  std::iota(longest_first.begin(), longest_first.end(), 0);
  std::stable_sort(longest_first.begin(), longest_first.end(), [&](int a, int b) { return lengths[a] > lengths[b]; });
  std::vector<Bin> bins;
  for (int i : longest_first) {
    const int g = group_for(lengths[i], capacity, ranks);
    auto fits = [&](const Bin& b) { return b.group == g && b.tokens + lengths[i] <= g * capacity; };
    auto it = std::find_if(bins.begin(), bins.end(), fits);
    if (it == bins.end()) bins.push_back(bin_of({i}, g, lengths));
    else it->sequences.push_back(i), it->tokens += lengths[i];
  }
  return place(std::move(bins), lengths, ranks, cost);
}

}  // namespace sextant::cp
