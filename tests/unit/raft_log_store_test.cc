// The Raft log on LevelDB: what persist() writes is exactly what a reopen reads back; conflicting suffixes are
// truncated; snapshots replace the log; compaction; and a failed fsync makes every later write fail (sticky).
#include <leveldb/env.h>

#include <atomic>

#include "replication/codec.h"
#include "storage/raft_log_store.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using replication::Entry;
using replication::EntryType;
using replication::HardState;
using replication::Membership;

Entry entry(uint64_t index, uint64_t term, std::string data = "x") {
  return Entry{Term(term), LogIndex(index), static_cast<int64_t>(kT0 + index), EntryType::kNormal, std::move(data)};
}

// A file-system Env whose syncs start failing when told to.
class FailingSyncEnv : public leveldb::EnvWrapper {
 public:
  FailingSyncEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}
  std::atomic<bool> fail_syncs{false};

  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** result) override {
    leveldb::Status status = target()->NewWritableFile(name, result);
    if (status.ok()) *result = new File(*result, this);  // LevelDB takes ownership of the wrapper
    return status;
  }
  leveldb::Status NewAppendableFile(const std::string& name, leveldb::WritableFile** result) override {
    leveldb::Status status = target()->NewAppendableFile(name, result);
    if (status.ok()) *result = new File(*result, this);
    return status;
  }

 private:
  class File : public leveldb::WritableFile {
   public:
    File(leveldb::WritableFile* inner, FailingSyncEnv* env) : inner_(inner), env_(env) {}
    leveldb::Status Append(const leveldb::Slice& data) override { return inner_->Append(data); }
    leveldb::Status Close() override { return inner_->Close(); }
    leveldb::Status Flush() override { return inner_->Flush(); }
    leveldb::Status Sync() override {
      if (env_->fail_syncs) return leveldb::Status::IOError("injected fsync failure");
      return inner_->Sync();
    }

   private:
    std::unique_ptr<leveldb::WritableFile> inner_;
    FailingSyncEnv* env_;
  };
};

class RaftLogStoreTest : public ::testing::Test {
 protected:
  void open(const Membership& bootstrap = {}, leveldb::Env* env = nullptr) {
    log_.reset();
    machine_.reset();
    StoreOptions options;
    options.path = dir_.path() + "/db";
    options.env = env;
    auto machine = StateMachine::open(options);
    ASSERT_TRUE(machine.is_ok()) << machine.status().to_string();
    machine_ = std::move(machine).value();
    auto log = LevelDbLogStorage::open(machine_->leveldb(), env, dir_.path() + "/snapshots", bootstrap);
    ASSERT_TRUE(log.is_ok()) << log.status().to_string();
    log_ = std::move(log).value();
  }

  std::vector<Entry> all_entries() {
    if (log_->last_index() < log_->first_index()) return {};
    auto entries = log_->entries(log_->first_index(), log_->last_index().next(), UINT64_MAX);
    EXPECT_TRUE(entries.is_ok()) << entries.status().to_string();
    return *entries;
  }

  void TearDown() override {
    log_.reset();
    machine_.reset();
  }

  TempDir dir_;
  std::unique_ptr<StateMachine> machine_;
  std::unique_ptr<LevelDbLogStorage> log_;
};

TEST_F(RaftLogStoreTest, FreshClusterNodeStartsWithTheBootstrapLog) {
  Membership membership{{NodeId(1), NodeId(2), NodeId(3)}, {}};
  open(membership);
  EXPECT_EQ(all_entries(), replication::bootstrap_entries(membership));
  EXPECT_EQ(log_->hard_state(), replication::bootstrap_hard_state(membership));
  open(membership);  // reopening does not bootstrap twice
  EXPECT_EQ(all_entries(), replication::bootstrap_entries(membership));
}

TEST_F(RaftLogStoreTest, JoiningNodeStartsEmpty) {
  open();
  EXPECT_EQ(log_->last_index(), LogIndex(0));
  EXPECT_EQ(log_->first_index(), LogIndex(1));
  EXPECT_EQ(log_->hard_state(), HardState{});
}

TEST_F(RaftLogStoreTest, PersistedEntriesAndHardStateSurviveReopen) {
  open();
  std::vector<Entry> written = {entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 2, std::string(5000, 'c'))};
  HardState hard{Term(2), NodeId(3), LogIndex(2)};
  ASSERT_TRUE(log_->persist(std::nullopt, written, hard, true).is_ok());
  EXPECT_EQ(log_->syncs(), 1u);  // one Ready, one batch, one fsync
  open();
  EXPECT_EQ(all_entries(), written);
  EXPECT_EQ(log_->hard_state(), hard);
  EXPECT_EQ(*log_->term(LogIndex(3)), Term(2));
  EXPECT_EQ(*log_->term(LogIndex(0)), Term(0));
  EXPECT_FALSE(log_->term(LogIndex(4)).is_ok());
}

TEST_F(RaftLogStoreTest, ConflictingSuffixIsTruncatedInTheSameWrite) {
  open();
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)}, std::nullopt, true)
                  .is_ok());
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(3, 2, "new")}, std::nullopt, true).is_ok());
  open();
  std::vector<Entry> expected = {entry(1, 1), entry(2, 1), entry(3, 2, "new")};
  EXPECT_EQ(all_entries(), expected);
  EXPECT_EQ(log_->last_index(), LogIndex(3));
}

TEST_F(RaftLogStoreTest, EntriesRespectMaxBytesButReturnAtLeastOne) {
  open();
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(1, 1, std::string(100, 'a')), entry(2, 1, std::string(100, 'b'))},
                            std::nullopt, true)
                  .is_ok());
  auto one = log_->entries(LogIndex(1), LogIndex(3), 10);
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(one->size(), 1u);
  auto both = log_->entries(LogIndex(1), LogIndex(3), 1000);
  EXPECT_EQ(both->size(), 2u);
  EXPECT_FALSE(log_->entries(LogIndex(2), LogIndex(4), 1000).is_ok());
}

TEST_F(RaftLogStoreTest, RejectsAppendsThatWouldLeaveAGap) {
  open();
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(1, 1)}, std::nullopt, true).is_ok());
  EXPECT_FALSE(log_->persist(std::nullopt, {entry(3, 1)}, std::nullopt, true).is_ok());
  EXPECT_FALSE(log_->persist(std::nullopt, {entry(2, 1), entry(4, 1)}, std::nullopt, true).is_ok());
  EXPECT_EQ(log_->last_index(), LogIndex(1));
}

TEST_F(RaftLogStoreTest, SnapshotCompactionAndChunkedReads) {
  open();
  std::vector<Entry> written;
  for (uint64_t i = 1; i <= 10; ++i) written.push_back(entry(i, 1 + i / 5));
  ASSERT_TRUE(log_->persist(std::nullopt, written, std::nullopt, true).is_ok());
  const std::string data = "snapshot-bytes-" + std::string(1000, 's');
  Membership membership{{NodeId(1)}, {NodeId(2)}};
  ASSERT_TRUE(log_->create_snapshot(LogIndex(6), membership, data).is_ok());
  EXPECT_FALSE(log_->compact(LogIndex(7)).is_ok()) << "compaction past the snapshot must be refused";
  ASSERT_TRUE(log_->compact(LogIndex(6)).is_ok());
  open();
  EXPECT_EQ(log_->first_index(), LogIndex(7));
  EXPECT_EQ(log_->last_index(), LogIndex(10));
  EXPECT_EQ(*log_->term(LogIndex(6)), Term(2));
  EXPECT_EQ(log_->snapshot_metadata().index, LogIndex(6));
  EXPECT_EQ(log_->snapshot_metadata().membership, membership);
  EXPECT_EQ(log_->snapshot_metadata().ts_micros, kT0 + 6);
  std::string reassembled;
  for (uint64_t offset = 0; offset < data.size(); offset += 300) {
    auto chunk = log_->read_snapshot_chunk(LogIndex(6), offset, 300);
    ASSERT_TRUE(chunk.is_ok()) << chunk.status().to_string();
    reassembled += *chunk;
  }
  EXPECT_EQ(reassembled, data);
  EXPECT_EQ(log_->read_snapshot_chunk(LogIndex(5), 0, 10).status().code(), StatusCode::kNotFound);
}

TEST_F(RaftLogStoreTest, InstalledSnapshotReplacesTheWholeLog) {
  open();
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(1, 1), entry(2, 1), entry(3, 1)}, std::nullopt, true).is_ok());
  replication::Snapshot snapshot;
  snapshot.data = "state";
  snapshot.metadata = {LogIndex(20), Term(4), kT0 + 20, Membership{{NodeId(1), NodeId(2)}, {}}, 5};
  ASSERT_TRUE(log_->persist(snapshot, {entry(21, 4)}, HardState{Term(4), NodeId(0), LogIndex(20)}, true).is_ok());
  open();
  EXPECT_EQ(log_->first_index(), LogIndex(21));
  EXPECT_EQ(log_->last_index(), LogIndex(21));
  EXPECT_EQ(*log_->term(LogIndex(20)), Term(4));
  EXPECT_EQ(*log_->read_snapshot_chunk(LogIndex(20), 0, 100), "state");
  std::vector<Entry> expected = {entry(21, 4)};
  EXPECT_EQ(all_entries(), expected);
}

TEST_F(RaftLogStoreTest, FailedFsyncIsStickyAndLosesNothingSynced) {
  FailingSyncEnv env;
  open({}, &env);
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(1, 1), entry(2, 1)}, std::nullopt, true).is_ok());
  env.fail_syncs = true;
  Status failed = log_->persist(std::nullopt, {entry(3, 1)}, std::nullopt, true);
  EXPECT_EQ(failed.code(), StatusCode::kIoError) << failed.to_string();
  env.fail_syncs = false;  // the disk "recovers", but the log must not pretend nothing happened
  Status later = log_->persist(std::nullopt, {entry(3, 1)}, std::nullopt, true);
  EXPECT_EQ(later.code(), StatusCode::kIoError);
  EXPECT_FALSE(log_->failure().is_ok());
  EXPECT_EQ(log_->last_index(), LogIndex(2)) << "the failed write must not show in memory";
  open();  // a restart reads what is on disk: at least the synced entries
  EXPECT_GE(log_->last_index(), LogIndex(2));
  EXPECT_EQ(all_entries()[1], entry(2, 1));
}

}  // namespace
}  // namespace mayfly::storage::testing
