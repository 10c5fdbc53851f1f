// The SP identity: reduce_scatter followed by all_gather equals all_reduce,
// element for element. This is why sequence parallelism moves the same bytes
// as the all-reduce it replaces (Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models", 2022).
#include "harness/error.h"
#include "suites/collectives/collectives.h"

namespace sextant::collectives {
namespace {

struct IdentityState {
  std::unique_ptr<Communicator> faulty;
  Communicator* comm = nullptr;
  DType dtype = DType::f32;
  int64_t elements = 0;
  Tensor x, shard, gathered, reduced;  // x, rs(x), ag(rs(x)), ar(x)
};

void rs_ag(IdentityState& s) {
  s.comm->reduce_scatter(s.x, s.shard);
  s.comm->all_gather(s.shard, s.gathered);
}
void ar(IdentityState& s) {
  s.reduced.copy_from(s.x);
  s.comm->all_reduce(s.reduced);
}

// Only the size rule matters here: elements must split over the group.
const CollectiveOp kSizes{
    .name = "sp_identity",
    .ops = {CommOp::reduce_scatter, CommOp::all_gather, CommOp::all_reduce},
    .splits_over_ranks = true,
    .busbw_factor = factor_all_reduce,
};

}  // namespace

CaseDef sp_identity_case() {
  return make_case(CaseTable<IdentityState>{
      .suite = "collectives",
      .name = "sp_identity",
      .summary = "all_gather(reduce_scatter(x)) == all_reduce(x), exactly",
      .options = collective_options(),
      .faults = faults_of(kSizes.ops),
      .table_metrics = {"busbw_GBps", "busbw_all_reduce_GBps"},
      .configs = [](const SweepRequest& req) { return sweep_sizes(req, kSizes); },
      .validate = [](const CaseConfig& c) { validate_sizes(c, kSizes); },
      .memory = collective_memory,
      .setup =
          [](CaseContext& ctx) {
            IdentityState s;
            s.comm = &group_for(ctx, s.faulty);
            s.dtype = ctx.config.dtype;
            s.elements = ctx.config.i("bytes") / static_cast<int64_t>(dtype_size(s.dtype));
            s.x = Tensor::zeros({s.elements}, s.dtype, ctx.device);
            s.shard = Tensor::zeros({s.elements / s.comm->size()}, s.dtype, ctx.device);
            s.gathered = Tensor::zeros({s.elements}, s.dtype, ctx.device);
            s.reduced = Tensor::zeros({s.elements}, s.dtype, ctx.device);
            return s;
          },
      .timed = {{"rs_ag", rs_ag}, {"all_reduce", ar}},
      .check =
          [](IdentityState& s, Checker& checker) {
            Tensor host = Tensor::empty({s.elements}, s.dtype);
            const int rank = s.comm->rank(), n = s.comm->size();
            for (int64_t i = 0; i < s.elements; ++i) host.set(i, pattern(rank, i));
            s.x.copy_from(host);
            rs_ag(s);
            ar(s);
            Tensor gathered = s.gathered.to(Device::host), reduced = s.reduced.to(Device::host);
            checker.exact("rs_ag == all_reduce", count_wrong(gathered, [&](int64_t i) { return reduced.at(i); }),
                          s.elements);
            checker.exact("all_reduce == sum",
                          count_wrong(reduced,
                                      [&](int64_t i) {
                                        double sum = 0;
                                        for (int r = 0; r < n; ++r) sum += pattern(r, i);
                                        return sum;
                                      }),
                          s.elements);
          },
      .metrics =
          [](IdentityState& s, const RegionTimes& times) {
            const double bytes = static_cast<double>(s.elements) * dtype_size(s.dtype);
            const double factor = factor_all_reduce(s.comm->size());
            Metrics m = bandwidth(bytes, factor, times.at("rs_ag"));
            const BandwidthMetrics ar = all_reduce_bandwidth();
            const TimeStats& t = times.at("all_reduce");
            const double algbw = t.median > 0 ? bytes / t.median / 1e9 : 0;
            m.add(ar.algbw, algbw);
            m.add(ar.busbw, algbw * factor);
            m.add(ar.factor, factor);
            return m;
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 80, sp_identity_case);

}  // namespace sextant::collectives
