#include "kernels/model/model_comms.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"

namespace sextant::model {

void CommClocks::reset() {
  const double now = now_seconds();
  for (CommClock* c : {&tp, &cp, &ep, &dp, &pp, &other}) c->reset(now);
}

std::map<std::string, double> CommClocks::seconds() const {
  return {{"tp", tp.seconds}, {"cp", cp.seconds}, {"ep", ep.seconds}, {"dp", dp.seconds}, {"pp", pp.seconds}};
}

std::map<std::string, double> CommClocks::exposed() const {
  return {{"tp", tp.exposed}, {"cp", cp.exposed}, {"ep", ep.exposed}, {"dp", dp.exposed}, {"pp", pp.exposed}};
}

namespace {
std::unique_ptr<Communicator> timed(Communicator& inner, CommClock& clock) {
  return std::make_unique<TimedCommunicator>(inner, clock);
}
}  // namespace

ModelComms make_model_comms(const GridComms& grid, Communicator& world, Communicator& host, Communicator& self,
                            const GptConfig& config) {
  ModelComms m;
  m.parallel = grid.grid.config();
  m.coords = grid.coords();
  m.device = world.device();
  if (host.size() != world.size() || host.rank() != world.rank() || host.device() != Device::host)
    throw RuntimeError("make_model_comms: host must be a host communicator over the grid's ranks");
  m.host = &host;
  m.host_pp = host.split(grid.grid.color(Dim::pp, grid.rank), grid.grid.index_in_group(Dim::pp, grid.rank));
  CommClocks& c = *m.clocks;
  m.world = timed(world, c.other);
  m.tp = timed(grid.get(Dim::tp), c.tp);
  m.cp = timed(grid.get(Dim::cp), c.cp);
  m.dp = timed(grid.get(Dim::dp), c.dp);
  m.dp_cp = timed(grid.get(Dim::dp_cp), c.dp);
  m.edp = timed(grid.get(Dim::edp), c.dp);
  m.pp = timed(grid.get(Dim::pp), c.pp);
  m.ep = timed(grid.get(Dim::ep), c.ep);
  m.etp = timed(grid.get(Dim::etp), c.ep);
  m.self = timed(self, c.other);
  // Checks that the grid's coordinates are the groups' ranks (the shards
  // of parameters follow the coordinates, the kernels the ranks).
  const RankCoords& at = m.coords;
  if (at.tp != m.tp->rank() || at.cp != m.cp->rank() || at.pp != m.pp->rank() || at.ep != m.ep->rank() ||
      at.etp != m.etp->rank())
    throw RuntimeError(
        cat("make_model_comms: rank ", grid.rank, " has grid coordinates that differ from its group ranks"));
  if (cp::variant_info(config.cp_comm).split() && m.parallel.cp > 1) {
    // cp rank c = (ring rank) * A + (a2a rank): an a2a group is A consecutive CP ranks.
    const int a = config.a2a_size, r = m.cp->rank();
    m.cp_a2a = m.cp->split(r / a, r % a);
    m.cp_ring = m.cp->split(r % a, r / a);
  }
  return m;
}

}  // namespace sextant::model
