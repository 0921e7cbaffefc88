// Leader election: the paper's Election Safety rule, the election restriction, pre-vote and check-quorum.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

TEST(LeaderElection, ThreeNodesElectOneLeaderAndEveryoneFollowsIt) {
  TestCluster cluster(3, /*seed=*/1);
  const NodeId leader = cluster.tick_until_leader();
  ASSERT_NE(leader, NodeId(0));
  cluster.tick_all(3);
  for (NodeId id : cluster.ids()) {
    EXPECT_EQ(cluster.core(id).leader(), leader) << "node " << id;
    EXPECT_EQ(cluster.core(id).term(), cluster.core(leader).term());
  }
}

// The leader a follower accepted in its term is persisted with the term (HardState::leader) and known again after a
// restart, though the restarted core has heard from no leader yet: peer admission (node/peer_admission.h) hears it.
TEST(LeaderElection, TheTermsLeaderIsRememberedAcrossARestart) {
  TestCluster cluster(3, /*seed=*/4);
  cluster.elect(N(1));
  cluster.propose(N(1), "x");
  const Term term = cluster.core(N(2)).term();
  EXPECT_EQ(cluster.core(N(2)).status().term_leader, N(1));
  cluster.crash(N(2));
  cluster.restart(N(2));
  EXPECT_EQ(cluster.core(N(2)).term(), term);
  EXPECT_EQ(cluster.core(N(2)).leader(), NodeId(0));
  EXPECT_EQ(cluster.core(N(2)).status().term_leader, N(1));
  // A new term forgets it: the leader of an earlier term is no one's to follow.
  cluster.elect(N(3));
  EXPECT_EQ(cluster.core(N(2)).status().term_leader, N(3));
  EXPECT_GT(cluster.core(N(2)).term(), term);
}

// A voter that refuses a (pre-)vote names the leader it follows; the candidate remembers it as its term's leader
// (peer admission then hears that leader even if the candidate's membership, behind, leaves it out) — but Raft does
// not follow it before hearing from it.
TEST(LeaderElection, ARefusedVoteNamesTheLeaderTheVoterFollows) {
  TestCluster cluster(3, /*seed=*/5);
  cluster.elect(N(1));
  const Term term = cluster.core(N(2)).term();
  // Node 3 asks node 2 for a pre-vote for the term node 2 is in: refused, naming node 1.
  ASSERT_TRUE(cluster.core(N(2))
                  .step(Message{.type = MessageType::kPreVote,
                                .from = N(3),
                                .to = N(2),
                                .term = term,
                                .log_term = term,
                                .index = LogIndex(1000)})
                  .is_ok());
  const Ready ready = cluster.core(N(2)).ready();
  std::vector<Message> sent = ready.messages;
  sent.insert(sent.end(), ready.messages_after_persist.begin(), ready.messages_after_persist.end());
  cluster.core(N(2)).advance(ready);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type, MessageType::kPreVoteResponse);
  EXPECT_TRUE(sent[0].reject);
  EXPECT_EQ(sent[0].leader, N(1));
  // A candidate a term behind that hears it: it moves to the term and remembers the leader, not following it yet.
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  auto behind = RaftCore::create(test_config(N(3)), storage, Prng(9));
  ASSERT_TRUE(behind.is_ok());
  Message refusal = sent[0];
  refusal.to = N(3);
  ASSERT_TRUE((*behind)->step(refusal).is_ok());
  EXPECT_EQ((*behind)->term(), term);
  EXPECT_EQ((*behind)->leader(), NodeId(0));
  EXPECT_EQ((*behind)->status().term_leader, N(1));
}

TEST(LeaderElection, SingleVoterElectsItselfAndCommitsAlone) {
  TestCluster cluster(1, /*seed=*/2);
  cluster.elect(N(1));
  const Proposal proposal = cluster.propose(N(1), "x");
  EXPECT_EQ(cluster.core(N(1)).status().commit, proposal.index);
  EXPECT_EQ(cluster.node(N(1)).state, std::vector<std::string>{"x"});
}

// Election Safety (§5.2): at most one leader can be elected in a given term — checked by the harness on every step
// while messages are dropped at random and leaders come and go.
TEST(ElectionSafety, AtMostOneLeaderPerTermUnderMessageLoss) {
  for (uint64_t seed = 100; seed < 110; ++seed) {
    TestCluster cluster(5, seed);
    cluster.set_drop_percent(20);
    for (int round = 0; round < 30; ++round) {
      cluster.tick_all(5);
      const NodeId leader = cluster.leader();
      if (leader != NodeId(0)) (void)cluster.core(leader).propose("v" + std::to_string(round));
      if (round % 7 == 3 && leader != NodeId(0)) cluster.isolate(leader);
      if (round % 7 == 6) cluster.heal();
    }
    cluster.set_drop_percent(0);
    cluster.heal();
    cluster.tick_all(50);
    EXPECT_NE(cluster.leader(), NodeId(0)) << "seed=" << seed;
  }
}

// Forges votes so that nodes 2 and 3 both win the term after node 1's.
void forge_two_leaders_in_one_term() {
  TestCluster cluster(3, 3);
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  for (uint64_t id : {2, 3}) {
    ASSERT_TRUE(
        cluster.core(N(id)).step(Message{.type = MessageType::kTimeoutNow, .from = N(1), .to = N(id), .term = term})
            .is_ok());
    ASSERT_TRUE(
        cluster.core(N(id))
            .step(Message{.type = MessageType::kVoteResponse, .from = N(1), .to = N(id), .term = term.next()})
            .is_ok());
  }
  cluster.stabilize();
}

// The harness itself must catch two leaders in one term, or the election-safety test proves nothing.
TEST(ElectionSafety, CheckerCatchesTwoLeadersInOneTerm) {
  EXPECT_FATAL_FAILURE(forge_two_leaders_in_one_term(), "two leaders in term");
}

// The election restriction (§5.4.1): a voter refuses a candidate whose log is less up to date than its own.
TEST(LeaderElection, VoterRejectsCandidateWithStaleLog) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  // After the bootstrap entries 1..3 (term 1): 4 (term 1), 5 (term 2).
  ASSERT_TRUE(storage.append({make_entry(4, 1), make_entry(5, 2)}).is_ok());
  storage.set_hard_state(HardState{Term(2), NodeId(0), LogIndex(3)});
  auto core = RaftCore::create(test_config(N(1)), storage, Prng(7));
  ASSERT_TRUE(core.is_ok());
  RaftCore& voter = **core;

  // Candidate 2 ends at (index 6, term 1): a longer log but an older last term.
  ASSERT_TRUE(voter
                  .step(Message{.type = MessageType::kVote,
                                .from = N(2),
                                .to = N(1),
                                .term = Term(3),
                                .log_term = Term(1),
                                .index = LogIndex(6)})
                  .is_ok());
  // Candidate 3 ends at (index 5, term 2): as up to date.
  ASSERT_TRUE(voter
                  .step(Message{.type = MessageType::kVote,
                                .from = N(3),
                                .to = N(1),
                                .term = Term(3),
                                .log_term = Term(2),
                                .index = LogIndex(5)})
                  .is_ok());
  voter.check_invariants();
  Ready ready = voter.ready();
  ASSERT_EQ(ready.messages_after_persist.size(), 2u);
  EXPECT_TRUE(ready.messages_after_persist[0].reject) << "stale log must be refused";
  EXPECT_FALSE(ready.messages_after_persist[1].reject) << "up-to-date log gets the vote";
  ASSERT_TRUE(ready.hard_state.has_value());
  EXPECT_EQ(ready.hard_state->vote, N(3));
  EXPECT_TRUE(ready.messages.empty()) << "votes may only leave after the vote is persisted";
}

// One vote per term (§5.2): having voted for 2, the voter refuses 3 in the same term but repeats its vote for 2.
TEST(LeaderElection, VoterGrantsAtMostOneCandidatePerTerm) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  auto core = RaftCore::create(test_config(N(1)), storage, Prng(8));
  ASSERT_TRUE(core.is_ok());
  RaftCore& voter = **core;
  for (uint64_t candidate : {2, 3, 2}) {
    ASSERT_TRUE(voter
                    .step(Message{.type = MessageType::kVote,
                                  .from = N(candidate),
                                  .to = N(1),
                                  .term = Term(2),
                                  .log_term = Term(1),
                                  .index = LogIndex(3)})
                    .is_ok());
  }
  Ready ready = voter.ready();
  ASSERT_EQ(ready.messages_after_persist.size(), 3u);
  EXPECT_FALSE(ready.messages_after_persist[0].reject);
  EXPECT_TRUE(ready.messages_after_persist[1].reject);
  EXPECT_FALSE(ready.messages_after_persist[2].reject);
}

TEST(LeaderElection, LeaderAppendsAnEmptyEntryOfItsTermOnElection) {
  TestCluster cluster(3, 4);
  cluster.elect(N(2));
  const RaftStatus status = cluster.core(N(2)).status();
  EXPECT_EQ(status.last_term, status.term);
  EXPECT_EQ(status.commit, status.last_index) << "the no-op commits once a quorum has it";
  ASSERT_FALSE(cluster.node(N(1)).applied_entries.empty());
  EXPECT_EQ(cluster.node(N(1)).applied_entries.back().type, EntryType::kEmpty);
}

// Pre-vote (thesis §9.6): a node cut off from the cluster keeps failing pre-votes instead of bumping its term, so
// when it returns the leader is undisturbed.
TEST(PreVote, PartitionedNodeDoesNotBumpTermOrDisruptLeaderOnReturn) {
  TestCluster cluster(3, 5);
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  cluster.isolate(N(3));
  cluster.tick_all(100);
  EXPECT_EQ(cluster.core(N(3)).term(), term) << "pre-vote must not increment the term";
  EXPECT_EQ(cluster.core(N(3)).role(), Role::kPreCandidate);
  cluster.heal();
  cluster.tick_all(20);
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kLeader);
  EXPECT_EQ(cluster.core(N(1)).term(), term);
  EXPECT_EQ(cluster.core(N(3)).leader(), N(1));
}

// Without pre-vote the same partition does bump the term — the behaviour pre-vote exists to prevent.
TEST(PreVote, WithoutPreVoteAPartitionedNodeBumpsItsTerm) {
  TestCluster cluster(3, 6, [](RaftConfig& config) { config.pre_vote = false; });
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  cluster.isolate(N(3));
  cluster.tick_all(100);
  EXPECT_GT(cluster.core(N(3)).term(), term);
}

// Check-quorum: a follower that heard from its leader within the election timeout ignores vote requests, even for
// a higher term (here from a node that returns without pre-vote).
TEST(CheckQuorum, FollowerInLeaseIgnoresVoteRequests) {
  TestCluster cluster(3, 7);
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  ASSERT_TRUE(cluster.core(N(2))
                  .step(Message{.type = MessageType::kVote,
                                .from = N(3),
                                .to = N(2),
                                .term = Term(term.value() + 5),
                                .log_term = Term(term.value() + 4),
                                .index = LogIndex(100)})
                  .is_ok());
  EXPECT_EQ(cluster.core(N(2)).term(), term) << "in lease: the request is ignored, the term stays";
  EXPECT_FALSE(cluster.core(N(2)).has_ready());
}

// Check-quorum: a leader that cannot hear a quorum for an election timeout steps down.
TEST(CheckQuorum, LeaderWithoutQuorumStepsDown) {
  TestCluster cluster(3, 8);
  cluster.elect(N(1));
  cluster.cut(N(1), N(2));
  cluster.cut(N(1), N(3));
  for (int i = 0; i < 3 * 10 && cluster.core(N(1)).role() == Role::kLeader; ++i) cluster.tick_all();
  EXPECT_NE(cluster.core(N(1)).role(), Role::kLeader);
  const NodeId leader = cluster.tick_until_leader();
  EXPECT_TRUE(leader == N(2) || leader == N(3));
}

// Without check-quorum a leader cut off from everyone keeps believing it leads.
TEST(CheckQuorum, WithoutCheckQuorumIsolatedLeaderStaysLeader) {
  TestCluster cluster(3, 9, [](RaftConfig& config) { config.check_quorum = false; });
  cluster.elect(N(1));
  cluster.isolate(N(1));
  cluster.tick_all(50);
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kLeader);
}

// A partitioned node rejoining must not disrupt a healthy leader, with both defenses on: the returning node's
// pre-votes are ignored by followers in lease, and its (unchanged) term is not higher.
TEST(CheckQuorum, ReturningPartitionedNodeDoesNotDisruptHealthyLeader) {
  TestCluster cluster(5, 10);
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  for (int i = 0; i < 5; ++i) cluster.propose(N(1), "before-" + std::to_string(i));
  cluster.isolate(N(5));
  cluster.tick_all(60);
  for (int i = 0; i < 5; ++i) cluster.propose(N(1), "during-" + std::to_string(i));
  cluster.heal();
  cluster.tick_all(30);
  EXPECT_EQ(cluster.leader(), N(1));
  EXPECT_EQ(cluster.core(N(1)).term(), term);
  EXPECT_EQ(cluster.node(N(5)).state.size(), 10u) << "the returning node catches up";
  cluster.expect_states_equal();
}

// A stale leader from an old term that reappears learns the new term from any follower and steps down.
TEST(CheckQuorum, StaleLeaderStepsDownWhenItHearsANewerTerm) {
  TestCluster cluster(3, 11, [](RaftConfig& config) { config.check_quorum = false; });
  cluster.elect(N(1));
  cluster.isolate(N(1));
  cluster.elect(N(2));
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kLeader) << "still thinks it leads";
  cluster.heal();
  cluster.tick_all(3);
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kFollower);
  EXPECT_EQ(cluster.core(N(1)).leader(), N(2));
}

}  // namespace
}  // namespace mayfly::replication::testing
