// The Raft log in its WAL: what persist() writes is exactly what a reopen reads back; conflicting suffixes are
// truncated; snapshots replace the log; compaction; segments rotate and go once compacted; a torn tail is cut off; a
// log an earlier version kept in LevelDB is migrated; and a failed fsync makes every later write fail (sticky).
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>

#include "common/codec.h"
#include "replication/codec.h"
#include "storage/layout.h"
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
  void open_machine(leveldb::Env* env = nullptr) {
    log_.reset();
    machine_.reset();
    StoreOptions options;
    options.path = dir_.path() + "/db";
    options.env = env;
    auto machine = StateMachine::open(options);
    ASSERT_TRUE(machine.is_ok()) << machine.status().to_string();
    machine_ = std::move(machine).value();
  }

  Result<std::unique_ptr<RaftLogStore>> open_log(const Membership& bootstrap = {}, leveldb::Env* env = nullptr) {
    return RaftLogStore::open(machine_->leveldb(), env, dir_.path() + "/snapshots", bootstrap, nullptr, options_);
  }

  void open(const Membership& bootstrap = {}, leveldb::Env* env = nullptr) {
    ASSERT_NO_FATAL_FAILURE(open_machine(env));
    auto log = open_log(bootstrap, env);
    ASSERT_TRUE(log.is_ok()) << log.status().to_string();
    log_ = std::move(log).value();
  }

  std::vector<std::filesystem::path> segments() const {
    std::vector<std::filesystem::path> out;
    for (const auto& file : std::filesystem::directory_iterator(dir_.path() + "/wal")) out.push_back(file.path());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Raft keys left in LevelDB (a log an earlier version kept there).
  size_t leveldb_raft_keys() {
    size_t count = 0;
    std::unique_ptr<leveldb::Iterator> it(machine_->leveldb()->NewIterator({}));
    for (const std::string& prefix : {raft_meta_key(""), raft_entry_prefix()}) {
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) ++count;
    }
    return count;
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
  RaftLogStoreOptions options_;
  std::unique_ptr<StateMachine> machine_;
  std::unique_ptr<RaftLogStore> log_;
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

// A restore (storage/restore.h) starts a new node's log with a checkpoint: a snapshot record of size 0 persisted on a
// fresh log, without a file. It reopens as the log's start, and the data is to be produced on demand.
TEST_F(RaftLogStoreTest, ACheckpointPersistedOnAFreshLogWritesNoFileAndReopensAsTheLogsStart) {
  open();
  replication::Snapshot checkpoint;
  checkpoint.metadata = {LogIndex(500), Term(1), kT0 + 500, Membership{{NodeId(3)}, {}}, 0};
  ASSERT_TRUE(log_->persist(checkpoint, {}, HardState{Term(1), NodeId(0), LogIndex(500)}, true).is_ok());
  for (int reopened = 0; reopened < 2; ++reopened) {
    SCOPED_TRACE(reopened);
    EXPECT_FALSE(log_->snapshot_data_ready());
    EXPECT_EQ(log_->snapshot_metadata(), checkpoint.metadata);
    EXPECT_EQ(log_->first_index(), LogIndex(501));
    EXPECT_EQ(log_->last_index(), LogIndex(500));
    EXPECT_EQ(*log_->term(LogIndex(500)), Term(1));
    EXPECT_EQ(log_->hard_state(), (HardState{Term(1), NodeId(0), LogIndex(500)}));
    EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/snapshots")) << "a checkpoint has no file";
    EXPECT_EQ(log_->read_snapshot_chunk(LogIndex(500), 0, 10).status().code(), StatusCode::kNotFound);
    // The term and time of the record are what a snapshot produced at the checkpoint is described with.
    Result<replication::SnapshotMetadata> described = log_->describe_snapshot(LogIndex(500), {{NodeId(3)}, {}}, 9);
    ASSERT_TRUE(described.is_ok()) << described.status().to_string();
    EXPECT_EQ(described->term, Term(1));
    EXPECT_EQ(described->ts_micros, kT0 + 500);
    open(Membership{{NodeId(3)}, {}});  // not fresh: no bootstrap entries
  }
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(501, 2)}, std::nullopt, true).is_ok());
  EXPECT_EQ(log_->last_index(), LogIndex(501));
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

TEST_F(RaftLogStoreTest, SegmentsRotateAndGoOnceCompactedAndTheRestReadsBackAfterReopen) {
  options_.segment_bytes = 2000;  // a new segment every ~15 entries of 100 bytes
  options_.recent_entry_bytes = 1000;  // most reads go to the files
  open();
  std::vector<Entry> written;
  for (uint64_t i = 1; i <= 100; i += 5) {
    std::vector<Entry> batch;
    for (uint64_t k = i; k < i + 5; ++k) batch.push_back(entry(k, 1 + k / 40, std::string(100, 'a' + k % 26)));
    ASSERT_TRUE(log_->persist(std::nullopt, batch, HardState{Term(3), NodeId(1), LogIndex(i)}, true).is_ok());
    written.insert(written.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(all_entries(), written);
  const size_t before = log_->segment_count();
  EXPECT_GE(before, 5u);
  EXPECT_EQ(segments().size(), before);
  ASSERT_TRUE(log_->create_snapshot(LogIndex(80), Membership{{NodeId(1)}, {}}, "state").is_ok());
  ASSERT_TRUE(log_->compact(LogIndex(70)).is_ok());
  EXPECT_LE(log_->segment_count(), before - 2) << "segments holding only compacted entries stay";
  EXPECT_EQ(segments().size(), log_->segment_count());
  const std::vector<Entry> kept(written.begin() + 70, written.end());
  EXPECT_EQ(all_entries(), kept);
  open();  // the oldest remaining segment starts past the compaction point: its records must still read back
  EXPECT_EQ(log_->first_index(), LogIndex(71));
  EXPECT_EQ(log_->last_index(), LogIndex(100));
  EXPECT_EQ(*log_->term(LogIndex(70)), Term(2));
  EXPECT_EQ(log_->hard_state(), (HardState{Term(3), NodeId(1), LogIndex(96)}));
  EXPECT_EQ(log_->snapshot_metadata().index, LogIndex(80));
  EXPECT_EQ(all_entries(), kept);
  // A conflicting suffix reaching back into an older segment, then a reopen.
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(90, 9, "replaced")}, std::nullopt, true).is_ok());
  open();
  EXPECT_EQ(log_->last_index(), LogIndex(90));
  EXPECT_EQ(all_entries().back(), entry(90, 9, "replaced"));
  // A segment that still holds live entries, lost: the log has a gap, which is Corruption, not a shorter log.
  log_.reset();
  std::filesystem::remove(segments().front());
  auto reopened = open_log();
  ASSERT_FALSE(reopened.is_ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kCorruption) << reopened.status().to_string();
  EXPECT_NE(reopened.status().message().find("gap"), std::string::npos) << reopened.status().to_string();
}

TEST_F(RaftLogStoreTest, ATornTailIsCutOffAndTheNextOpenIsClean) {
  open();
  std::vector<Entry> written = {entry(1, 1), entry(2, 1), entry(3, 1)};
  ASSERT_TRUE(log_->persist(std::nullopt, written, std::nullopt, true).is_ok());
  log_.reset();
  // A crash in the middle of appending entry 4: half its record reached the disk.
  const std::string record = wal_entry_record(entry(4, 1, std::string(500, 'z')));
  {
    std::ofstream newest(segments().back(), std::ios::binary | std::ios::app);
    newest.write(record.data(), static_cast<std::streamsize>(record.size() / 2));
  }
  auto reopened = open_log();
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  log_ = std::move(reopened).value();
  EXPECT_EQ(all_entries(), written);
  ASSERT_TRUE(log_->persist(std::nullopt, {entry(4, 2), entry(5, 2)}, std::nullopt, true).is_ok());
  // The cut segment is an older one now: had the torn half stayed in it, this open would find it corrupt.
  open();
  written.push_back(entry(4, 2));
  written.push_back(entry(5, 2));
  EXPECT_EQ(all_entries(), written);
}

TEST_F(RaftLogStoreTest, MigratesALogThatAnEarlierVersionKeptInLevelDb) {
  ASSERT_NO_FATAL_FAILURE(open_machine());
  // What the LevelDB log wrote: hard state, snapshot record, compaction point and entries under their keys.
  const HardState hard{Term(2), NodeId(1), LogIndex(7)};
  replication::SnapshotMetadata snapshot{LogIndex(4), Term(1), kT0 + 4, Membership{{NodeId(1)}, {}}, 5};
  std::vector<Entry> written;
  leveldb::WriteBatch batch;
  batch.Put(raft_meta_key("hard"), replication::encode_hard_state(hard));
  batch.Put(raft_meta_key("snap"), replication::encode_snapshot_metadata(snapshot));
  std::string base;
  codec::put_varint(base, 3);
  codec::put_varint(base, 1);
  batch.Put(raft_meta_key("base"), base);
  for (uint64_t i = 4; i <= 8; ++i) {
    // Entry 6 is large: the migration writes its segment in pieces of a few MB, and the positions must still hold.
    written.push_back(entry(i, i < 6 ? 1 : 2, i == 6 ? std::string(5 << 20, 'm') : "x"));
    batch.Put(raft_entry_key(i), replication::encode_entry(written.back()));
  }
  ASSERT_TRUE(machine_->leveldb()->Write({}, &batch).ok());
  {
    std::filesystem::create_directories(dir_.path() + "/snapshots");
    std::ofstream file(dir_.path() + "/snapshots/snapshot-4", std::ios::binary);
    file << "state";
  }
  // A migration that crashed midway left its partial segment under the temporary name: it is not the log.
  std::filesystem::create_directories(dir_.path() + "/wal");
  const std::string partial = dir_.path() + "/wal/00000000000000000001.log.tmp";
  {
    std::ofstream file(partial, std::ios::binary);
    const std::string half = wal_entry_record(written.front());
    file.write(half.data(), static_cast<std::streamsize>(half.size() / 2));
  }
  auto log = open_log();
  ASSERT_TRUE(log.is_ok()) << log.status().to_string();
  log_ = std::move(log).value();
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_EQ(leveldb_raft_keys(), 0u) << "the migrated keys stay in LevelDB";
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(log_->first_index(), LogIndex(4));
    EXPECT_EQ(*log_->term(LogIndex(3)), Term(1));
    EXPECT_EQ(log_->hard_state(), hard);
    EXPECT_EQ(log_->snapshot_metadata(), snapshot);
    EXPECT_EQ(all_entries(), written);
    EXPECT_EQ(*log_->read_snapshot_chunk(LogIndex(4), 0, 100), "state");
    open();  // and again from the WAL
  }
  // Keys an interrupted migration left behind (the WAL was written, the delete never happened) are dropped.
  ASSERT_TRUE(machine_->leveldb()->Put({}, raft_entry_key(4), replication::encode_entry(entry(4, 7))).ok());
  open();
  EXPECT_EQ(leveldb_raft_keys(), 0u);
  EXPECT_EQ(all_entries(), written);
}

}  // namespace
}  // namespace mayfly::storage::testing
