#include "harness/grid.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

std::string to_string(const ParallelConfig& c) {
  std::string s = cat("tp", c.tp, " cp", c.cp, " pp", c.pp, " dp", c.dp);
  if (c.ep > 1 || c.etp > 0) s += cat(" ep", c.ep, " etp", c.expert_tp());
  if (c.vpp > 1) s += cat(" vpp", c.vpp);
  if (c.sp) s += " sp";
  return s;
}

void to_json(nlohmann::json& j, const ParallelConfig& c) {
  j = {{"tp", c.tp}, {"cp", c.cp},           {"pp", c.pp},   {"dp", c.dp},
       {"ep", c.ep}, {"etp", c.expert_tp()}, {"vpp", c.vpp}, {"sp", c.sp}};
}

void from_json(const nlohmann::json& j, ParallelConfig& c) {
  c.tp = j.value("tp", 1);
  c.cp = j.value("cp", 1);
  c.pp = j.value("pp", 1);
  c.dp = j.value("dp", 1);
  c.ep = j.value("ep", 1);
  c.etp = j.value("etp", 0);
  c.vpp = j.value("vpp", 1);
  c.sp = j.value("sp", false);
  c.order = j.value("order", std::string("tp-cp-ep-dp-pp"));
}

namespace {
const std::vector<std::string> kDims = {"tp", "cp", "ep", "dp", "pp"};

std::vector<std::string> parse_order(const std::string& order) {
  std::vector<std::string> names = split(order, '-');
  std::vector<std::string> sorted = names, expected = kDims;
  std::sort(sorted.begin(), sorted.end());
  std::sort(expected.begin(), expected.end());
  if (sorted != expected)
    throw UsageError(cat("--order '", order, "' must list tp, cp, ep, dp, pp once each, joined by '-'"));
  return names;
}
}  // namespace

void validate(const ParallelConfig& c, int world_size) {
  require_positive("--tp", c.tp);
  require_positive("--cp", c.cp);
  require_positive("--pp", c.pp);
  require_positive("--dp", c.dp);
  require_positive("--ep", c.ep);
  require_positive("--vpp", c.vpp);
  if (c.etp < 0) throw UsageError(cat("--etp ", c.etp, " must be positive (or 0 for the same as --tp)"));
  parse_order(c.order);
  // Products in int64: each size is an int, four of them may not fit one.
  const int64_t world = int64_t{c.tp} * c.cp * c.pp * c.dp;
  if (world != world_size)
    throw UsageError(cat("world size ", world_size, " must equal tp*cp*pp*dp = ", c.tp, "*", c.cp, "*", c.pp, "*", c.dp,
                         " = ", world));
  const int64_t dense_no_pp = int64_t{c.tp} * c.cp * c.dp, expert = int64_t{c.expert_tp()} * c.ep;
  if (dense_no_pp % expert != 0)
    throw UsageError(cat("--etp ", c.expert_tp(), " x --ep ", c.ep, " = ", expert,
                         " must divide tp*cp*dp = ", dense_no_pp, " (the expert grid folds into the dense one)"));
}

std::string dim_name(Dim dim) {
  switch (dim) {
    case Dim::tp: return "tp";
    case Dim::cp: return "cp";
    case Dim::dp: return "dp";
    case Dim::pp: return "pp";
    case Dim::ep: return "ep";
    case Dim::etp: return "etp";
    case Dim::edp: return "edp";
    case Dim::dp_cp: return "dp_cp";
    case Dim::tp_cp: return "tp_cp";
  }
  return "?";
}

Dim parse_dim(const std::string& name) {
  for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp, Dim::ep, Dim::etp, Dim::edp, Dim::dp_cp, Dim::tp_cp})
    if (dim_name(d) == name) return d;
  throw UsageError(cat("--group '", name, "' must be one of world, tp, cp, dp, pp, ep, etp, edp, dp_cp, tp_cp"));
}

std::vector<int> RankGrid::Layout::coords(int rank) const {
  std::vector<int> out(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return out;
}

int RankGrid::Layout::rank_of(const std::vector<int>& coords) const {
  int rank = 0, stride = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    rank += coords[i] * stride;
    stride *= sizes[i];
  }
  return rank;
}

RankGrid::RankGrid(const ParallelConfig& config, int world_size) : config_(config), world_(world_size) {
  validate(config, world_size);
  const std::vector<std::string> order = parse_order(config.order);
  dense_.names = order;
  expert_.names = order;
  for (const std::string& n : order) {
    // Dense: ep is 1. Expert: tp -> etp, cp -> 1, dp -> edp.
    dense_.sizes.push_back(
        find_named<int>({{"tp", config.tp}, {"cp", config.cp}, {"dp", config.dp}, {"pp", config.pp}}, n).value_or(1));
    expert_.sizes.push_back(
        find_named<int>({{"tp", config.expert_tp()}, {"ep", config.ep}, {"dp", config.edp()}, {"pp", config.pp}}, n)
            .value_or(1));
  }
  for (int r = 0; r < world_; ++r)
    if (group_in(dense_, {"pp"}, r) != group_in(expert_, {"pp"}, r))
      throw UsageError(cat("--order '", config.order,
                           "' gives the expert layout other PP groups than the dense layout; put pp last"));
}

namespace {
int index_of(const std::vector<std::string>& names, const std::string& n) {
  return static_cast<int>(std::find(names.begin(), names.end(), n) - names.begin());
}
}  // namespace

RankCoords RankGrid::coords(int rank) const {
  if (rank < 0 || rank >= world_) throw RuntimeError(cat("rank ", rank, " outside world of ", world_));
  std::vector<int> d = dense_.coords(rank), e = expert_.coords(rank);
  auto at = [](const Layout& l, const std::vector<int>& c, const char* n) { return c[index_of(l.names, n)]; };
  RankCoords rc;
  rc.tp = at(dense_, d, "tp");
  rc.cp = at(dense_, d, "cp");
  rc.dp = at(dense_, d, "dp");
  rc.pp = at(dense_, d, "pp");
  rc.etp = at(expert_, e, "tp");
  rc.ep = at(expert_, e, "ep");
  rc.edp = at(expert_, e, "dp");
  return rc;
}

const RankGrid::Layout& RankGrid::layout_for(Dim dim) const {
  return (dim == Dim::ep || dim == Dim::etp || dim == Dim::edp) ? expert_ : dense_;
}

std::vector<std::string> RankGrid::members_of(Dim dim) const {
  switch (dim) {
    case Dim::tp:
    case Dim::etp: return {"tp"};
    case Dim::cp: return {"cp"};
    case Dim::dp:
    case Dim::edp: return {"dp"};
    case Dim::pp: return {"pp"};
    case Dim::ep: return {"ep"};
    case Dim::dp_cp: return {"dp", "cp"};
    case Dim::tp_cp: return {"tp", "cp"};
  }
  return {};
}

std::vector<int> RankGrid::group(Dim dim, int rank) const { return group_in(layout_for(dim), members_of(dim), rank); }

std::vector<int> RankGrid::group_in(const Layout& layout, const std::vector<std::string>& vary, int rank) {
  std::vector<int> base = layout.coords(rank);
  std::vector<int> varying;  // positions in the layout that range over the group
  for (const std::string& n : vary) varying.push_back(index_of(layout.names, n));
  int count = 1;
  for (int v : varying) count *= layout.sizes[v];
  std::vector<int> members;
  for (int k = 0; k < count; ++k) {
    std::vector<int> c = base;
    int rest = k;
    for (int v : varying) {
      c[v] = rest % layout.sizes[v];
      rest /= layout.sizes[v];
    }
    members.push_back(layout.rank_of(c));
  }
  std::sort(members.begin(), members.end());
  return members;
}

std::vector<std::vector<int>> RankGrid::groups(Dim dim) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(world_, false);
  for (int r = 0; r < world_; ++r) {
    if (seen[r]) continue;
    out.push_back(group(dim, r));
    for (int m : out.back()) seen[m] = true;
  }
  return out;
}

int RankGrid::color(Dim dim, int rank) const { return group(dim, rank).front(); }

int RankGrid::index_in_group(Dim dim, int rank) const {
  std::vector<int> g = group(dim, rank);
  return static_cast<int>(std::find(g.begin(), g.end(), rank) - g.begin());
}

}  // namespace sextant
