// Instances: the full cross product of the dimensions is large, so a profile
// runs a short list of recipes that covers every value of every dimension
// (each layout, dispatcher and transport, top-k, expert count, routing,
// capacity mode and policy, pre-softmax), and `--set sweep=full` runs the cross product.
// Any option the user gives replaces that dimension in every recipe; a
// pinned parallel config (--ep/--etp) replaces the layouts.
#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

#include "harness/error.h"
#include "harness/strings.h"
#include "suites/moe/moe.h"

namespace sextant::moe_suite {

namespace {

// How a recipe lays the experts over g ranks: ep = g / ep_div, etp, edp = the rest.
enum class Layout { ep, ep_etp, ep_edp };

struct Recipe {
  const char* dispatcher;
  Layout layout;
  int topk, experts;
  const char* routing;
  double capacity_factor;  // 0: dropless
  const char* drop;
  bool pre_softmax;
  const char* transport = "peer_memory";
};

// Default list; the ci profile takes the entries marked below.
const Recipe kRecipes[] = {
    {"alltoall", Layout::ep, 2, 16, "uniform", 0, "none", false},  // ci
    {"alltoall", Layout::ep, 2, 16, "skewed", 0, "none", false},   // the skew pair of the one above
    {"alltoall", Layout::ep, 1, 8, "skewed", 1.0, "probability", false, "collectives"},  // ci
    {"alltoall", Layout::ep_etp, 2, 8, "uniform", 0, "none", true},                      // ci
    {"alltoall", Layout::ep_edp, 2, 16, "skewed", 1.1, "position", false},  // ci; 1.1: a capacity of 4.4 slots, ceil'd
    {"allgather", Layout::ep, 2, 8, "uniform", 0, "none", false},
    {"allgather", Layout::ep_etp, 1, 16, "skewed", 0.7, "probability", false},  // ci; below the mean load: drops
    {"allgather", Layout::ep_edp, 2, 8, "uniform", 0, "none", true},
};
const std::set<int> kCiRecipes = {0, 2, 3, 4, 6};

struct Sizes {
  int64_t tokens_per_rank, hidden, ffn;
};
Sizes sizes_for(Profile profile) {
  if (profile == Profile::ci) return {32, 32, 64};
  if (profile == Profile::qualify) return {256, 256, 512};  // the float64 reference is exact, on one rank
  return {64, 64, 128};
}

ParallelConfig layout_config(Layout layout, int g) {
  ParallelConfig p{1, 1, 1, g};
  p.ep = layout == Layout::ep ? g : std::max(1, g / 2);
  p.etp = layout == Layout::ep_etp ? 2 : 1;
  return p;
}

// The full cross product's recipes and layouts.
std::vector<std::pair<Recipe, ParallelConfig>> full_product(int g) {
  std::vector<std::pair<Recipe, ParallelConfig>> out;
  for (const char* d : {"alltoall", "allgather"})
    for (int ep : {1, 2, 4, 8})
      for (int etp : {1, 2}) {
        if (g % (ep * etp) != 0) continue;
        ParallelConfig p{1, 1, 1, g};
        p.ep = ep;
        p.etp = etp;
        for (int k : {1, 2})
          for (int e : {8, 16})
            for (const char* routing : {"uniform", "skewed"})
              for (bool capacity : {false, true})
                for (const char* transport : {"peer_memory", "collectives"}) {
                  if (std::string(d) == "allgather" && std::string(transport) == "collectives") continue;
                  out.push_back({{d, Layout::ep, k, e, routing, capacity ? 1.0 : 0.0, capacity ? "probability" : "none",
                                  false, transport},
                                 p});
                }
      }
  return out;
}

// The user's value of an option (--experts, --set key=value), or the recipe's;
// a value of the wrong type is a UsageError naming it.
template <class T>
T option(const SweepRequest& req, const std::string& key, const T& fallback) {
  try {
    return req.get<T>(key, fallback);
  } catch (const nlohmann::json::exception&) {
    const char* kind = std::is_same_v<T, bool>          ? "true or false"
                       : std::is_same_v<T, std::string> ? "a name"
                       : std::is_integral_v<T>          ? "an integer"
                                                        : "a number";
    throw UsageError(cat("--set ", key, "=", req.options.at(key).dump(), " must be ", kind));
  }
}

// Applies the user's options to one recipe.
nlohmann::json params_of(const Recipe& r, const SweepRequest& req, const Sizes& sz) {
  nlohmann::json p;
  p["dispatcher"] = option<std::string>(req, "dispatcher", r.dispatcher);
  p["transport"] = option<std::string>(req, "transport", r.transport);
  p["experts"] = option<int64_t>(req, "experts", r.experts);
  p["topk"] = option<int64_t>(req, "topk", r.topk);
  p["routing"] = option<std::string>(req, "routing", r.routing);
  p["pre_softmax"] = option<bool>(req, "pre_softmax", r.pre_softmax);
  // A capacity factor turns capacity mode on (policy probability unless given);
  // drop_policy=none turns it off.
  std::string drop = r.drop;
  double cf = r.capacity_factor;
  if (req.options.contains("capacity_factor")) {
    cf = option<double>(req, "capacity_factor", 0.0);
    drop = r.capacity_factor > 0 ? r.drop : "probability";
  }
  drop = option<std::string>(req, "drop_policy", drop);
  if (moe::parse_drop_policy(drop) == moe::DropPolicy::none) cf = 0;
  else if (!req.options.contains("capacity_factor") && cf == 0) cf = 1.0;
  p["drop_policy"] = drop;
  p["capacity_factor"] = cf;
  p["tokens"] = option<int64_t>(req, "tokens", sz.tokens_per_rank * req.ranks);
  p["hidden"] = option<int64_t>(req, "hidden", sz.hidden);
  p["ffn"] = option<int64_t>(req, "ffn", sz.ffn);
  p["hot_experts"] = option<int64_t>(req, "hot_experts", std::max<int64_t>(1, p["experts"].get<int64_t>() / 8));
  p["skew"] = option<double>(req, "skew", 3.0);
  p["aux_coeff"] = option<double>(req, "aux_coeff", 1e-2);
  p["z_coeff"] = option<double>(req, "z_coeff", 1e-3);
  return p;
}

// A default layout that does not fit this rank count or the user's sizes is
// left out; when none fits, all stay, so that validate names the rule.
bool recipe_fits(const nlohmann::json& p, const ParallelConfig& par, int g) {
  const int etp = par.expert_tp();
  return par.ep >= 1 && g % (par.ep * etp) == 0 && p["experts"].get<int64_t>() % par.ep == 0 &&
         p["ffn"].get<int64_t>() % etp == 0;
}

}  // namespace

std::vector<CaseConfig> sweep(const SweepRequest& req) {
  const int g = req.ranks;
  const Sizes sz = sizes_for(req.profile);
  std::vector<std::pair<Recipe, ParallelConfig>> recipes;
  const std::string mode = option<std::string>(req, "sweep", "recipes");
  const std::optional<bool> full = find_named<bool>({{"recipes", false}, {"full", true}}, mode);
  require(full.has_value(), cat("--set sweep='", mode, "' must be recipes or full"));
  if (*full) {
    recipes = full_product(g);
  } else {
    for (size_t i = 0; i < std::size(kRecipes); ++i)
      if (req.profile != Profile::ci || kCiRecipes.count(static_cast<int>(i)))
        recipes.push_back({kRecipes[i], layout_config(kRecipes[i].layout, g)});
  }
  const bool user_layout = req.parallel.has_value();
  std::vector<CaseConfig> all, fitting;
  std::set<std::string> seen;
  for (DType dtype : req.dtypes_or({DType::f32, DType::bf16}))
    for (const auto& [recipe, layout] : recipes) {
      CaseConfig c;
      c.params = params_of(recipe, req, sz);
      c.parallel = user_layout ? *req.parallel : layout;
      c.ranks = g;
      c.dtype = dtype;
      if (!seen.insert(c.params.dump() + to_string(c.parallel) + dtype_name(dtype)).second) continue;
      all.push_back(c);
      if (user_layout || recipe_fits(c.params, c.parallel, g)) fitting.push_back(c);
    }
  std::vector<CaseConfig> out = fitting.empty() ? all : fitting;
  if (!req.fault.empty())  // only where the fault can show (validated first, so names are known)
    std::erase_if(out, [&](const CaseConfig& c) {
      validate(c);
      return !fault_visible(req.fault, c);
    });
  return out;
}

std::vector<OptionSpec> moe_options() {
  return {OptionSpec::choice("dispatcher", {"alltoall", "allgather"}, "token dispatcher"),
          OptionSpec::choice("transport", {"peer_memory", "collectives"},
                             "alltoall without ETP: rows written straight into the peers' memory where the EP ranks "
                             "share it (else the collectives), or all_to_all_v"),
          OptionSpec::integer("experts", 1, 65536, "experts"),
          OptionSpec::integer("topk", 1, 65536, "experts per token"),
          OptionSpec::choice("routing", {"uniform", "skewed"}, "router weights: uniform, or hot experts favoured"),
          OptionSpec::integer("hot_experts", 1, 65536, "skewed: how many experts are hot"),
          OptionSpec::number("skew", 1e-6, 1e6, "skewed: how much larger the hot experts' router columns are"),
          OptionSpec::number("capacity_factor", 1e-6, 1e6, "capacity mode: slots per expert = ceil(tokens k / E x cf)"),
          OptionSpec::choice("drop_policy", {"none", "probability", "position"}, "over capacity: what is dropped"),
          OptionSpec::boolean("pre_softmax", "softmax over all experts, then top-k"),
          OptionSpec::size("tokens", "tokens of the whole batch (a multiple of the rank count)"),
          OptionSpec::size("hidden", "hidden size"),
          OptionSpec::size("ffn", "expert FFN size"),
          OptionSpec::number("aux_coeff", 0, 1e6, "Switch load-balancing loss coefficient"),
          OptionSpec::number("z_coeff", 0, 1e6, "router z-loss coefficient"),
          OptionSpec::choice("sweep", {"recipes", "full"}, "the recipe list, or the full cross product")};
}

// Per rank: its tokens (input, output, gradients), the top-k rows it
// dispatches and receives, and its experts' weights and gradients. The
// group's rank 0 holds the float64 reference of the whole layer.
MemoryEstimate moe_memory(const CaseConfig& c) {
  const Problem p = Problem::of(c);
  const double rows = static_cast<double>(p.tokens) * p.hidden, k = p.topk;
  const double weights = 2.0 * p.experts * p.hidden * p.ffn;
  const double shard = 4.0 * (rows / c.ranks * (4 + 4 * k) + 2 * weights / std::max(1, c.parallel.ep));
  const double reference = 8.0 * (rows * (4 + 4 * k) + 2 * weights);
  return {c.device == Device::host ? shard + reference : reference, c.device == Device::host ? 0 : shard};
}

void validate(const CaseConfig& c) {
  const Problem p = Problem::of(c);  // parses the names (UsageError on unknown ones)
  const ParallelConfig& par = c.parallel;
  const int etp = par.expert_tp();
  require(par.pp == 1, cat("--pp ", par.pp, " must be 1 for moe (one layer, no pipeline)"));
  require_positive("--ep", par.ep);
  require_positive("--etp", etp);
  require(c.ranks % (par.ep * etp) == 0,
          cat("--ep ", par.ep, " x --etp ", etp, " = ", par.ep * etp, " must divide the rank count ", c.ranks));
  require_divides("--ep", par.ep, "--experts", p.experts);
  require_divides("--etp", etp, "--ffn", p.ffn);
  require_positive("--topk", p.topk);
  require(p.topk <= p.experts, cat("--topk ", p.topk, " must be at most --experts ", p.experts));
  require_positive("--hidden", p.hidden);
  require_positive("--set tokens", p.tokens);
  require(p.tokens % c.ranks == 0, cat("--set tokens=", p.tokens, " must be a multiple of the rank count ", c.ranks));
  if (p.drop != moe::DropPolicy::none)
    require(p.capacity_factor > 0, cat("--set capacity_factor=", p.capacity_factor,
                                       " must be positive (leave it unset, or drop_policy=none, for dropless)"));
  require(p.hot_experts >= 1 && p.hot_experts <= p.experts,
          cat("--set hot_experts=", p.hot_experts, " must be between 1 and --experts ", p.experts));
  require(p.skew > 0, cat("--set skew=", p.skew, " must be positive"));
  require(p.aux_coeff >= 0 && p.z_coeff >= 0,
          cat("--set aux_coeff=", p.aux_coeff, " and z_coeff=", p.z_coeff, " must not be negative"));
}

bool fault_visible(const std::string& fault, const CaseConfig& c) {
  const Problem p = Problem::of(c);
  // Peer memory: host rows, EP ranks on one node (a test or a one-node run).
  const bool peer_memory = p.dispatcher == moe::DispatcherKind::alltoall &&
                           p.transport == moe::Transport::peer_memory && c.parallel.ep > 1 &&
                           c.parallel.expert_tp() == 1 && c.device == Device::host;
  const moe::FaultSite site{p.dispatcher,  static_cast<int>(p.topk), p.pre_softmax, p.drop,
                            c.parallel.ep, c.parallel.edp(),         peer_memory};
  return moe::faults().shows(moe::faults().parse(fault), site);
}

}  // namespace sextant::moe_suite
