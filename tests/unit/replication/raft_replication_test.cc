// Log replication and commitment: the paper's Log Matching, Leader Append-Only, Leader Completeness and State
// Machine Safety rules, commitment of current-term entries only (Figure 8), log repair, batching and flow control.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

TEST(LogReplication, CommittedEntriesReachEveryStateMachineInOrder) {
  TestCluster cluster(3, 20);
  cluster.elect(N(1));
  for (int i = 0; i < 20; ++i) cluster.propose(N(1), "e" + std::to_string(i));
  cluster.tick_all(2);
  for (NodeId id : cluster.ids()) {
    ASSERT_EQ(cluster.node(id).state.size(), 20u) << "node " << id;
    EXPECT_EQ(cluster.node(id).state.front(), "e0");
    EXPECT_EQ(cluster.node(id).state.back(), "e19");
  }
}

TEST(LogReplication, MinorityCannotCommit) {
  TestCluster cluster(5, 21);
  cluster.elect(N(1));
  const LogIndex commit = cluster.core(N(1)).status().commit;
  for (uint64_t id : {3, 4, 5}) cluster.cut(N(1), N(id));
  const Proposal proposal = cluster.propose(N(1), "lonely");
  cluster.tick_all(3);
  EXPECT_EQ(cluster.core(N(1)).status().commit, commit);
  EXPECT_GE(cluster.core(N(2)).status().last_index, proposal.index) << "replicated, yet not committed";
  EXPECT_TRUE(cluster.node(N(1)).state.empty());
}

// A proposal made to a leader that loses its quorum is lost: its index is later committed with another term, and
// the driver learns that by comparing (index, term).
TEST(LogReplication, ProposalOfADeposedLeaderIsReplacedAtItsIndex) {
  TestCluster cluster(3, 22);
  cluster.elect(N(1));
  cluster.isolate(N(1));
  const Proposal lost = cluster.propose(N(1), "lost");
  cluster.elect(N(2));
  cluster.propose(N(2), "kept");
  cluster.heal();
  cluster.tick_all(5);
  const Entry& at_index = cluster.committed().at(lost.index.value());
  EXPECT_NE(at_index.term, lost.term);
  for (NodeId id : cluster.ids()) {
    EXPECT_EQ(std::count(cluster.node(id).state.begin(), cluster.node(id).state.end(), "lost"), 0);
    EXPECT_EQ(cluster.node(id).state, std::vector<std::string>{"kept"});
  }
}

// Leader Append-Only (§5.3): a leader never overwrites or deletes entries in its log; it only appends.
TEST(LeaderAppendOnly, LeaderLogOnlyGrowsWhileItLeads) {
  TestCluster cluster(3, 23);
  cluster.elect(N(1));
  const Term term = cluster.core(N(1)).term();
  std::vector<Entry> before = cluster.log_of(N(1));
  for (int round = 0; round < 20; ++round) {
    if (round == 5) cluster.isolate(N(3));
    if (round == 12) cluster.heal();
    cluster.propose(N(1), "r" + std::to_string(round));
    cluster.tick_all();
    ASSERT_EQ(cluster.core(N(1)).term(), term);
    const std::vector<Entry> after = cluster.log_of(N(1));
    ASSERT_GE(after.size(), before.size());
    ASSERT_TRUE(std::equal(before.begin(), before.end(), after.begin())) << "round " << round;
    before = after;
  }
}

// Log Matching (§5.3): if two logs contain an entry with the same index and term, the logs are identical in all
// entries up through that index. Checked on every pair of nodes after random faults.
TEST(LogMatching, LogsWithAnEqualEntryAgreeOnThePrefix) {
  for (uint64_t seed = 200; seed < 208; ++seed) {
    TestCluster cluster(5, seed);
    cluster.set_drop_percent(10);
    for (int round = 0; round < 40; ++round) {
      cluster.tick_all(2);
      const NodeId leader = cluster.leader();
      if (leader != NodeId(0)) (void)cluster.core(leader).propose("s" + std::to_string(round));
      if (round % 10 == 4) cluster.isolate(N(cluster.prng().range(1, 5)));
      if (round % 10 == 8) cluster.heal();
    }
    cluster.stabilize();
    for (NodeId a : cluster.ids()) {
      const std::vector<Entry> log_a = cluster.log_of(a);
      for (NodeId b : cluster.ids()) {
        const std::vector<Entry> log_b = cluster.log_of(b);
        const size_t common = std::min(log_a.size(), log_b.size());
        size_t last_equal = 0;
        for (size_t i = 0; i < common; ++i) {
          if (log_a[i].term == log_b[i].term) last_equal = i + 1;
        }
        for (size_t i = 0; i < last_equal; ++i) {
          ASSERT_EQ(log_a[i], log_b[i]) << "nodes " << a << "," << b << " index " << i + 1 << " seed=" << seed;
        }
      }
    }
  }
}

// Leader Completeness (§5.4): a leader's log holds every entry committed in earlier terms. Checked each time a new
// leader appears during random partitions and crashes. (State Machine Safety is checked by the harness.)
TEST(LeaderCompleteness, EveryNewLeaderHoldsAllCommittedEntries) {
  for (uint64_t seed = 300; seed < 308; ++seed) {
    TestCluster cluster(5, seed);
    Term last_checked;
    int leaders_seen = 0;
    for (int round = 0; round < 60; ++round) {
      cluster.tick_all();
      const NodeId leader = cluster.leader();
      if (leader == NodeId(0)) continue;
      (void)cluster.core(leader).propose("c" + std::to_string(round));
      if (cluster.core(leader).term() != last_checked) {
        last_checked = cluster.core(leader).term();
        ++leaders_seen;
        RaftCore& core = cluster.core(leader);
        cluster.stabilize();
        for (const auto& [index, entry] : cluster.committed()) {
          if (LogIndex(index) < core.status().first_index) continue;
          const std::vector<Entry> log = cluster.log_of(leader);
          ASSERT_GE(log.size(), index) << "leader " << leader << " misses committed " << index << " seed=" << seed;
          ASSERT_EQ(log[index - 1], entry) << "seed=" << seed;
        }
      }
      if (round % 12 == 5) cluster.crash(leader);
      if (round % 12 == 11) {
        for (NodeId id : cluster.ids()) {
          if (!cluster.node(id).core) cluster.restart(id);
        }
      }
      if (round % 12 == 8) cluster.isolate(N(cluster.prng().range(1, 5)));
      if (round % 12 == 10) cluster.heal();
    }
    EXPECT_GE(leaders_seen, 2) << "the test must exercise leader changes; seed=" << seed;
  }
}

// Figure 8 (§5.4.2): a leader does not commit an entry from an earlier term by counting replicas, even when a
// majority stores it; only once an entry of its own term is replicated on a majority.
TEST(CommitRule, OnlyCurrentTermEntriesAreCommittedByCountingReplicas) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  // After the bootstrap entries 1..3 (term 1): 4 (term 1, committed) and 5 (term 2, not committed).
  ASSERT_TRUE(storage.append({make_entry(4, 1), make_entry(5, 2)}).is_ok());
  storage.set_hard_state(HardState{Term(2), NodeId(0), LogIndex(4)});
  auto created = RaftCore::create(test_config(N(1)), storage, Prng(30));
  ASSERT_TRUE(created.is_ok());
  RaftCore& core = **created;
  while (core.role() != Role::kPreCandidate) core.tick(1'000);
  ASSERT_TRUE(
      core.step(Message{.type = MessageType::kPreVoteResponse, .from = N(2), .to = N(1), .term = Term(3)}).is_ok());
  ASSERT_TRUE(
      core.step(Message{.type = MessageType::kVoteResponse, .from = N(2), .to = N(1), .term = Term(3)}).is_ok());
  ASSERT_EQ(core.role(), Role::kLeader);
  drain(core, storage);
  ASSERT_EQ(core.status().last_index, LogIndex(6)) << "the no-op of term 3";

  // Node 2 acknowledges index 5 (term 2): now stored on a majority (nodes 1 and 2), but from an earlier term.
  ASSERT_TRUE(core.step(Message{.type = MessageType::kAppendResponse, .from = N(2), .to = N(1), .term = Term(3),
                                .index = LogIndex(5)})
                  .is_ok());
  drain(core, storage);
  EXPECT_EQ(core.status().commit, LogIndex(4)) << "must not commit a term-2 entry by counting";

  // Node 2 acknowledges the term-3 no-op: it commits, and index 5 with it.
  ASSERT_TRUE(core.step(Message{.type = MessageType::kAppendResponse, .from = N(2), .to = N(1), .term = Term(3),
                                .index = LogIndex(6)})
                  .is_ok());
  drain(core, storage);
  EXPECT_EQ(core.status().commit, LogIndex(6));
  core.check_invariants();
}

// The leader counts itself only for entries its own disk holds (advance), so a crash before the fsync can never
// lose an entry the followers were told is committed.
TEST(CommitRule, LeaderCountsItselfOnlyAfterPersisting) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  auto created = RaftCore::create(test_config(N(1)), storage, Prng(31));
  ASSERT_TRUE(created.is_ok());
  RaftCore& core = **created;
  while (core.role() != Role::kPreCandidate) core.tick(1'000);
  ASSERT_TRUE(
      core.step(Message{.type = MessageType::kPreVoteResponse, .from = N(2), .to = N(1), .term = Term(2)}).is_ok());
  ASSERT_TRUE(
      core.step(Message{.type = MessageType::kVoteResponse, .from = N(2), .to = N(1), .term = Term(2)}).is_ok());
  ASSERT_EQ(core.role(), Role::kLeader);
  Ready ready = core.ready();  // holds the no-op, not yet persisted
  ASSERT_EQ(ready.entries.size(), 1u);
  ASSERT_TRUE(storage.append(ready.entries).is_ok());
  if (ready.hard_state) storage.set_hard_state(*ready.hard_state);
  core.advance(ready);
  const Proposal proposal = *core.propose("x");
  // Node 2 acks the new entry before the leader persisted it: only 1 of 3 disks has it.
  ASSERT_TRUE(core.step(Message{.type = MessageType::kAppendResponse, .from = N(2), .to = N(1), .term = Term(2),
                                .index = proposal.index})
                  .is_ok());
  EXPECT_LT(core.status().commit, proposal.index);
  drain(core, storage);  // the leader persists it: now 2 of 3
  EXPECT_EQ(core.status().commit, proposal.index);
}

// Log repair (§5.3): a follower holding uncommitted entries of a deposed leader is brought back in line, and fast
// backtracking needs one rejection per diverging term rather than one per entry.
TEST(LogRepair, DivergentFollowerIsOverwrittenWithFewRoundTrips) {
  TestCluster cluster(3, 24);
  // After the bootstrap entries 1..3: committed 4, 5 (term 1); then terms diverge.
  std::vector<Entry> good;
  for (uint64_t i = 4; i <= 8; ++i) good.push_back(make_entry(i, i <= 5 ? 1 : 2, "good" + std::to_string(i)));
  std::vector<Entry> divergent = {make_entry(4, 1, "good4"), make_entry(5, 1, "good5")};
  for (uint64_t i = 6; i <= 40; ++i) divergent.push_back(make_entry(i, 3, "stale" + std::to_string(i)));
  cluster.reset_log(N(1), good, HardState{Term(4), NodeId(0), LogIndex(5)});
  cluster.reset_log(N(2), good, HardState{Term(4), NodeId(0), LogIndex(5)});
  cluster.reset_log(N(3), divergent, HardState{Term(4), NodeId(0), LogIndex(5)});
  cluster.elect(N(1));
  cluster.tick_all(3);
  EXPECT_EQ(cluster.log_of(N(3)), cluster.log_of(N(1)));
  int rejections = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == MessageType::kAppendResponse && message.reject && message.from == N(3)) ++rejections;
  }
  EXPECT_GE(rejections, 1);
  EXPECT_LE(rejections, 2) << "one rejection per diverging term, not per entry";
  cluster.expect_states_equal();
}

TEST(LogRepair, FollowerMissingEntriesCatchesUpAfterRestart) {
  TestCluster cluster(3, 25);
  cluster.elect(N(1));
  cluster.crash(N(3));
  for (int i = 0; i < 30; ++i) cluster.propose(N(1), "m" + std::to_string(i));
  cluster.restart(N(3));
  cluster.tick_all(3);
  EXPECT_EQ(cluster.node(N(3)).state.size(), 30u);
  cluster.expect_states_equal();
}

TEST(Restart, WholeClusterRestartsWithItsCommittedStateAndDoesNotReapply) {
  TestCluster cluster(3, 26);
  cluster.elect(N(1));
  for (int i = 0; i < 5; ++i) cluster.propose(N(1), "p" + std::to_string(i));
  cluster.tick_all(2);
  for (NodeId id : cluster.ids()) cluster.crash(id);
  for (NodeId id : cluster.ids()) cluster.restart(id);
  const NodeId leader = cluster.tick_until_leader();
  cluster.propose(leader, "after");
  cluster.tick_all(2);
  for (NodeId id : cluster.ids()) {
    EXPECT_EQ(cluster.node(id).state.size(), 6u) << "node " << id << " re-applied or lost entries";
  }
}

// Batching: proposals made before the driver asks for a Ready travel in one append per follower.
TEST(FlowControl, ProposalsInOneBatchShareOneAppendPerFollower) {
  TestCluster cluster(3, 27);
  cluster.elect(N(1));
  cluster.sent_log().clear();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(cluster.core(N(1)).propose("b" + std::to_string(i)).is_ok());
  cluster.stabilize();
  int appends_with_entries = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == MessageType::kAppend && !message.entries.empty()) {
      ++appends_with_entries;
      EXPECT_EQ(message.entries.size(), 10u);
    }
  }
  EXPECT_EQ(appends_with_entries, 2);
}

// Pipelining with a bounded window: without acks, at most max_inflight_messages appends are outstanding.
TEST(FlowControl, InflightAppendsAreBoundedWithoutAcks) {
  TestCluster cluster(3, 28);
  cluster.elect(N(1));
  cluster.set_filter([](const Message& message) {
    return message.type == MessageType::kAppendResponse && message.from == N(2);
  });
  cluster.sent_log().clear();
  for (int i = 0; i < 20; ++i) cluster.propose(N(1), "w" + std::to_string(i));
  int appends_to_2 = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == MessageType::kAppend && message.to == N(2) && !message.entries.empty()) ++appends_to_2;
  }
  EXPECT_EQ(appends_to_2, test_config(N(2)).max_inflight_messages);
  cluster.set_filter({});
  cluster.tick_all(3);
  EXPECT_EQ(cluster.node(N(2)).state.size(), 20u) << "resumes once acks flow again";
}

// The window is bounded in bytes too: a follower catching up from far behind gets about max_inflight_bytes of log
// unacknowledged, not max_inflight_messages full messages (with mayflyd's 4 MB messages, 256 of them were 1 GB, which
// the transport's 64 MB queue per peer then dropped from the front).
TEST(FlowControl, InflightAppendsAreBoundedByBytes) {
  TestCluster cluster(3, 31, [](RaftConfig& config) {
    config.max_inflight_messages = 64;
    config.max_inflight_bytes = 1000;  // full once 1000 bytes are unacknowledged, whatever the message count
  });
  cluster.elect(N(1));
  cluster.set_filter([](const Message& message) {
    return message.type == MessageType::kAppendResponse && message.from == N(2);
  });
  cluster.sent_log().clear();
  for (int i = 0; i < 40; ++i) cluster.propose(N(1), std::string(200, 'a' + i % 26));  // 232 bytes an entry
  int appends_to_2 = 0;
  uint64_t unacked_bytes = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type != MessageType::kAppend || message.to != N(2) || message.entries.empty()) continue;
    ++appends_to_2;
    for (const Entry& entry : message.entries) unacked_bytes += entry.size_bytes();
  }
  EXPECT_EQ(appends_to_2, 5) << "four appends hold 928 bytes, the fifth passes 1000";
  EXPECT_EQ(unacked_bytes, 5u * 232u);
  cluster.set_filter({});
  cluster.tick_all(3);
  EXPECT_EQ(cluster.node(N(2)).state.size(), 40u) << "resumes once acks flow again";
}

TEST(FlowControl, MessagesRespectMaxMessageBytes) {
  TestCluster cluster(3, 29);
  cluster.elect(N(1));
  cluster.crash(N(3));
  for (int i = 0; i < 40; ++i) cluster.propose(N(1), std::string(200, 'a' + i % 26));
  cluster.sent_log().clear();
  cluster.restart(N(3));
  cluster.tick_all(3);
  int appends = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type != MessageType::kAppend || message.entries.empty()) continue;
    ++appends;
    uint64_t bytes = 0;
    for (const Entry& entry : message.entries) bytes += entry.size_bytes();
    EXPECT_LE(bytes, test_config(N(1)).max_message_bytes);
  }
  EXPECT_GT(appends, 1) << "catch-up must be split";
  EXPECT_EQ(cluster.node(N(3)).state.size(), 40u);
}

TEST(Proposals, RefusedOnFollowersOverSizeAndOverTheUncommittedLimit) {
  TestCluster cluster(3, 30, [](RaftConfig& config) {
    config.max_uncommitted_bytes = 1000;
    config.max_entry_bytes = 500;
  });
  cluster.elect(N(1));
  EXPECT_EQ(cluster.core(N(2)).propose("x").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cluster.core(N(1)).propose(std::string(501, 'x')).status().code(), StatusCode::kInvalidArgument);
  cluster.isolate(N(1));
  int accepted = 0;
  for (int i = 0; i < 100; ++i) {
    Result<Proposal> proposal = cluster.core(N(1)).propose(std::string(100, 'x'));
    if (!proposal.is_ok()) {
      EXPECT_EQ(proposal.status().code(), StatusCode::kUnavailable);
      break;
    }
    ++accepted;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 10);
  cluster.heal();
  cluster.tick_all(3);
  EXPECT_TRUE(cluster.core(N(1)).propose(std::string(100, 'x')).is_ok()) << "room again once committed";
}

// Ready::must_sync: entries (and votes) need the fsync; a Ready that only moves the commit index does not.
TEST(ReadyContract, OnlyDurableStateChangesRequireSync) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2), N(3)}});
  auto created = RaftCore::create(test_config(N(2)), storage, Prng(32));
  ASSERT_TRUE(created.is_ok());
  RaftCore& follower = **created;
  drain(follower, storage);
  Message append{.type = MessageType::kAppend, .from = N(1), .to = N(2), .term = Term(1), .log_term = Term(1),
                 .index = LogIndex(3)};
  append.entries = {make_entry(4, 1, "x")};
  ASSERT_TRUE(follower.step(append).is_ok());
  Ready with_entries = follower.ready();
  EXPECT_TRUE(with_entries.must_sync);
  ASSERT_EQ(with_entries.entries.size(), 1u);
  ASSERT_EQ(with_entries.messages_after_persist.size(), 1u) << "the ack waits for the fsync";
  EXPECT_TRUE(with_entries.messages.empty());
  ASSERT_TRUE(storage.append(with_entries.entries).is_ok());
  follower.advance(with_entries);

  ASSERT_TRUE(follower
                  .step(Message{.type = MessageType::kHeartbeat, .from = N(1), .to = N(2), .term = Term(1),
                                .commit = LogIndex(4)})
                  .is_ok());
  Ready commit_only = follower.ready();
  ASSERT_TRUE(commit_only.hard_state.has_value());
  EXPECT_EQ(commit_only.hard_state->commit, LogIndex(4));
  EXPECT_FALSE(commit_only.must_sync);
  ASSERT_EQ(commit_only.committed_entries.size(), 1u);
  EXPECT_EQ(commit_only.committed_entries[0].data, "x");
  storage.set_hard_state(*commit_only.hard_state);
  follower.advance(commit_only);
  follower.check_invariants();
  EXPECT_EQ(follower.status().applied, LogIndex(4));
}

TEST(ReadyContractDeathTest, CallingTheCoreBetweenReadyAndAdvanceIsABug) {
  MemoryLogStorage storage(Membership{.voters = {N(1)}});
  auto created = RaftCore::create(test_config(N(1)), storage, Prng(33));
  ASSERT_TRUE(created.is_ok());
  RaftCore& core = **created;
  Ready ready = core.ready();
  EXPECT_DEATH(core.tick(0), "between ready\\(\\) and advance\\(\\)");
}

TEST(Step, RejectsMessagesNotMeantForThisNodeAndMalformedAppends) {
  TestCluster cluster(3, 31);
  cluster.elect(N(1));
  RaftCore& follower = cluster.core(N(2));
  const Term term = follower.term();
  EXPECT_EQ(follower.step(Message{.type = MessageType::kHeartbeat, .from = N(1), .to = N(3), .term = term})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(follower.step(Message{.type = MessageType::kHeartbeat, .from = N(2), .to = N(2), .term = term})
                .code(),
            StatusCode::kInvalidArgument);
  Message gap{.type = MessageType::kAppend, .from = N(1), .to = N(2), .term = term, .index = LogIndex(1)};
  gap.entries = {make_entry(3, term.value())};
  EXPECT_EQ(follower.step(gap).code(), StatusCode::kInvalidArgument);
  follower.check_invariants();
}

}  // namespace
}  // namespace mayfly::replication::testing
