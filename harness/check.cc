#include "harness/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "harness/error.h"
#include "harness/npy.h"
#include "harness/rng.h"
#include "harness/strings.h"

namespace sextant {

bool TensorCheck::dist_pass() const { return nonfinite == 0 && error <= bound && systematic_pass; }

std::string TensorCheck::failed_side() const {
  if (pass) return "";
  if (!base_pass && !dist_pass()) return "both";
  return base_pass ? "distributed" : "baseline";
}

void to_json(nlohmann::json& j, const TensorCheck& c) {
  auto finite = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  j = {{"name", c.name},
       {"op", c.op},
       {"error", finite(c.error)},
       {"base_error", finite(c.base_error)},
       {"base_bound", c.base_bound},
       {"bound", c.bound},
       {"floor", c.floor},
       {"max_abs", finite(c.max_abs)},
       {"nonfinite", c.nonfinite},
       {"count", c.count},
       {"base_pass", c.base_pass},
       {"pass", c.pass}};
  if (c.growth != 1) j["growth"] = c.growth;
  if (!c.off_by_rank.empty()) {
    nlohmann::json shares = nlohmann::json::array();
    for (const TensorCheck::RankShare& r : c.off_by_rank)
      shares.push_back({{"rank", r.rank}, {"off", r.off}, {"owned", r.owned}});
    j["off_by_rank"] = shares;
  }
  if (c.systematic.estimated)
    j["systematic"] = {
        {"scale", c.systematic.scale},        {"scale_se", c.systematic.scale_se},   {"scale_limit", c.scale_limit},
        {"offset", c.systematic.offset},      {"offset_se", c.systematic.offset_se}, {"offset_limit", c.offset_limit},
        {"dist_scale", finite(c.dist_scale)}, {"base_scale", finite(c.base_scale)},  {"pass", c.systematic_pass}};
  if (!c.pass) j["failed_side"] = c.failed_side();
}

void to_json(nlohmann::json& j, const Conformance& c) {
  j = {{"status", c.status}, {"tensors", c.tensors}, {"failures", c.failures}, {"notes", c.notes}};
  if (c.checked > 0) {
    j["wrong"] = c.wrong;
    j["checked"] = c.checked;
  }
}

std::string dump_folder_name(const std::string& case_id) {
  constexpr size_t kMaxLength = 120, kPrefix = 100;
  std::string name = case_id;
  for (char& c : name) c = (c == ' ' || c == '/' || c == '=') ? '_' : c;
  if (name.size() <= kMaxLength) return name;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(tensor_id(case_id)));
  return cat(name.substr(0, kPrefix), "-", hash);
}

Checker::Checker(Communicator& host_comm, DType dtype, DumpTarget dump)
    : comm_(host_comm), dtype_(dtype), dump_(std::move(dump)) {
  if (!dump_.dir.empty() && is_root()) {
    std::filesystem::path dir = std::filesystem::path(dump_.dir) / dump_.case_dir;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "params.json") << dump_.params.dump(2) << "\n";
  }
}

void Checker::dump(const std::string& file, const Tensor& t) {
  if (dump_.dir.empty() || !t.defined()) return;
  write_npy((std::filesystem::path(dump_.dir) / dump_.case_dir / (file + ".npy")).string(), t);
}

void Checker::compare(const std::string& name, OpClass op, const Tensor& dist, const Tensor& base, const Tensor& ref,
                      double growth) {
  compare(name, op, dist, base, ref, ref, growth);
}

namespace {
// dist - ref_dist + ref_base in f64: its difference from ref_base is dist's from its own reference.
Tensor shifted_to(const Tensor& dist, const Tensor& ref_dist, const Tensor& ref_base) {
  Tensor out = dist.to(DType::f64).clone();
  const Tensor a = ref_dist.to(DType::f64), b = ref_base.to(DType::f64);
  for (int64_t i = 0; i < out.numel(); ++i) out.data<double>()[i] += b.data<double>()[i] - a.data<double>()[i];
  return out;
}
// Which ranks own the elements where dist misses (see TensorCheck::off_by_rank).
std::vector<TensorCheck::RankShare> off_by_rank(const Tensor& dist, const Tensor& base, const Tensor& ref,
                                                double floor) {
  const std::vector<int32_t>* owners = dist.owner_ranks();
  if (!owners || static_cast<int64_t>(owners->size()) != dist.numel()) return {};
  const Tensor d = dist.to(DType::f64), b = base.to(DType::f64), r = ref.to(DType::f64);
  const double *pd = d.data<double>(), *pb = b.data<double>(), *pr = r.data<double>();
  double sum = 0;
  for (int64_t i = 0; i < r.numel(); ++i) sum += pr[i] * pr[i];
  const double scale = floor * std::sqrt(sum / std::max<int64_t>(1, r.numel()));
  std::map<int, TensorCheck::RankShare> by_rank;
  for (int64_t i = 0; i < d.numel(); ++i) {
    const int owner = (*owners)[i];
    TensorCheck::RankShare& share = by_rank[owner];
    share.rank = owner;
    ++share.owned;
    const double error = std::abs(pd[i] - pr[i]);
    if (!std::isfinite(pd[i]) || error > std::max(2 * std::abs(pb[i] - pr[i]), scale)) ++share.off;
  }
  std::vector<TensorCheck::RankShare> out;
  for (const auto& [rank, share] : by_rank)
    if (share.off > 0) out.push_back(share);
  return out;
}

std::string describe_shares(const std::vector<TensorCheck::RankShare>& shares) {
  std::vector<std::string> parts;
  for (const TensorCheck::RankShare& s : shares)
    parts.push_back(cat(s.rank < 0 ? std::string("no rank") : cat("rank ", s.rank), " ", s.off, " of ", s.owned));
  return join(parts, ", ");
}

}  // namespace

void Checker::compare(const std::string& name, OpClass op, const Tensor& dist, const Tensor& base,
                      const Tensor& ref_dist, const Tensor& ref_base, double growth) {
  if (!(growth >= 1)) throw RuntimeError(cat("Checker::compare ", name, ": growth ", growth, " must be at least 1"));
  compare_within(name, tolerance_bound(dtype_, op, growth), dist, base, ref_dist, ref_base);
}

void Checker::compare(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base,
                      const Tensor& ref) {
  compare_within(name, bound, dist, base, ref, ref);
}

void Checker::compare(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base,
                      const Tensor& ref_dist, const Tensor& ref_base) {
  compare_within(name, bound, dist, base, ref_dist, ref_base);
}

void Checker::compare_within(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base,
                             const Tensor& ref_dist, const Tensor& ref_base) {
  if (!is_root()) throw RuntimeError("Checker::compare is for the group's rank 0");
  const OpClass op = bound.op;
  const double growth = bound.growth;
  if (ref_dist.shape() != ref_base.shape())
    throw RuntimeError(cat("Checker::compare ", name, ": references of shapes ", shape_string(ref_dist.shape()),
                           " and ", shape_string(ref_base.shape())));
  const bool one_ref = &ref_dist == &ref_base;
  const Tensor& ref = ref_base;
  const ErrorStats d = sextant::compare(dist, ref_dist);
  const ErrorStats b = sextant::compare(base, ref_base);
  TensorCheck c;
  c.name = name;
  c.op = bound.row;
  c.error = d.rel_l2;
  c.base_error = b.rel_l2;
  c.growth = growth;
  c.base_bound = bound.gate;
  c.floor = bound.floor;
  c.bound = std::max(2.0 * (b.nonfinite ? 0.0 : b.rel_l2), c.floor);
  c.max_abs = d.max_abs;
  c.nonfinite = d.nonfinite;
  c.count = d.count;
  c.base_pass = b.nonfinite == 0 && c.base_error <= c.base_bound;
  const SystematicRule& rule = systematic_rule();
  if (rule.applies_to(op))
    c.systematic = systematic_difference(one_ref ? dist : shifted_to(dist, ref_dist, ref_base), base, ref, rule.groups,
                                         rule.min_elements);
  if (c.systematic.estimated) {
    const double min_effect = rule.min_effect_fraction * bound.floor;
    c.dist_scale = scale_against(dist, ref_dist);
    c.base_scale = scale_against(base, ref);
    c.scale_limit = std::max(rule.k * c.systematic.scale_se, min_effect);
    c.offset_limit = std::max(rule.k * c.systematic.offset_se, min_effect);
    c.systematic_pass =
        std::abs(c.systematic.scale) <= c.scale_limit && std::abs(c.systematic.offset) <= c.offset_limit;
  }
  const bool norm_pass = d.nonfinite == 0 && c.error <= c.bound;
  c.pass = c.base_pass && norm_pass && c.systematic_pass;
  if (!norm_pass || !c.systematic_pass) c.off_by_rank = off_by_rank(dist, base, ref_dist, c.floor);
  const std::string owners =
      c.off_by_rank.empty() ? std::string() : cat("; off elements by owning rank: ", describe_shares(c.off_by_rank));
  if (!c.base_pass)
    result_.failures.push_back(cat(name, ": baseline (one device) error ", c.base_error, " > gate ", c.base_bound,
                                   " of the ", c.op, " row for ", dtype_name(dtype_),
                                   b.nonfinite ? cat(" (", b.nonfinite, " NaN/Inf)") : std::string(),
                                   ": the kernel itself is wrong"));
  if (!norm_pass)
    result_.failures.push_back(cat(name, ": distributed error ", c.error, " > bound ", c.bound, " = max(2 x baseline ",
                                   c.base_error, ", floor ", c.floor, ")",
                                   d.nonfinite ? cat(" (", d.nonfinite, " NaN/Inf)") : std::string(), owners));
  if (!c.systematic_pass) {
    const Systematic& sy = c.systematic;
    const bool scale = std::abs(sy.scale) > c.scale_limit;
    result_.failures.push_back(cat(name, ": distributed ", scale ? "scale" : "mean signed error",
                                   " differs from the one-device run's by ", scale ? sy.scale : sy.offset, " (",
                                   std::abs(scale ? sy.scale / sy.scale_se : sy.offset / sy.offset_se),
                                   " standard errors; limit ", scale ? c.scale_limit : c.offset_limit,
                                   "): a systematic error below what the norm bound sees", norm_pass ? owners : ""));
  }
  result_.tensors.push_back(c);
  any_check_ = true;
  dump(name + ".dist", dist);
  dump(name + ".base", base);
  dump(name + ".ref", ref_dist);
  if (!one_ref) dump(name + ".ref_base", ref_base);
}

void Checker::exact(const std::string& name, int64_t wrong, int64_t checked) {
  local_wrong_ += wrong;
  local_checked_ += checked;
  if (wrong > 0) local_failures_.push_back(cat(name, ": ", wrong, " wrong elements on rank ", comm_.rank()));
}

void Checker::fail(const std::string& reason) { local_failures_.push_back(reason); }

void Checker::note(const std::string& key, nlohmann::json value) { result_.notes[key] = std::move(value); }

void Checker::input(const std::string& name, const Tensor& tensor) { dump(name, tensor); }

Conformance Checker::finish() {
  // Sum exact counts; gather every rank's failure lines on root.
  double counts[3] = {static_cast<double>(local_wrong_), static_cast<double>(local_checked_),
                      static_cast<double>(local_failures_.size())};
  comm_.all_reduce(counts, counts, 3, DType::f64, ReduceOp::sum);
  result_.wrong = static_cast<int64_t>(counts[0]);
  result_.checked = static_cast<int64_t>(counts[1]);
  if (counts[2] > 0) {
    std::string mine;
    for (const std::string& f : local_failures_) mine += f + "\n";
    for (const std::string& text : all_gather_strings(comm_, mine))
      for (const std::string& line : split(text, '\n'))
        if (is_root() && !line.empty()) result_.failures.push_back(line);
  }
  // Root decides; everyone learns the verdict.
  double verdict = 0;  // 0 skip, 1 pass, 2 fail
  if (is_root()) {
    bool checked_any = any_check_ || result_.checked > 0 || !result_.failures.empty();
    verdict = !checked_any ? 0 : result_.failures.empty() ? 1 : 2;
  }
  comm_.broadcast(&verdict, 1, DType::f64, 0);
  result_.status = std::string(verdict == 0 ? kSkip : verdict == 1 ? kPass : kFail);
  return result_;
}

}  // namespace sextant
