#include "harness/grid_comms.h"

#include "harness/error.h"

namespace sextant {

Communicator& GridComms::get(Dim dim) const {
  const std::unique_ptr<Communicator>* c = nullptr;
  switch (dim) {
    case Dim::tp: c = &tp; break;
    case Dim::cp: c = &cp; break;
    case Dim::dp: c = &dp; break;
    case Dim::pp: c = &pp; break;
    case Dim::ep: c = &ep; break;
    case Dim::etp: c = &etp; break;
    case Dim::edp: c = &edp; break;
    case Dim::dp_cp: c = &dp_cp; break;
    case Dim::tp_cp: c = &tp_cp; break;
  }
  if (!c || !*c) throw RuntimeError("grid communicator for " + dim_name(dim) + " was not created");
  return **c;
}

GridComms make_grid_comms(Communicator& world, const ParallelConfig& config) {
  GridComms g{RankGrid(config, world.size()), world.rank(), {}, {}, {}, {}, {}, {}, {}, {}, {}};
  auto make = [&](Dim dim) { return world.split(g.grid.color(dim, g.rank), g.grid.index_in_group(dim, g.rank)); };
  g.tp = make(Dim::tp);
  g.cp = make(Dim::cp);
  g.dp = make(Dim::dp);
  g.pp = make(Dim::pp);
  g.ep = make(Dim::ep);
  g.etp = make(Dim::etp);
  g.edp = make(Dim::edp);
  g.dp_cp = make(Dim::dp_cp);
  g.tp_cp = make(Dim::tp_cp);
  return g;
}

}  // namespace sextant
