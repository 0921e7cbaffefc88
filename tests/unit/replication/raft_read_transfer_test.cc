// ReadIndex (thesis §6.4) and leadership transfer (thesis §3.10).
#include <gtest/gtest.h>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

TEST(ReadIndex, LeaderAnswersOnlyAfterAQuorumConfirmsItsLeadership) {
  TestCluster cluster(3, 50);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  const LogIndex commit = cluster.core(N(1)).status().commit;
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  ASSERT_TRUE(cluster.core(N(1)).read_index("r1").is_ok());
  cluster.stabilize();
  EXPECT_TRUE(cluster.node(N(1)).read_states.empty()) << "no quorum heard: no answer";
  cluster.heal();
  cluster.tick_all();  // the next heartbeat round carries the read round
  ASSERT_EQ(cluster.node(N(1)).read_states.size(), 1u);
  EXPECT_EQ(cluster.node(N(1)).read_states[0], (ReadState{commit, "r1"}));
}

TEST(ReadIndex, FollowerForwardsToTheLeaderAndGetsTheLeadersCommit) {
  TestCluster cluster(3, 51);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  cluster.propose(N(1), "b");
  ASSERT_TRUE(cluster.core(N(3)).read_index("from-3").is_ok());
  cluster.stabilize();
  ASSERT_EQ(cluster.node(N(3)).read_states.size(), 1u);
  EXPECT_EQ(cluster.node(N(3)).read_states[0].index, cluster.core(N(1)).status().commit);
  EXPECT_EQ(cluster.node(N(3)).read_states[0].context, "from-3");
}

TEST(ReadIndex, NoLeaderMeansUnavailable) {
  TestCluster cluster(3, 52);
  EXPECT_EQ(cluster.core(N(1)).read_index("x").code(), StatusCode::kUnavailable);
}

// A new leader's commit index may lag; it answers reads only after committing an entry of its own term.
TEST(ReadIndex, NewLeaderWaitsForACommitInItsTerm) {
  TestCluster cluster(3, 53);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  // Node 2 is elected but cannot reach anyone with its no-op yet.
  cluster.isolate(N(1));
  cluster.set_filter([](const Message& message) {
    return message.type == MessageType::kAppend && message.from == N(2);
  });
  cluster.elect(N(2));
  ASSERT_TRUE(cluster.core(N(2)).read_index("early").is_ok());
  cluster.tick_all(2);
  EXPECT_TRUE(cluster.node(N(2)).read_states.empty());
  cluster.set_filter({});
  cluster.tick_all(3);
  ASSERT_EQ(cluster.node(N(2)).read_states.size(), 1u);
  EXPECT_EQ(cluster.core(N(2)).status().commit, cluster.node(N(2)).read_states[0].index);
}

TEST(ReadIndex, SingleVoterAnswersAtOnce) {
  TestCluster cluster(1, 54);
  cluster.elect(N(1));
  ASSERT_TRUE(cluster.core(N(1)).read_index("solo").is_ok());
  cluster.stabilize();
  ASSERT_EQ(cluster.node(N(1)).read_states.size(), 1u);
}

TEST(ReadIndex, PendingReadsAreBounded) {
  TestCluster cluster(3, 55, [](RaftConfig& config) { config.max_pending_read_requests = 3; });
  cluster.elect(N(1));
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(cluster.core(N(1)).read_index("r").is_ok());
  EXPECT_EQ(cluster.core(N(1)).read_index("r").code(), StatusCode::kUnavailable);
}

TEST(LeadershipTransfer, CaughtUpTargetTakesOverAtOnce) {
  TestCluster cluster(3, 60);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  const Term term = cluster.core(N(1)).term();
  ASSERT_TRUE(cluster.core(N(1)).transfer_leadership(N(3)).is_ok());
  cluster.stabilize();
  EXPECT_EQ(cluster.core(N(3)).role(), Role::kLeader);
  EXPECT_EQ(cluster.core(N(3)).term(), term.next());
  EXPECT_EQ(cluster.core(N(1)).leader(), N(3));
}

TEST(LeadershipTransfer, LaggingTargetCatchesUpFirst) {
  TestCluster cluster(3, 61);
  cluster.elect(N(1));
  cluster.isolate(N(3));
  for (int i = 0; i < 10; ++i) cluster.propose(N(1), "l" + std::to_string(i));
  cluster.heal();
  cluster.sent_log().clear();
  ASSERT_TRUE(cluster.core(N(1)).transfer_leadership(N(3)).is_ok());
  EXPECT_EQ(cluster.core(N(1)).propose("refused").status().code(), StatusCode::kUnavailable)
      << "no proposals during a transfer";
  cluster.tick_all(3);  // heartbeats reveal that node 3 is back and resume replication to it
  EXPECT_EQ(cluster.core(N(3)).role(), Role::kLeader);
  // TimeoutNow went out only after the target's log matched.
  bool saw_catch_up = false;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == MessageType::kAppend && message.to == N(3) && !message.entries.empty()) saw_catch_up = true;
    if (message.type == MessageType::kTimeoutNow) {
      EXPECT_TRUE(saw_catch_up) << "TimeoutNow before the target caught up";
    }
  }
  EXPECT_EQ(cluster.node(N(3)).state.size(), 10u);
}

TEST(LeadershipTransfer, AbandonedAfterAnElectionTimeoutWhenTargetIsUnreachable) {
  TestCluster cluster(3, 62);
  cluster.elect(N(1));
  cluster.isolate(N(3));
  cluster.propose(N(1), "a");
  ASSERT_TRUE(cluster.core(N(1)).transfer_leadership(N(3)).is_ok());
  EXPECT_EQ(cluster.core(N(1)).status().transfer_target, N(3));
  cluster.tick_all(test_config(N(1)).election_timeout_ticks);
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kLeader);
  EXPECT_EQ(cluster.core(N(1)).status().transfer_target, NodeId(0));
  EXPECT_TRUE(cluster.core(N(1)).propose("accepted again").is_ok());
}

TEST(LeadershipTransfer, RefusedOnFollowersAndForNonVoters) {
  TestCluster cluster(3, 63);
  cluster.elect(N(1));
  EXPECT_EQ(cluster.core(N(2)).transfer_leadership(N(3)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cluster.core(N(1)).transfer_leadership(N(9)).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mayfly::replication::testing
