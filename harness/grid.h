// The rank grid: a pure function from (rank, ParallelConfig) to coordinates
// and group members, with Megatron-Core semantics (parallel_state.py,
// RankGenerator). Order "tp-cp-ep-dp-pp", leftmost dimension fastest.
//   dense layers:  TP x CP x DP x PP      (ep taken as 1)
//   MoE layers:    ETP x EP x EDP x PP    (cp taken as 1, EDP = world / (ETP*EP*PP))
// Both layouts share the same PP groups ("parallel folding").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sextant {

struct ParallelConfig {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int etp = 0;  // 0: same as tp (Megatron's default)
  int vpp = 1;  // virtual pipeline chunks per rank
  bool sp = false;
  std::string order = "tp-cp-ep-dp-pp";

  int world() const { return tp * cp * pp * dp; }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int edp() const { return world() / (expert_tp() * ep * pp); }
  bool operator==(const ParallelConfig&) const = default;
};

std::string to_string(const ParallelConfig& config);  // "tp2 cp2 pp1 dp1 ep1 etp2 sp"
void to_json(nlohmann::json& j, const ParallelConfig& config);
void from_json(const nlohmann::json& j, ParallelConfig& config);

// Throws UsageError with a one-line rule, e.g.
// "world size 8 must equal tp*cp*pp*dp = 2*2*1*1 = 4".
void validate(const ParallelConfig& config, int world_size);

// Dimensions a group can run along. dp_cp: Megatron's combined data + context
// group (dense gradients are reduced over it).
enum class Dim { tp, cp, dp, pp, ep, etp, edp, dp_cp, tp_cp };
std::string dim_name(Dim dim);
Dim parse_dim(const std::string& name);  // throws UsageError

struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;  // dense layout
  int etp = 0, ep = 0, edp = 0;        // expert layout
};

class RankGrid {
 public:
  RankGrid(const ParallelConfig& config, int world_size);  // validates

  const ParallelConfig& config() const { return config_; }
  int world() const { return world_; }
  RankCoords coords(int rank) const;
  // Members (ascending) of rank's group along dim.
  std::vector<int> group(Dim dim, int rank) const;
  // Every group along dim, each ascending, ordered by their first rank.
  std::vector<std::vector<int>> groups(Dim dim) const;
  // Colour identifying rank's group along dim (equal colours = same group)
  // and its position inside it: what Communicator::split needs.
  int color(Dim dim, int rank) const;
  int index_in_group(Dim dim, int rank) const;

 private:
  struct Layout {                    // one generator: sizes in the order string
    std::vector<std::string> names;  // e.g. {"tp","cp","ep","dp","pp"}
    std::vector<int> sizes;
    std::vector<int> coords(int rank) const;
    int rank_of(const std::vector<int>& coords) const;
  };
  const Layout& layout_for(Dim dim) const;
  std::vector<std::string> members_of(Dim dim) const;  // layout dims the group varies
  static std::vector<int> group_in(const Layout& layout, const std::vector<std::string>& vary, int rank);

  ParallelConfig config_;
  int world_;
  Layout dense_, expert_;
};

}  // namespace sextant
