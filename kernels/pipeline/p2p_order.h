// The order in which pipeline ranks issue their point-to-point messages, so
// that the same plan runs on MPI and on NCCL.
//
// MPI matches a receive to a send by (peer, tag) and never blocks an isend,
// so any order works there. NCCL has no tags and runs p2p on one stream per
// communicator: between two ranks the i-th send meets the i-th receive, and
// a send or receive (or a group of them, issued together) holds up
// everything after it on the stream until its peer reaches the matching
// call. Posting every receive up front therefore deadlocks on NCCL.
//
// p2p_order() builds an order that cannot deadlock under those rules:
//   1. simulate the schedule with unit costs: a feasible timeline in which
//      every message k is produced at a time e_k;
//   2. number the messages by e_k (ties broken by sender, receiver, kind,
//      stage, microbatch): one global order, the same on every rank;
//   3. every rank issues its sends and receives in that order, each just
//      before its first action that starts at or after e_k (a send right
//      after its producer, a receive before its consumer); the operations
//      issued at the same point form one group.
// Why it cannot deadlock: the lowest-numbered unfinished message k is first
// in line on both of its ranks, and everything issued before it there
// (actions starting before e_k, whose inputs were produced before e_k, and
// messages numbered below k) has finished; so k finishes too.
//
// check_stream_order() proves a plan (every rank's, as each rank really
// holds it) under those rules by a dry run, before anything is sent: pairs
// must agree on what their i-th message is, and no rank may wait forever.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kernels/pipeline/schedule.h"

namespace sextant::pp {

enum class MessageKind { activation = 0, gradient = 1 };

// One message between two ranks in a step: the activation that stage
// `boundary` sends to stage boundary + 1, or the gradient that stage
// boundary + 1 sends back to stage `boundary`, for one microbatch.
struct Message {
  MessageKind kind = MessageKind::activation;
  int boundary = 0;
  int microbatch = 0;
  int from = 0, to = 0;  // ranks
  int produced_at = 0;   // step of `from` whose action produces it
  int consumed_at = 0;   // step of `to` whose action consumes it
};

// What an F, B or I action consumes or produces at a stage boundary: the
// activation of `boundary` (F(s) consumes s-1's, produces its own) or the
// gradient for it (B/I(s) consume the gradient for s, produce the one for
// s-1), and the stage at the other end (`peer_stage`, outside [0, stages)
// at the ends of the pipeline). W crosses no boundary.
struct Crossing {
  MessageKind kind = MessageKind::activation;
  int boundary = 0;
  int peer_stage = 0;
};
Crossing input_crossing(const Action& action);
Crossing output_crossing(const Action& action);

// Every message between different ranks, in no particular order.
// Hand-offs between stages on one rank are not messages. The schedule must
// be valid (validate()).
std::vector<Message> step_messages(const Schedule& schedule);

// One send or receive of a rank, issued just before the rank's action
// `before_step` (actions.size(): after its last action).
struct P2pOp {
  int message = 0;  // index into the messages
  bool send = false;
  int before_step = 0;
};

// Per rank, its operations in issue order (before_step never decreases;
// equal before_step = one group).
std::vector<std::vector<P2pOp>> p2p_order(const Schedule& schedule, const std::vector<Message>& messages);

// A rank's operation as the dry run sees it.
struct WireOp {
  bool send = false;
  int peer = 0;
  int tag = 0;  // what the message is (not used for matching)
  size_t count = 0;
  int before_step = 0;  // group: consecutive ops with the same before_step
};

// Dry run of every rank's plan ([rank] -> ops in issue order) under NCCL's
// rules; `describe` names a tag in messages. Throws RuntimeError when two
// ranks disagree on the i-th message between them (tag or count) or when
// some rank would wait forever (naming what each stuck rank waits for).
void check_stream_order(const std::vector<std::vector<WireOp>>& plans,
                        const std::function<std::string(int tag)>& describe = {});

}  // namespace sextant::pp
