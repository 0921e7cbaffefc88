// Single-server membership changes (thesis §4.1): learners, promotion, removal, one change at a time, and a removed
// leader stepping down. Changes take effect when the config entry is appended.
#include <gtest/gtest.h>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

Status change(TestCluster& cluster, NodeId leader, ConfigChangeType type, NodeId node) {
  Result<Proposal> proposal = cluster.core(leader).propose_config_change(ConfigChange{type, node});
  cluster.stabilize();
  return proposal.status();
}

TEST(Membership, LearnerReceivesTheLogButDoesNotCountForCommit) {
  TestCluster cluster(3, 70);
  cluster.elect(N(1));
  cluster.add_node(N(4), Membership{});
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kAddLearner, N(4)).is_ok());
  cluster.tick_all(3);
  EXPECT_TRUE(cluster.core(N(1)).membership().is_learner(N(4)));
  EXPECT_TRUE(cluster.core(N(4)).membership().is_learner(N(4)));
  cluster.propose(N(1), "for-everyone");
  cluster.tick_all(2);
  EXPECT_EQ(cluster.node(N(4)).state, std::vector<std::string>{"for-everyone"});

  // With two voters down, the learner must not make a quorum.
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  const LogIndex commit = cluster.core(N(1)).status().commit;
  (void)cluster.core(N(1)).propose("needs-a-voter");
  cluster.stabilize();
  EXPECT_EQ(cluster.core(N(1)).status().commit, commit);
}

TEST(Membership, LearnerNeverCampaigns) {
  TestCluster cluster(3, 71);
  cluster.elect(N(1));
  cluster.add_node(N(4), Membership{});
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kAddLearner, N(4)).is_ok());
  cluster.tick_all(3);
  cluster.isolate(N(1));
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  cluster.tick_all(100);
  EXPECT_EQ(cluster.core(N(4)).role(), Role::kFollower);
}

TEST(Membership, PromotedLearnerVotesAndCountsForQuorum) {
  TestCluster cluster(3, 72);
  cluster.elect(N(1));
  cluster.add_node(N(4), Membership{});
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kAddLearner, N(4)).is_ok());
  cluster.tick_all(3);
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kPromoteLearner, N(4)).is_ok());
  cluster.tick_all(3);
  EXPECT_TRUE(cluster.core(N(1)).membership().is_voter(N(4)));
  EXPECT_EQ(cluster.core(N(1)).membership().voters.size(), 4u);
  // Quorum is now 3 of 4: leader + nodes 2 and 4 suffice with 3 down.
  cluster.isolate(N(3));
  cluster.propose(N(1), "three-of-four");
  EXPECT_EQ(cluster.node(N(4)).state.back(), "three-of-four");
  // ...but leader + node 4 alone do not.
  cluster.isolate(N(2));
  const LogIndex commit = cluster.core(N(1)).status().commit;
  (void)cluster.core(N(1)).propose("two-of-four");
  cluster.stabilize();
  EXPECT_EQ(cluster.core(N(1)).status().commit, commit);
}

TEST(Membership, LaggingLearnerIsNotPromoted) {
  TestCluster cluster(3, 79);
  cluster.elect(N(1));
  cluster.add_node(N(4), Membership{});
  cluster.isolate(N(4));
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kAddLearner, N(4)).is_ok());
  cluster.propose(N(1), "x");
  EXPECT_EQ(change(cluster, N(1), ConfigChangeType::kPromoteLearner, N(4)).code(), StatusCode::kUnavailable);
  cluster.heal();
  cluster.tick_all(3);
  EXPECT_TRUE(change(cluster, N(1), ConfigChangeType::kPromoteLearner, N(4)).is_ok());
}

TEST(Membership, RemovedFollowerNoLongerCountsAndCannotDisruptTheCluster) {
  TestCluster cluster(3, 73);
  cluster.elect(N(1));
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kRemoveNode, N(3)).is_ok());
  cluster.tick_all(3);
  EXPECT_EQ(cluster.core(N(1)).membership().voters, (std::set<NodeId>{N(1), N(2)}));
  const Term term = cluster.core(N(1)).term();
  cluster.tick_all(100);  // node 3 hears nothing any more and may try to campaign
  EXPECT_EQ(cluster.leader(), N(1));
  EXPECT_EQ(cluster.core(N(1)).term(), term);
  cluster.propose(N(1), "two-voters");
  EXPECT_EQ(cluster.node(N(2)).state.back(), "two-voters");
}

TEST(Membership, RemovedLeaderStepsDownOnceTheRemovalCommits) {
  TestCluster cluster(3, 74);
  cluster.elect(N(1));
  cluster.propose(N(1), "before");
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kRemoveNode, N(1)).is_ok());
  EXPECT_NE(cluster.core(N(1)).role(), Role::kLeader);
  const NodeId leader = cluster.tick_until_leader();
  EXPECT_TRUE(leader == N(2) || leader == N(3));
  cluster.propose(leader, "after");
  cluster.tick_all(3);
  EXPECT_EQ(cluster.node(N(2)).state, (std::vector<std::string>{"before", "after"}));
  EXPECT_EQ(cluster.node(N(3)).state, (std::vector<std::string>{"before", "after"}));
  cluster.tick_all(50);
  EXPECT_NE(cluster.core(N(1)).role(), Role::kLeader) << "a removed node never leads again";
}

TEST(Membership, OneChangeAtATime) {
  TestCluster cluster(3, 75);
  cluster.elect(N(1));
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  ASSERT_TRUE(cluster.core(N(1)).propose_config_change({ConfigChangeType::kAddLearner, N(4)}).is_ok());
  EXPECT_EQ(cluster.core(N(1)).propose_config_change({ConfigChangeType::kAddLearner, N(5)}).status().code(),
            StatusCode::kUnavailable);
  cluster.heal();
  cluster.tick_all(3);
  EXPECT_TRUE(cluster.core(N(1)).propose_config_change({ConfigChangeType::kAddLearner, N(5)}).is_ok());
}

TEST(Membership, InvalidChangesAreRefused) {
  TestCluster cluster(3, 76);
  cluster.elect(N(1));
  EXPECT_EQ(cluster.core(N(1)).propose_config_change({ConfigChangeType::kAddLearner, N(2)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.core(N(1)).propose_config_change({ConfigChangeType::kPromoteLearner, N(2)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.core(N(1)).propose_config_change({ConfigChangeType::kRemoveNode, N(7)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.core(N(2)).propose_config_change({ConfigChangeType::kRemoveNode, N(3)}).status().code(),
            StatusCode::kUnavailable);
}

// A config entry takes effect on append, so a follower that gets it and then loses it to a new leader must fall
// back to the previous membership.
TEST(Membership, TruncatedConfigEntryIsUndone) {
  TestCluster cluster(5, 77);
  cluster.elect(N(1));
  for (uint64_t id : {3, 4, 5}) cluster.cut(N(1), N(id));
  // Only node 2 gets the change, and the leader never learns it did, so it cannot commit.
  cluster.set_filter([](const Message& message) {
    return message.type == MessageType::kAppendResponse && message.to == N(1);
  });
  ASSERT_TRUE(cluster.core(N(1)).propose_config_change({ConfigChangeType::kRemoveNode, N(5)}).is_ok());
  cluster.stabilize();
  EXPECT_FALSE(cluster.core(N(2)).membership().contains(N(5))) << "takes effect on append, before commit";
  cluster.set_filter({});
  cluster.heal();
  cluster.isolate(N(1));
  cluster.elect(N(3));  // nodes 3, 4, 5 never saw the change
  cluster.propose(N(3), "overwrites");
  cluster.tick_all(3);
  EXPECT_TRUE(cluster.core(N(2)).membership().is_voter(N(5))) << "the truncated change must be undone";
  EXPECT_EQ(cluster.core(N(2)).membership().voters.size(), 5u);
}

TEST(Membership, RestartRebuildsMembershipFromTheLog) {
  TestCluster cluster(3, 78);
  cluster.elect(N(1));
  cluster.add_node(N(4), Membership{});
  ASSERT_TRUE(change(cluster, N(1), ConfigChangeType::kAddLearner, N(4)).is_ok());
  cluster.tick_all(3);
  cluster.crash(N(4));
  cluster.crash(N(2));
  cluster.restart(N(4));
  cluster.restart(N(2));
  EXPECT_TRUE(cluster.core(N(4)).membership().is_learner(N(4)));
  EXPECT_TRUE(cluster.core(N(2)).membership().is_learner(N(4)));
  EXPECT_EQ(cluster.core(N(2)).membership_at(LogIndex(1)).learners.size(), 0u);
}

}  // namespace
}  // namespace mayfly::replication::testing
