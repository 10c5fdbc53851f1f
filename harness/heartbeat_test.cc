// The heartbeat: what a rank publishes is what a reader sees, across a named
// segment shared by two mappings, and the process state a watchdog reads.
#include "harness/heartbeat.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {
namespace {

TEST(Heartbeat, PublishesCasePhaseAndCall) {
  Heartbeat h("", 1, 0, 5, false);
  RankPosition p = h.read(0);
  EXPECT_EQ(p.world_rank, 5);
  EXPECT_EQ(p.pid, getpid());
  EXPECT_FALSE(p.armed);

  h.begin(7, "setup");
  h.set_phase("check");
  h.enter_call("all_reduce");
  p = h.read(0);
  EXPECT_TRUE(p.armed);
  EXPECT_EQ(p.case_index, 7);
  EXPECT_EQ(p.phase, "check");
  EXPECT_EQ(p.call, "all_reduce");
  EXPECT_TRUE(p.in_call);
  EXPECT_EQ(p.calls, 1u);
  EXPECT_GE(p.armed_s, 0.0);

  const uint64_t before = p.sequence;
  h.exit_call();
  h.enter_call("wait recv from", 3);
  p = h.read(0);
  EXPECT_NE(p.sequence, before);
  EXPECT_EQ(p.call, "wait recv from 3");
  EXPECT_EQ(p.calls, 2u);
  h.exit_call();
  p = h.read(0);
  EXPECT_FALSE(p.in_call);
  EXPECT_EQ(p.call, "wait recv from 3") << "the last call stays visible after it returns";

  h.end();
  EXPECT_FALSE(h.read(0).armed);
  h.begin(8, "setup");
  p = h.read(0);
  EXPECT_EQ(p.calls, 0u) << "calls count per case";
  EXPECT_EQ(p.call, "");
}

TEST(Heartbeat, ArmedTimeGrows) {
  Heartbeat h("", 1, 0, 0, false);
  h.begin(1, "setup");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(h.read(0).armed_s, 0.015);
}

TEST(Heartbeat, LongNamesAreCut) {
  Heartbeat h("", 1, 0, 0, false);
  h.begin(1, std::string(200, 'p').c_str());
  h.enter_call(std::string(200, 'c').c_str());
  RankPosition p = h.read(0);
  EXPECT_EQ(p.phase, std::string(sizeof(HeartbeatSlot::phase) - 1, 'p'));
  EXPECT_EQ(p.call, std::string(sizeof(HeartbeatSlot::call) - 1, 'c'));
}

TEST(Heartbeat, NamedSegmentIsSharedBetweenMappings) {
  const std::string name = cat("/sextant-heartbeat-test-", getpid());
  Heartbeat first(name, 2, 0, 10, true);
  Heartbeat second(name, 2, 1, 11, false);
  Heartbeat::unlink(name);  // the mappings stay valid
  second.begin(3, "fwd");
  second.enter_call("all_gather");
  std::vector<RankPosition> all = first.read();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].world_rank, 10);
  EXPECT_EQ(all[1].world_rank, 11);
  EXPECT_EQ(all[1].case_index, 3);
  EXPECT_EQ(all[1].phase, "fwd");
  EXPECT_EQ(all[1].call, "all_gather");
  EXPECT_THROW(Heartbeat(name, 2, 1, 11, false), RuntimeError) << "the name is gone once unlinked";
}

TEST(Heartbeat, FreeFunctionsPublishOnlyWhenInstalled) {
  heartbeat_begin(1, "nowhere");  // nothing installed: nothing happens
  { CommCallScope scope("barrier"); }
  Heartbeat h("", 1, 0, 0, false);
  Heartbeat::install(&h);
  heartbeat_begin(4, "setup");
  heartbeat_phase("check");
  {
    CommCallScope scope("broadcast");
    EXPECT_TRUE(h.read(0).in_call);
  }
  RankPosition p = h.read(0);
  EXPECT_EQ(p.case_index, 4);
  EXPECT_EQ(p.phase, "check");
  EXPECT_EQ(p.call, "broadcast");
  EXPECT_FALSE(p.in_call);
  heartbeat_end();
  EXPECT_FALSE(h.read(0).armed);
  Heartbeat::install(nullptr);
}

TEST(Heartbeat, ProcessStateSeesStoppedAndGoneProcesses) {
  EXPECT_EQ(process_state(getpid()), 'R');
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  kill(child, SIGSTOP);
  char state = '?';
  for (int i = 0; i < 200 && state != 'T'; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    state = process_state(child);
  }
  EXPECT_EQ(state, 'T');
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(process_state(child), '?');
}

}  // namespace
}  // namespace sextant
