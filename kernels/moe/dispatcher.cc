#include "kernels/moe/dispatcher.h"

#include <algorithm>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::moe {

std::unique_ptr<TokenDispatcher> make_dispatcher(DispatcherKind kind, const DispatchComms& comms, int experts,
                                                 const DispatchFaults& faults, Transport transport) {
  if (!comms.ep || !comms.etp) throw RuntimeError("moe dispatcher: the EP and ETP communicators are required");
  if (experts % comms.ep->size() != 0)
    throw RuntimeError(cat("moe dispatcher: ep ", comms.ep->size(), " must divide the experts ", experts));
  if (kind == DispatcherKind::allgather) return make_allgather_dispatcher(comms, experts, faults);
  // Peer memory where the EP ranks share it (a probe of one page; null on
  // device communicators and across nodes), the collectives elsewhere.
  if (transport == Transport::peer_memory && comms.etp->size() == 1 && comms.ep->size() > 1 && comms.ep->peer_memory(1))
    return make_peer_dispatcher(*comms.ep, experts, faults);
  return make_alltoall_dispatcher(comms, experts, faults);
}

}  // namespace sextant::moe
