// Compaction by checkpoint (storage/replica.h): the Raft log is compacted only behind a synced write of the state, so
// a crash that loses every unsynced byte — LevelDB's log included — reopens the store at or past every index the log
// no longer holds. Runs a single-voter Replica on the simulator's FaultEnv, whose crash_copy() keeps exactly the
// synced bytes of every file. Deterministic: fixed Raft seed, time moved by hand.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "storage/replica.h"
#include "tests/sim/fault_env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage {
namespace {

using testing::kT0;

class CheckpointTest : public ::testing::Test {
 protected:
  ReplicaOptions options(sim::FaultEnv* env) {
    ReplicaOptions options;
    options.data_dir = "/checkpoint";
    options.env = env;
    options.raft.self = NodeId(1);
    options.bootstrap.voters.insert(NodeId(1));
    options.seed = 11;
    options.checkpoint_interval_entries = 50;
    options.log_entries_kept_after_checkpoint = 5;
    options.block_cache_bytes = 1 << 20;
    options.sync_directory = [](const std::string&) { return Status::ok(); };  // FaultEnv: renames are durable
    return options;
  }

  void settle() {
    for (int hop = 0; hop < 100 && replica_->has_ready(); ++hop) {
      Result<ReplicaOutput> output = replica_->process_ready();
      ASSERT_TRUE(output.is_ok()) << output.status().to_string();
    }
  }

  void tick() {
    now_ += 10'000;
    replica_->tick(now_);
    ASSERT_NO_FATAL_FAILURE(settle());
  }

  void propose(const Command& command) {
    ASSERT_TRUE(replica_->propose(command, now_).is_ok());
    ASSERT_NO_FATAL_FAILURE(settle());
  }

  // The Envs outlive the replica that uses them (members go in reverse order).
  sim::FaultEnv env_;
  std::unique_ptr<sim::FaultEnv> crashed_;
  std::unique_ptr<Replica> replica_;
  int64_t now_ = kT0;
};

TEST_F(CheckpointTest, ACrashThatLosesEveryUnsyncedWriteReopensAtOrPastTheCompactedLog) {
  auto opened = Replica::open(options(&env_));
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  replica_ = std::move(opened).value();
  for (int i = 0; i < 100 && replica_->core().role() != replication::Role::kLeader; ++i) ASSERT_NO_FATAL_FAILURE(tick());
  ASSERT_EQ(replica_->core().role(), replication::Role::kLeader);
  ASSERT_NO_FATAL_FAILURE(propose(testing::database_command(CommandType::kCreateDatabase, "db")));
  ASSERT_NO_FATAL_FAILURE(propose(testing::create_container_command("db", "c", "/pk")));
  for (int i = 0; i < 130; ++i) {
    ASSERT_NO_FATAL_FAILURE(propose(testing::item_command(
        CommandType::kCreateItem, "db", "c", "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p\"}")));
  }
  // Two checkpoints at least, the log compacted behind the last one, and no snapshot exported for it.
  const replication::SnapshotMetadata checkpoint = replica_->log().snapshot_metadata();
  EXPECT_GE(replica_->checkpoints(), 2u);
  EXPECT_EQ(replica_->snapshots_produced(), 0u);
  EXPECT_FALSE(replica_->log().snapshot_data_ready());
  EXPECT_EQ(replica_->log().first_index().value(), checkpoint.index.value() - 5 + 1);
  const LogIndex applied = replica_->state().applied().index;
  ASSERT_GT(applied, checkpoint.index) << "writes after the checkpoint, which the crash may lose";
  replica_.reset();

  // Power loss: only what was fsync'd survives.
  crashed_ = env_.crash_copy();
  EXPECT_GT(env_.bytes_lost_in_last_crash(), 0u) << "the crash must lose unsynced state writes for this to test anything";
  auto reopened = Replica::open(options(crashed_.get()));
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  replica_ = std::move(reopened).value();
  EXPECT_GE(replica_->state().applied().index, checkpoint.index);
  EXPECT_GE(replica_->state().applied().index.next(), replica_->log().first_index());
  // Every item the checkpoint covers is there; the log holds the rest, which the node applies again as leader.
  for (int i = 0; i < 100 && replica_->state().applied().index < applied; ++i) ASSERT_NO_FATAL_FAILURE(tick());
  EXPECT_GE(replica_->state().applied().index, applied);
  for (int i = 0; i < 130; ++i) {
    EXPECT_EQ(replica_->state().reader().read_item("db", "c", "\"p\"", "i" + std::to_string(i), now_).http_status(),
              200)
        << "item i" << i;
  }
}

// A data directory written by the versions that exported a snapshot to compact the log: a snapshot record with its
// file, the log compacted behind it. It opens as it is (its snapshot can still be sent and recovered from), and the
// first checkpoint replaces the record and deletes the file.
TEST_F(CheckpointTest, ADirectoryCompactedByAnExportedSnapshotOpensAndItsFileGoesAtTheFirstCheckpoint) {
  ReplicaOptions opts = options(&env_);
  opts.checkpoint_interval_entries = 1000;  // none during the setup
  auto opened = Replica::open(opts);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  replica_ = std::move(opened).value();
  for (int i = 0; i < 100 && replica_->core().role() != replication::Role::kLeader; ++i) ASSERT_NO_FATAL_FAILURE(tick());
  ASSERT_NO_FATAL_FAILURE(propose(testing::database_command(CommandType::kCreateDatabase, "db")));
  ASSERT_NO_FATAL_FAILURE(propose(testing::create_container_command("db", "c", "/pk")));
  for (int i = 0; i < 30; ++i) {
    ASSERT_NO_FATAL_FAILURE(propose(testing::item_command(
        CommandType::kCreateItem, "db", "c", "{\"id\":\"old" + std::to_string(i) + "\",\"pk\":\"p\"}")));
  }
  // What the exporting versions did at a snapshot: export, write the file, record it, compact.
  const LogIndex at = replica_->state().applied().index;
  Result<std::string> data = replica_->state().export_snapshot();
  ASSERT_TRUE(data.is_ok());
  ASSERT_TRUE(replica_->log().create_snapshot(at, replica_->core().membership_at(at), *data).is_ok());
  ASSERT_TRUE(replica_->log().compact(at).is_ok());
  replica_.reset();
  const std::string file = "/checkpoint/snapshots/snapshot-" + std::to_string(at.value());
  ASSERT_TRUE(env_.FileExists(file));

  opts.checkpoint_interval_entries = 50;
  opened = Replica::open(opts);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  replica_ = std::move(opened).value();
  EXPECT_TRUE(replica_->log().snapshot_data_ready());
  EXPECT_EQ(replica_->log().snapshot_metadata().index, at);
  EXPECT_EQ(replica_->log().first_index(), at.next());
  for (int i = 0; i < 100 && replica_->core().role() != replication::Role::kLeader; ++i) ASSERT_NO_FATAL_FAILURE(tick());
  for (int i = 0; i < 60; ++i) {
    ASSERT_NO_FATAL_FAILURE(propose(testing::item_command(
        CommandType::kCreateItem, "db", "c", "{\"id\":\"new" + std::to_string(i) + "\",\"pk\":\"p\"}")));
  }
  EXPECT_EQ(replica_->checkpoints(), 1u);
  EXPECT_GT(replica_->log().snapshot_metadata().index, at);
  EXPECT_FALSE(replica_->log().snapshot_data_ready());
  EXPECT_FALSE(env_.FileExists(file)) << "the exported snapshot outlived the checkpoint that replaced it";
  EXPECT_EQ(replica_->state().reader().read_item("db", "c", "\"p\"", "old7", now_).http_status(), 200);
  EXPECT_EQ(replica_->state().reader().read_item("db", "c", "\"p\"", "new7", now_).http_status(), 200);
}

}  // namespace
}  // namespace mayfly::storage
