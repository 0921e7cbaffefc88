// Randomized runs: every feature at once (drops, partitions, crashes, compaction, snapshots, reads, transfers,
// membership changes) under many seeds, with the harness's safety checkers and check_invariants on every step. At
// the end the network heals and every replica must converge on the same state.
#include <gtest/gtest.h>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

// What a run exercised, so the test can insist that the faults and features really happened.
struct Coverage {
  int snapshots_installed = 0;
  int config_changes_committed = 0;
  int reads_answered = 0;
};

void random_run(uint64_t seed, Coverage& coverage) {
  TestCluster cluster(5, seed);
  Prng& prng = cluster.prng();
  int proposals = 0;
  for (int round = 0; round < 150; ++round) {
    cluster.set_drop_percent(prng.chance(1, 3) ? prng.uniform(20) : 0);
    cluster.tick_all();
    const NodeId leader = cluster.leader();
    const uint64_t action = prng.uniform(100);
    const NodeId victim = N(prng.range(1, 5));
    if (leader != NodeId(0) && action < 40) {
      if (cluster.core(leader).propose("v" + std::to_string(round)).is_ok()) ++proposals;
    } else if (action < 48) {
      cluster.isolate(victim);
    } else if (action < 55) {
      cluster.heal();
    } else if (action < 60 && leader != victim) {
      cluster.crash(victim);
    } else if (action < 70) {
      for (NodeId id : cluster.ids()) {
        if (!cluster.node(id).core) cluster.restart(id);
      }
    } else if (action < 78 && cluster.node(victim).core) {
      cluster.snapshot_and_compact(victim);
    } else if (action < 85 && cluster.node(victim).core) {
      (void)cluster.core(victim).read_index("r" + std::to_string(round));
    } else if (action < 88 && leader != NodeId(0)) {
      (void)cluster.core(leader).transfer_leadership(victim);
    } else if (action < 92 && leader != NodeId(0)) {
      // Remove and re-add (as a learner, then promoted) a follower; one change at a time, so most are refused.
      const Membership& members = cluster.core(leader).membership();
      ConfigChange change{ConfigChangeType::kRemoveNode, victim};
      if (victim == leader) continue;
      if (members.is_learner(victim)) change.type = ConfigChangeType::kPromoteLearner;
      if (!members.contains(victim)) change.type = ConfigChangeType::kAddLearner;
      if (change.type == ConfigChangeType::kRemoveNode && members.voters.size() <= 3) continue;
      (void)cluster.core(leader).propose_config_change(change);
    }
  }
  // Heal everything and bring every member back in as a voter.
  cluster.set_drop_percent(0);
  cluster.heal();
  for (NodeId id : cluster.ids()) {
    if (!cluster.node(id).core) cluster.restart(id);
  }
  for (int attempt = 0; attempt < 40; ++attempt) {
    cluster.tick_all(5);
    const NodeId leader = cluster.leader();
    if (leader == NodeId(0)) continue;
    const Membership members = cluster.core(leader).membership();
    if (members.voters.size() == 5) break;
    for (NodeId id : cluster.ids()) {
      if (members.is_voter(id)) continue;
      const ConfigChangeType type =
          members.is_learner(id) ? ConfigChangeType::kPromoteLearner : ConfigChangeType::kAddLearner;
      (void)cluster.core(leader).propose_config_change({type, id});
      break;
    }
  }
  const NodeId leader = cluster.tick_until_leader();
  ASSERT_NE(leader, NodeId(0)) << "seed=" << seed;
  EXPECT_EQ(cluster.core(leader).membership().voters.size(), 5u) << "seed=" << seed;
  cluster.propose(leader, "final");
  cluster.tick_all(20);
  for (NodeId id : cluster.ids()) {
    ASSERT_FALSE(cluster.node(id).state.empty()) << "node " << id << " seed=" << seed;
    EXPECT_EQ(cluster.node(id).state.back(), "final") << "node " << id << " seed=" << seed;
  }
  cluster.expect_states_equal();
  EXPECT_GT(proposals, 5) << "seed=" << seed;
  for (NodeId id : cluster.ids()) {
    coverage.snapshots_installed += cluster.node(id).snapshots_installed;
    coverage.reads_answered += static_cast<int>(cluster.node(id).read_states.size());
  }
  for (const auto& [index, entry] : cluster.committed()) {
    if (entry.type == EntryType::kConfigChange && entry.term > Term(1)) ++coverage.config_changes_committed;
  }
}

TEST(RandomizedRuns, SafetyAndConvergenceUnderEveryFault) {
  Coverage coverage;
  for (uint64_t seed = 1000; seed < 1040; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    random_run(seed, coverage);
    if (HasFatalFailure()) return;
  }
  std::printf("snapshots installed %d, config changes committed %d, reads answered %d\n",
              coverage.snapshots_installed, coverage.config_changes_committed, coverage.reads_answered);
  EXPECT_GT(coverage.snapshots_installed, 0);
  EXPECT_GT(coverage.config_changes_committed, 0);
  EXPECT_GT(coverage.reads_answered, 0);
}

}  // namespace
}  // namespace mayfly::replication::testing
