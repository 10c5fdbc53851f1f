// The message order every generator's schedule gets passes the NCCL dry run;
// the dry run catches the orders that would hang or mismatch on NCCL.
#include "kernels/pipeline/p2p_order.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/generators.h"

namespace sextant::pp {
namespace {

// Every rank's ops as the dry run sees them; the tag names the message.
std::vector<std::vector<WireOp>> wire_of(const std::vector<Message>& messages,
                                         const std::vector<std::vector<P2pOp>>& plan) {
  std::vector<std::vector<WireOp>> wire(plan.size());
  for (size_t r = 0; r < plan.size(); ++r)
    for (const P2pOp& op : plan[r]) {
      const Message& m = messages[op.message];
      wire[r].push_back({op.send, op.send ? m.to : m.from, op.message, 1, op.before_step});
    }
  return wire;
}

std::string grep_error(const std::vector<std::vector<WireOp>>& wire) {
  try {
    check_stream_order(wire);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "";
}

std::vector<Schedule> every_schedule(int p) {
  std::vector<Schedule> out;
  for (int m : {1, p, 2 * p + 1, 4 * p}) {
    out.push_back(gpipe(p, m));
    out.push_back(one_f_one_b(p, m));
    out.push_back(zb_h1(p, m));
    out.push_back(zb_v(p, m));
  }
  for (int v : {2, 3})
    for (int m : {p, 2 * p}) out.push_back(interleaved_1f1b(p, m, v));
  for (int m : {2 * p, 3 * p}) out.push_back(dualpipe_v(p, m));
  return out;
}

TEST(P2pOrder, EveryGeneratedSchedulePassesTheNcclDryRun) {
  for (int p : {2, 3, 4, 8})
    for (const Schedule& s : every_schedule(p)) {
      const std::string what = cat(s.name, " p", p, " m", s.microbatches, " stages ", s.stages);
      const std::vector<Message> messages = step_messages(s);
      const auto plan = p2p_order(s, messages);
      ASSERT_EQ(static_cast<int>(plan.size()), p) << what;
      std::vector<int> sent(messages.size(), 0), received(messages.size(), 0);
      for (int r = 0; r < p; ++r)
        for (size_t i = 0; i < plan[r].size(); ++i) {
          const P2pOp& op = plan[r][i];
          const Message& m = messages[op.message];
          if (i > 0) {
            EXPECT_LE(plan[r][i - 1].before_step, op.before_step) << what << " rank " << r;
          }
          if (op.send) {
            ++sent[op.message];
            EXPECT_EQ(m.from, r);
            EXPECT_EQ(op.before_step, m.produced_at + 1) << what << ": a send goes right after its producer";
          } else {
            ++received[op.message];
            EXPECT_EQ(m.to, r);
            EXPECT_LE(op.before_step, m.consumed_at) << what << ": a receive comes before its consumer";
          }
        }
      for (size_t k = 0; k < messages.size(); ++k) {
        EXPECT_EQ(sent[k], 1) << what << " message " << k;
        EXPECT_EQ(received[k], 1) << what << " message " << k;
      }
      EXPECT_EQ(grep_error(wire_of(messages, plan)), "") << what;
    }
}

TEST(P2pOrder, MessagesCrossRanksOnly) {
  // ZB-V turns on the last rank: stages p-1 and p hand over locally.
  const int p = 4, m = 4;
  const Schedule s = zb_v(p, m);
  const std::vector<Message> messages = step_messages(s);
  // 2p stages, 2p - 1 boundaries, one local: 2p - 2 remote boundaries, each
  // an activation and a gradient per microbatch.
  EXPECT_EQ(static_cast<int>(messages.size()), 2 * (2 * p - 2) * m);
  for (const Message& msg : messages) EXPECT_NE(msg.from, msg.to);
  EXPECT_TRUE(step_messages(one_f_one_b(1, 4)).empty());
}

// The order the executor used to have: every receive posted before the first
// action. MPI's tags make that work; on NCCL's stream it hangs.
TEST(P2pOrder, PostingEveryReceiveFirstDeadlocks) {
  for (const Schedule& s : {one_f_one_b(2, 4), zb_v(2, 4), interleaved_1f1b(4, 4, 2)}) {
    const std::vector<Message> messages = step_messages(s);
    auto wire = wire_of(messages, p2p_order(s, messages));
    for (auto& ops : wire) {
      for (WireOp& op : ops)
        if (!op.send) op.before_step = 0;
      std::stable_sort(ops.begin(), ops.end(),
                       [](const WireOp& a, const WireOp& b) { return a.before_step < b.before_step; });
    }
    const std::string error = grep_error(wire);
    EXPECT_NE(error.find("deadlocks under NCCL's rules"), std::string::npos) << s.name << ": " << error;
    EXPECT_NE(error.find("rank 0 receives"), std::string::npos) << s.name << ": " << error;
  }
}

// Two ranks that each receive, then send: a hang in two groups, fine in one.
TEST(P2pOrder, ExchangeNeedsOneGroup) {
  std::vector<std::vector<WireOp>> wire{{{false, 1, 7, 4, 0}, {true, 1, 8, 4, 1}},
                                        {{false, 0, 8, 4, 0}, {true, 0, 7, 4, 1}}};
  const std::string error = grep_error(wire);
  EXPECT_NE(error.find("rank 0 receives tag 7 from rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 receives tag 8 from rank 0"), std::string::npos) << error;
  for (auto& ops : wire) ops[1].before_step = 0;  // send and receive in one group
  EXPECT_EQ(grep_error(wire), "");
}

// NCCL matches the i-th send to the i-th receive: a swapped pair is refused.
TEST(P2pOrder, SwappedOrderBetweenTwoRanksIsRefused) {
  std::vector<std::vector<WireOp>> wire{{{true, 1, 1, 4, 1}, {true, 1, 2, 4, 2}},
                                        {{false, 0, 2, 4, 0}, {false, 0, 1, 4, 0}}};
  const std::string error = grep_error(wire);
  EXPECT_NE(error.find("message 0 from rank 0 to rank 1 is tag 1"), std::string::npos) << error;
  EXPECT_NE(error.find("NCCL matches in issue order"), std::string::npos) << error;
  std::swap(wire[1][0], wire[1][1]);
  EXPECT_EQ(grep_error(wire), "");
  wire[1][1].count = 5;  // same order, different size
  EXPECT_NE(grep_error(wire).find("(5 elements) at the receiver"), std::string::npos) << grep_error(wire);
}

TEST(P2pOrder, LonePartnerAndBadPeerAreRefused) {
  EXPECT_NE(grep_error({{{true, 1, 3, 4, 1}}, {}})
                .find("rank 0 sends tag 3 to rank 1 (issued before its step 1) but "
                      "has no partner"),
            std::string::npos);
  EXPECT_NE(grep_error({{}, {{false, 0, 3, 4, 0}}}).find("rank 1 receives tag 3 from rank 0"), std::string::npos);
  EXPECT_NE(grep_error({{{true, 0, 3, 4, 1}}, {}}).find("no such peer"), std::string::npos);
}

}  // namespace
}  // namespace sextant::pp
