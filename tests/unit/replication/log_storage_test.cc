// MemoryLogStorage (the reference LogStorage) and RaftLog (the core's stable + unstable view).
#include <gtest/gtest.h>

#include "replication/log_storage.h"
#include "replication/raft_log.h"

namespace mayfly::replication {
namespace {

Entry entry(uint64_t index, uint64_t term, std::string data = "") {
  return Entry{.term = Term(term), .index = LogIndex(index), .ts_micros = static_cast<int64_t>(index) * 10,
               .type = EntryType::kNormal, .data = std::move(data)};
}

TEST(MemoryLogStorage, AppendReplacesTheSuffixFromTheFirstNewIndex) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 1), entry(3, 1)}).is_ok());
  ASSERT_TRUE(storage.append({entry(2, 2)}).is_ok());
  EXPECT_EQ(storage.last_index(), LogIndex(2));
  EXPECT_EQ(*storage.term(LogIndex(2)), Term(2));
  EXPECT_FALSE(storage.append({entry(5, 2)}).is_ok()) << "a gap is refused";
  EXPECT_FALSE(storage.append({entry(3, 2), entry(5, 2)}).is_ok()) << "non-contiguous is refused";
}

TEST(MemoryLogStorage, EntriesRespectTheByteLimitButReturnAtLeastOne) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1, std::string(100, 'a')), entry(2, 1, std::string(100, 'b'))}).is_ok());
  EXPECT_EQ(storage.entries(LogIndex(1), LogIndex(3), 1)->size(), 1u);
  EXPECT_EQ(storage.entries(LogIndex(1), LogIndex(3), 1000)->size(), 2u);
  EXPECT_EQ(storage.entries(LogIndex(0), LogIndex(2), 1000).status().code(), StatusCode::kNotFound);
}

TEST(MemoryLogStorage, SnapshotThenCompactKeepsTheBoundaryTerm) {
  MemoryLogStorage storage(Membership{.voters = {NodeId(1)}});
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 1), entry(3, 2), entry(4, 2)}).is_ok());
  EXPECT_FALSE(storage.compact(LogIndex(2)).is_ok()) << "compaction must be covered by a snapshot";
  ASSERT_TRUE(storage.create_snapshot(LogIndex(3), Membership{.voters = {NodeId(1)}}, "state").is_ok());
  ASSERT_TRUE(storage.compact(LogIndex(3)).is_ok());
  EXPECT_EQ(storage.first_index(), LogIndex(4));
  EXPECT_EQ(*storage.term(LogIndex(3)), Term(2));
  EXPECT_EQ(storage.snapshot_metadata().ts_micros, 30);
  EXPECT_FALSE(storage.term(LogIndex(2)).is_ok());
  EXPECT_EQ(*storage.read_snapshot_chunk(LogIndex(3), 1, 3), "tat");
  EXPECT_EQ(storage.read_snapshot_chunk(LogIndex(2), 0, 3).status().code(), StatusCode::kNotFound);
}

TEST(MemoryLogStorage, ApplySnapshotReplacesTheLog) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 1)}).is_ok());
  Snapshot snapshot;
  snapshot.metadata.index = LogIndex(10);
  snapshot.metadata.term = Term(3);
  snapshot.metadata.ts_micros = 100;
  snapshot.metadata.size_bytes = 2;
  snapshot.data = "ab";
  ASSERT_TRUE(storage.apply_snapshot(snapshot).is_ok());
  EXPECT_EQ(storage.first_index(), LogIndex(11));
  EXPECT_EQ(storage.last_index(), LogIndex(10));
  EXPECT_EQ(*storage.term(LogIndex(10)), Term(3));
  snapshot.metadata.index = LogIndex(5);
  EXPECT_FALSE(storage.apply_snapshot(snapshot).is_ok()) << "older snapshot refused";
}

TEST(RaftLog, UnstableEntriesShadowAndTruncateStorage) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 1), entry(3, 1)}).is_ok());
  RaftLog log(storage, LogIndex(1), LogIndex(1));
  EXPECT_EQ(log.last_index(), LogIndex(3));
  log.append({entry(2, 2), entry(3, 2), entry(4, 2)});  // conflicts from 2
  EXPECT_EQ(log.last_index(), LogIndex(4));
  EXPECT_EQ(*log.term(LogIndex(2)), Term(2));
  EXPECT_EQ(*log.term(LogIndex(1)), Term(1));
  EXPECT_EQ(log.stable_last_index(), LogIndex(1));
  ASSERT_EQ(log.unstable_entries().size(), 3u);
  EXPECT_EQ(log.slice(LogIndex(1), LogIndex(5), 1 << 20).size(), 4u);
  log.check_invariants();
  ASSERT_TRUE(storage.append(log.unstable_entries()).is_ok());
  log.stable_entries_to(LogIndex(4), Term(2));
  EXPECT_TRUE(log.unstable_entries().empty());
  EXPECT_EQ(log.stable_last_index(), LogIndex(4));
  log.check_invariants();
}

TEST(RaftLog, FindConflictByTermSkipsWholeTerms) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 2), entry(3, 2), entry(4, 4), entry(5, 4)}).is_ok());
  RaftLog log(storage, LogIndex(0), LogIndex(0));
  EXPECT_EQ(log.find_conflict_by_term(LogIndex(5), Term(3)), LogIndex(3));
  EXPECT_EQ(log.find_conflict_by_term(LogIndex(5), Term(4)), LogIndex(5));
  EXPECT_EQ(log.find_conflict_by_term(LogIndex(5), Term(1)), LogIndex(1));
  EXPECT_EQ(log.find_conflict_by_term(LogIndex(9), Term(9)), LogIndex(5)) << "capped at the last index";
}

TEST(RaftLog, IsUpToDateComparesLastTermThenLength) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 2)}).is_ok());
  RaftLog log(storage, LogIndex(0), LogIndex(0));
  EXPECT_TRUE(log.is_up_to_date(LogIndex(1), Term(3)));
  EXPECT_TRUE(log.is_up_to_date(LogIndex(2), Term(2)));
  EXPECT_FALSE(log.is_up_to_date(LogIndex(1), Term(2)));
  EXPECT_FALSE(log.is_up_to_date(LogIndex(9), Term(1)));
}

TEST(RaftLogDeathTest, NeverTruncatesCommittedEntries) {
  MemoryLogStorage storage;
  ASSERT_TRUE(storage.append({entry(1, 1), entry(2, 1)}).is_ok());
  RaftLog log(storage, LogIndex(2), LogIndex(0));
  EXPECT_DEATH(log.append({entry(2, 2)}), "would overwrite committed");
}

}  // namespace
}  // namespace mayfly::replication
