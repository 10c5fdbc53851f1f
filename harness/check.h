// Checker: collects a case's conformance verdict. The case gathers its
// distributed tensors on the group's rank 0 (see assemble.h), computes the
// float64 reference and the one-rank baseline there, and hands all three to
// compare(); exact checks (small-integer collectives) report wrong-element
// counts from every rank. finish() agrees the verdict across the group.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/comm.h"
#include "harness/compare.h"
#include "harness/tensor.h"
#include "harness/tolerance.h"

namespace sextant {

// One checked tensor against the two rules of harness/tolerance.h.
struct TensorCheck {
  std::string name;
  std::string op;         // its row of the tolerance table ("" for an explicit bound)
  double error = 0;       // relative L2 of the distributed result vs reference
  double base_error = 0;  // the same for the one-rank baseline
  double base_bound = 0;  // the gate on base_error: the one-device kernel is right
  double bound = 0;       // max(2 * base_error, floor): the distributed run is as good
  double floor = 0;       // the expected error of a correct kernel
  double growth = 1;      // how many times the row's error budget applies (training steps)
  double max_abs = 0;
  int64_t nonfinite = 0;
  int64_t count = 0;
  // The systematic check (tolerance.h SystematicRule): the distributed run's
  // scale and offset against the one-device run's, each within
  // max(k x its standard error, the rule's minimum effect).
  Systematic systematic;    // of dist - base
  double dist_scale = 0;    // <dist - ref, ref> / <ref, ref>
  double base_scale = 0;    // the same for the baseline
  double scale_limit = 0;   // what |systematic.scale| must not exceed
  double offset_limit = 0;  // what |systematic.offset| must not exceed
  bool systematic_pass = true;
  // Where the distributed result misses and it was assembled from ranks
  // (Tensor::owner_ranks): for each rank owning off elements, how many of
  // its elements are off and how many it owns. An element is off where its
  // error exceeds max(2 x the baseline's error there, floor x rms(ref)).
  struct RankShare {
    int rank = 0;
    int64_t off = 0, owned = 0;
  };
  std::vector<RankShare> off_by_rank;
  bool base_pass = false;
  bool pass = false;  // every rule holds
  // Which side missed: "baseline", "distributed", "both"; "" on a pass.
  std::string failed_side() const;
  bool dist_pass() const;  // the norm bound and the systematic check
};
void to_json(nlohmann::json& j, const TensorCheck& c);

// Conformance::status values, as the results record them.
inline constexpr std::string_view kPass = "pass", kFail = "fail", kSkip = "skip";

struct Conformance {
  std::string status = std::string(kSkip);  // kPass, kFail or kSkip
  std::vector<TensorCheck> tensors;
  int64_t wrong = 0;                                // exact checks: wrong elements, summed over ranks
  int64_t checked = 0;                              // exact checks: elements checked, summed over ranks
  std::vector<std::string> failures;                // one line per failed check
  nlohmann::json notes = nlohmann::json::object();  // suite facts (routing differences, ...)
};
void to_json(nlohmann::json& j, const Conformance& c);

// Where --dump writes the tensors of checked cases (empty dir: no dump).
// The dump folder of a case: its id with ' ', '/' and '=' replaced by '_'.
// An id longer than 120 characters (packed sequence lengths repeat in it and
// can pass the 255-byte limit on a file name) keeps a 100-character prefix and
// the FNV-1a hash of the whole id; params.json inside holds the full id.
std::string dump_folder_name(const std::string& case_id);

struct DumpTarget {
  std::string dir;
  std::string case_dir;  // sub-folder for this case
  nlohmann::json params;
};

class Checker {
 public:
  Checker(Communicator& host_comm, DType dtype, DumpTarget dump = {});

  bool is_root() const { return comm_.rank() == 0; }
  DType dtype() const { return dtype_; }
  Communicator& comm() const { return comm_; }

  // Root only. dist and base in the test dtype, ref in f64, same shape; op
  // picks the tolerance row. The baseline must lie within the row's gate
  // and dist within max(2 * error(base), floor). growth (>= 1) scales the
  // gate and the floor where the row's computation repeats on the path, e.g.
  // training steps that each add their rounding (the step suite).
  void compare(const std::string& name, OpClass op, const Tensor& dist, const Tensor& base, const Tensor& ref,
               double growth = 1.0);
  // The same with a reference for each run: where the two runs took other
  // discrete decisions that are both right to within rounding (MoE routing
  // at a near tie), each is held to the exact computation of its own. The
  // systematic check compares (dist - ref_dist) with (base - ref_base).
  void compare(const std::string& name, OpClass op, const Tensor& dist, const Tensor& base, const Tensor& ref_dist,
               const Tensor& ref_base, double growth);
  // The same against an explicit bound (FP8 rows, exact checks): the
  // baseline within bound.gate, dist within max(2 x error(base), bound.floor).
  void compare(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base, const Tensor& ref);
  void compare(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base,
               const Tensor& ref_dist, const Tensor& ref_base);
  // Any rank: this rank's wrong-element count of an exact check.
  void exact(const std::string& name, int64_t wrong, int64_t checked);
  // Any rank: a failed invariant that is not a tensor error (e.g. a
  // replicated weight that differs between replicas).
  void fail(const std::string& reason);
  // Root: a fact worth recording (e.g. tokens whose routing differs).
  void note(const std::string& key, nlohmann::json value);
  // Root: an input to dump with the case (no check).
  void input(const std::string& name, const Tensor& tensor);
  // Whether inputs are dumped (--dump): inputs that cost time to form are formed only then.
  bool dumping() const { return !dump_.dir.empty(); }

  // Collective over the group: the verdict (details complete on root).
  Conformance finish();

 private:
  void dump(const std::string& file, const Tensor& t);
  void compare_within(const std::string& name, const Bound& bound, const Tensor& dist, const Tensor& base,
                      const Tensor& ref_dist, const Tensor& ref_base);

  Communicator& comm_;
  DType dtype_;
  DumpTarget dump_;
  Conformance result_;
  std::vector<std::string> local_failures_;
  int64_t local_wrong_ = 0, local_checked_ = 0;
  bool any_check_ = false;
};

}  // namespace sextant
