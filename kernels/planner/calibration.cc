#include "kernels/planner/calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::plan {

namespace {

// Least squares of rows x . c = 1 over the coefficient subsets whose
// solution is non-negative (rows are already scaled by 1 / measured time, so
// the residual is the relative error). Small systems only: 2^n subsets.
template <size_t N>
std::array<double, N> nonnegative_least_squares(const std::vector<std::array<double, N>>& rows) {
  std::array<double, N> best{};
  double best_residual = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < (1u << N); ++mask) {
    std::vector<size_t> used;
    for (size_t i = 0; i < N; ++i)
      if (mask & (1u << i)) used.push_back(i);
    const size_t u = used.size();
    // Normal equations A c = b over the used columns, Gaussian elimination.
    std::vector<std::vector<double>> a(u, std::vector<double>(u + 1, 0.0));
    for (const auto& r : rows)
      for (size_t i = 0; i < u; ++i) {
        for (size_t j = 0; j < u; ++j) a[i][j] += r[used[i]] * r[used[j]];
        a[i][u] += r[used[i]];
      }
    bool singular = false;
    for (size_t col = 0; col < u && !singular; ++col) {
      size_t pivot = col;
      for (size_t i = col + 1; i < u; ++i)
        if (std::abs(a[i][col]) > std::abs(a[pivot][col])) pivot = i;
      if (std::abs(a[pivot][col]) < 1e-300) singular = true;
      std::swap(a[col], a[pivot]);
      for (size_t i = 0; i < u && !singular; ++i) {
        if (i == col) continue;
        const double f = a[i][col] / a[col][col];
        for (size_t j = col; j <= u; ++j) a[i][j] -= f * a[col][j];
      }
    }
    if (singular) continue;
    std::array<double, N> c{};
    bool negative = false;
    for (size_t i = 0; i < u; ++i) {
      c[used[i]] = a[i][u] / a[i][i];
      negative = negative || c[used[i]] < 0;
    }
    if (negative) continue;
    double residual = 0;
    for (const auto& r : rows) {
      double x = 0;
      for (size_t i = 0; i < N; ++i) x += r[i] * c[i];
      residual += (x - 1) * (x - 1);
    }
    if (residual < best_residual) best_residual = residual, best = c;
  }
  return best;
}

std::string shape_key(double m, double n, double k, bool ta, bool tb) {
  return cat(std::llround(m), " ", std::llround(n), " ", std::llround(k), " ", ta ? 1 : 0, " ", tb ? 1 : 0);
}

double inverse_or_zero(double x) { return x > 0 ? 1.0 / x : 0.0; }

}  // namespace

double GemmModel::seconds(double m, double n, double k, bool ta, bool tb) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  if (auto it = measured.find(shape_key(m, n, k, ta, tb)); it != measured.end()) return it->second;
  return overhead_s + 2 * m * n * k * inverse_or_zero(flops_per_s) +
         4 * (m * k + k * n + m * n) * inverse_or_zero(bytes_per_s);
}

GemmModel fit_gemm(const std::vector<GemmSample>& samples) {
  std::vector<std::array<double, 3>> rows;
  GemmModel g;
  for (const GemmSample& s : samples) {
    if (!(s.seconds > 0)) continue;
    rows.push_back(
        {1 / s.seconds, 2 * s.m * s.n * s.k / s.seconds, 4 * (s.m * s.k + s.k * s.n + s.m * s.n) / s.seconds});
    g.measured[shape_key(s.m, s.n, s.k, s.ta, s.tb)] = s.seconds;
  }
  require(!rows.empty(), "calibration: no gemm measurement to fit");
  const std::array<double, 3> c = nonnegative_least_squares(rows);
  g.overhead_s = c[0];
  g.flops_per_s = inverse_or_zero(c[1]);
  g.bytes_per_s = inverse_or_zero(c[2]);
  return g;
}

double RateModel::seconds(double work) const { return work <= 0 ? 0 : overhead_s + work * inverse_or_zero(per_s); }

RateModel fit_rate(const std::vector<RateSample>& samples) {
  std::vector<std::array<double, 2>> rows;
  for (const RateSample& s : samples)
    if (s.seconds > 0 && s.work > 0) rows.push_back({1 / s.seconds, s.work / s.seconds});
  if (rows.empty()) return {};
  const std::array<double, 2> c = nonnegative_least_squares(rows);
  return {c[0], inverse_or_zero(c[1])};
}

double LinkModel::seconds(double bus_bytes) const {
  return latency_s + (bus_bytes > 0 ? bus_bytes * inverse_or_zero(busbw_Bps) : 0);
}

RateModel fit_link_as_rate(const std::vector<RateSample>& samples) { return fit_rate(samples); }

double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0;
  // nccl-tests' factors: 2(n-1)/n for all_reduce, 1 for send/recv, (n-1)/n for the rest.
  const double ring = static_cast<double>(n - 1) / n;
  return find_named<double>({{"all_reduce", 2 * ring}, {"sendrecv", 1.0}}, op).value_or(ring);
}

LinkModel Calibration::link(const std::string& op, bool inter_node, int n) const {
  if (n <= 1) return {};
  const std::string kind = inter_node ? "inter" : "intra";
  if (auto it = links.find(cat(op, "/", kind, "/", n)); it != links.end()) return it->second;
  // The nearest group size measured, of this kind first.
  const LinkModel* best = nullptr;
  int best_distance = std::numeric_limits<int>::max();
  for (int pass = 0; pass < 2 && !best; ++pass)
    for (const auto& [key, model] : links) {
      const std::vector<std::string> parts = split(key, '/');
      if (parts.size() != 3 || parts[0] != op || (pass == 0 && parts[1] != kind)) continue;
      const int distance = std::abs(std::atoi(parts[2].c_str()) - n);
      if (distance < best_distance) best_distance = distance, best = &model;
    }
  return best ? *best : LinkModel{};
}

double Calibration::collective_seconds(const std::string& op, bool inter_node, int n, double buffer_bytes) const {
  if (n <= 1) return 0;
  return link(op, inter_node, n).seconds(buffer_bytes * bus_factor(op, n));
}

void to_json(nlohmann::json& j, const Calibration& c) {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [key, l] : c.links) links[key] = {{"latency_s", l.latency_s}, {"busbw_GBps", l.busbw_Bps / 1e9}};
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [key, s] : c.gemm.measured) shapes[key] = s;
  j = {{"source", c.source},
       {"cores_per_node", c.cores_per_node},
       {"gemm",
        {{"overhead_s", c.gemm.overhead_s},
         {"gflops", c.gemm.flops_per_s / 1e9},
         {"GBps", c.gemm.bytes_per_s / 1e9},
         {"measured_s", shapes}}},
       {"attention", {{"overhead_s", c.attention.overhead_s}, {"gflops", c.attention.per_s / 1e9}}},
       {"elementwise", {{"overhead_s", c.elementwise.overhead_s}, {"GBps", c.elementwise.per_s / 1e9}}},
       {"moe_routing",
        {{"forward_overhead_s", c.moe_forward.overhead_s},
         {"forward_tokens_per_s", c.moe_forward.per_s},
         {"backward_overhead_s", c.moe_backward.overhead_s},
         {"backward_tokens_per_s", c.moe_backward.per_s}}},
       {"links", links},
       {"p2p_latency_s", c.p2p_latency_s},
       {"reference_s", c.reference_s}};
}

void from_json(const nlohmann::json& j, Calibration& c) {
  c.source = j.value("source", std::string());
  c.cores_per_node = j.value("cores_per_node", 1);
  const nlohmann::json& g = j.at("gemm");
  c.gemm.overhead_s = g.value("overhead_s", 0.0);
  c.gemm.flops_per_s = g.value("gflops", 0.0) * 1e9;
  c.gemm.bytes_per_s = g.value("GBps", 0.0) * 1e9;
  const nlohmann::json shapes = g.value("measured_s", nlohmann::json::object());
  for (const auto& [key, s] : shapes.items()) c.gemm.measured[key] = s.get<double>();
  c.attention = {j.at("attention").value("overhead_s", 0.0), j.at("attention").value("gflops", 0.0) * 1e9};
  c.elementwise = {j.at("elementwise").value("overhead_s", 0.0), j.at("elementwise").value("GBps", 0.0) * 1e9};
  const nlohmann::json moe = j.value("moe_routing", nlohmann::json::object());
  c.moe_forward = {moe.value("forward_overhead_s", 0.0), moe.value("forward_tokens_per_s", 0.0)};
  c.moe_backward = {moe.value("backward_overhead_s", 0.0), moe.value("backward_tokens_per_s", 0.0)};
  const nlohmann::json links = j.value("links", nlohmann::json::object());
  for (const auto& [key, l] : links.items())
    c.links[key] = {l.value("latency_s", 0.0), l.value("busbw_GBps", 0.0) * 1e9};
  c.p2p_latency_s = j.value("p2p_latency_s", 0.0);
  c.reference_s = j.value("reference_s", 0.0);
}

namespace {

bool usable(const nlohmann::json& c) {
  return !c.contains("error") && !c.contains("skipped") && c.value("fault", nlohmann::json()).is_null() &&
         c["conformance"].value("status", "") != "fail";
}
double metric(const nlohmann::json& c, const std::string& name) {
  const nlohmann::json& m = c["perf"]["metrics"];
  if (!m.contains(name)) return NAN;
  const nlohmann::json& v = m[name].is_object() && m[name].contains("value") ? m[name]["value"] : m[name];
  return v.is_number() ? v.get<double>() : NAN;
}
double median(const nlohmann::json& c, const std::string& region) {
  const nlohmann::json& t = c["perf"]["time"];
  return t.contains(region) ? t[region].value("median", std::nan("")) : NAN;
}

}  // namespace

Calibration calibration_from_results(const nlohmann::json& doc, const std::string& dtype) {
  const nlohmann::json& cases = doc.at("cases");
  // A sweep that calibrated itself recorded everything at once: the one at the most ranks.
  const nlohmann::json* sweep = nullptr;
  for (const nlohmann::json& c : cases)
    if (c["suite"] == "step" && c["case"] == "sweep" && usable(c) && c["perf"]["metrics"].contains("calibration") &&
        (!sweep || c["ranks"].get<int>() > (*sweep)["ranks"].get<int>()))
      sweep = &c;
  if (sweep) {
    Calibration cal = (*sweep)["perf"]["metrics"]["calibration"].get<Calibration>();
    cal.source =
        cat("step/sweep at ", (*sweep)["ranks"].get<int>(), " ranks of run ", doc["run"].value("id", std::string("?")));
    return cal;
  }
  Calibration cal;
  cal.source = cat("suites of run ", doc["run"].value("id", std::string("?")));
  cal.cores_per_node = doc["system"].value("cores", 1);
  std::vector<GemmSample> gemms;
  std::vector<RateSample> attention, elementwise;
  std::map<std::string, std::vector<RateSample>> links;
  for (const nlohmann::json& c : cases) {
    if (!usable(c) || c["perf"]["time"].empty()) continue;
    const std::string suite = c["suite"], name = c["case"];
    const nlohmann::json& p = c["params"];
    if (suite == "ops" && c["dtype"] == dtype) {
      if (name == "gemm")
        gemms.push_back({p["m"].get<double>(), p["n"].get<double>(), p["k"].get<double>(), median(c, "gemm"),
                         p.value("trans_a", false), p.value("trans_b", false)});
      if (name == "attention") {
        const double t = c["perf"]["time"].begin().value().value("median", std::nan(""));
        attention.push_back({metric(c, "gflops") * 1e9 * t, t});
      }
      if (name == "layernorm" || name == "gelu") {
        const double t = median(c, "fwd_bwd");
        elementwise.push_back({metric(c, "GBps") * 1e9 * t, t});
      }
    }
    if (suite == "collectives" && p.value("group_size", 1) > 1 && p.value("group", std::string("world")) == "world") {
      const int n = p["group_size"].get<int>();
      const bool inter = metric(c, "group_nodes") > 1;
      const double t = median(c, "run");
      links[cat(name, "/", inter ? "inter" : "intra", "/", n)].push_back(
          {p["bytes"].get<double>() * metric(c, "busbw_factor"), t});
    }
    if (suite == "pipeline" && std::isfinite(metric(c, "p2p_latency_s")) && c["parallel"].value("pp", 1) > 1)
      cal.p2p_latency_s =
          cal.p2p_latency_s > 0 ? std::min(cal.p2p_latency_s, metric(c, "p2p_latency_s")) : metric(c, "p2p_latency_s");
  }
  require(!gemms.empty(), cat("--calibrate: the results hold no passing ops/gemm case in ", dtype,
                              " (run the ops suite, or step/sweep, to calibrate)"));
  cal.gemm = fit_gemm(gemms);
  cal.gemm.measured.clear();  // the ops suite's shapes are not the model's: the fit speaks for them
  cal.attention = fit_rate(attention);
  cal.elementwise = fit_rate(elementwise);
  for (const auto& [key, samples] : links) {
    const RateModel r = fit_rate(samples);
    cal.links[key] = {r.overhead_s, r.per_s};
  }
  return cal;
}

}  // namespace sextant::plan
