// Snapshots and compaction: a follower that needs compacted entries gets the snapshot in chunks, reassembles it,
// installs it and continues from the log.
#include <gtest/gtest.h>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

int count_sent(TestCluster& cluster, MessageType type, NodeId to) {
  int count = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == type && message.to == to) ++count;
  }
  return count;
}

TEST(Snapshot, LaggingFollowerCatchesUpFromAChunkedSnapshot) {
  TestCluster cluster(3, 40);
  cluster.elect(N(1));
  cluster.isolate(N(3));
  for (int i = 0; i < 30; ++i) cluster.propose(N(1), "item-" + std::to_string(i));
  cluster.snapshot_and_compact(N(1));
  ASSERT_GT(cluster.core(N(1)).status().first_index, LogIndex(2)) << "the log the follower needs is gone";
  cluster.sent_log().clear();
  cluster.heal();
  cluster.tick_all(5);
  EXPECT_EQ(cluster.node(N(3)).snapshots_installed, 1);
  EXPECT_GT(count_sent(cluster, MessageType::kSnapshot, N(3)), 3) << "the snapshot must travel in several chunks";
  EXPECT_EQ(cluster.node(N(3)).state.size(), 30u);
  // And the log continues after it.
  cluster.propose(N(1), "after-snapshot");
  cluster.tick_all(2);
  EXPECT_EQ(cluster.node(N(3)).state.back(), "after-snapshot");
  cluster.expect_states_equal();
}

// A large snapshot never has more than max_snapshot_bytes_in_flight unacknowledged: the transport queues a bounded
// amount per peer and drops the oldest past it — which were the snapshot's first chunks, so a snapshot larger than the
// queue (64 MB) never arrived (found loading 300,000 1 KB items and wiping a follower: 256 chunks of 1 MB in flight).
TEST(Snapshot, ChunksInFlightAreBoundedByBytes) {
  TestCluster cluster(3, 42, [](RaftConfig& config) {
    config.snapshot_chunk_bytes = 64;
    config.max_snapshot_bytes_in_flight = 3 * 64;  // three chunks; max_inflight_messages (256) would allow them all
  });
  cluster.elect(N(1));
  cluster.isolate(N(3));
  for (int i = 0; i < 40; ++i) cluster.propose(N(1), "item-" + std::to_string(i));
  cluster.snapshot_and_compact(N(1));
  cluster.sent_log().clear();
  // Node 3 hears the leader but its answers are lost: whatever the leader sends to it is all it sends unacked.
  cluster.heal();
  cluster.set_filter([](const Message& message) {
    return message.from == N(3) && message.type == MessageType::kSnapshotResponse;
  });
  cluster.tick_all(1);
  EXPECT_EQ(count_sent(cluster, MessageType::kSnapshot, N(3)), 3);
  // With the answers through, it arrives in full.
  cluster.set_filter(nullptr);
  cluster.tick_all(30);
  EXPECT_EQ(cluster.node(N(3)).snapshots_installed, 1);
  EXPECT_EQ(cluster.node(N(3)).state.size(), 40u);
  cluster.expect_states_equal();
}

TEST(Snapshot, ChunkLossAndReorderingIsRepaired) {
  TestCluster cluster(3, 41);
  cluster.elect(N(1));
  cluster.isolate(N(3));
  for (int i = 0; i < 40; ++i) cluster.propose(N(1), "x" + std::to_string(i));
  cluster.snapshot_and_compact(N(1));
  cluster.heal();
  int chunk = 0;
  cluster.set_filter([&chunk](const Message& message) {
    // Drop every third chunk on its first pass.
    return message.type == MessageType::kSnapshot && ++chunk % 3 == 0 && chunk < 30;
  });
  cluster.tick_all(30);
  EXPECT_EQ(cluster.node(N(3)).snapshots_installed, 1);
  EXPECT_EQ(cluster.node(N(3)).state.size(), 40u);
  cluster.expect_states_equal();
}

TEST(Snapshot, FollowerRejectsOutOfOrderChunkWithItsOffset) {
  MemoryLogStorage storage(Membership{.voters = {N(1), N(2)}});
  auto created = RaftCore::create(test_config(N(2)), storage, Prng(42));
  ASSERT_TRUE(created.is_ok());
  RaftCore& follower = **created;
  SnapshotMetadata metadata{.index = LogIndex(10), .term = Term(1), .ts_micros = 5,
                            .membership = {.voters = {N(1), N(2)}}, .size_bytes = 6};
  Message chunk{.type = MessageType::kSnapshot, .from = N(1), .to = N(2), .term = Term(1), .snapshot = metadata};
  chunk.snapshot_chunk = "abc";
  ASSERT_TRUE(follower.step(chunk).is_ok());
  chunk.snapshot_offset = 4;  // skips byte 3
  chunk.snapshot_chunk = "ef";
  chunk.snapshot_done = true;
  ASSERT_TRUE(follower.step(chunk).is_ok());
  std::vector<Message> sent = drain(follower, storage);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[0].reject);
  EXPECT_EQ(sent[0].snapshot_offset, 3u);
  EXPECT_TRUE(sent[1].reject);
  EXPECT_EQ(sent[1].snapshot_offset, 3u) << "asks to resume where it is";
  chunk.snapshot_offset = 3;
  chunk.snapshot_chunk = "def";
  ASSERT_TRUE(follower.step(chunk).is_ok());
  Ready ready = follower.ready();
  ASSERT_TRUE(ready.snapshot.has_value());
  EXPECT_EQ(ready.snapshot->data, "abcdef");
  EXPECT_EQ(ready.snapshot->metadata, metadata);
  ASSERT_TRUE(storage.apply_snapshot(*ready.snapshot).is_ok());
  if (ready.hard_state) storage.set_hard_state(*ready.hard_state);
  ASSERT_EQ(ready.messages_after_persist.size(), 1u) << "the ack waits for the snapshot to be durable";
  EXPECT_EQ(ready.messages_after_persist[0].index, LogIndex(10));
  follower.advance(ready);
  follower.check_invariants();
  EXPECT_EQ(follower.status().commit, LogIndex(10));
  EXPECT_EQ(follower.status().applied, LogIndex(10));
  EXPECT_EQ(follower.status().last_ts_micros, 5);
}

TEST(Snapshot, NewLearnerOfACompactedClusterStartsFromASnapshot) {
  TestCluster cluster(3, 43);
  cluster.elect(N(1));
  for (int i = 0; i < 10; ++i) cluster.propose(N(1), "old" + std::to_string(i));
  for (NodeId id : cluster.ids()) cluster.snapshot_and_compact(id);
  cluster.add_node(N(4), Membership{});
  ASSERT_TRUE(cluster.core(N(1)).propose_config_change({ConfigChangeType::kAddLearner, N(4)}).is_ok());
  cluster.tick_all(10);
  EXPECT_EQ(cluster.node(N(4)).snapshots_installed, 1);
  EXPECT_EQ(cluster.node(N(4)).state.size(), 10u);
  EXPECT_TRUE(cluster.core(N(4)).membership().is_learner(N(4)));
}

TEST(Snapshot, RestartAfterInstallingASnapshotKeepsIt) {
  TestCluster cluster(3, 44);
  cluster.elect(N(1));
  cluster.isolate(N(3));
  for (int i = 0; i < 10; ++i) cluster.propose(N(1), "r" + std::to_string(i));
  cluster.snapshot_and_compact(N(1));
  cluster.heal();
  cluster.tick_all(5);
  ASSERT_EQ(cluster.node(N(3)).snapshots_installed, 1);
  cluster.crash(N(3));
  cluster.restart(N(3));
  EXPECT_EQ(cluster.core(N(3)).status().commit, cluster.core(N(1)).status().commit);
  cluster.propose(N(1), "more");
  cluster.tick_all(3);
  cluster.expect_states_equal();
}

}  // namespace
}  // namespace mayfly::replication::testing
