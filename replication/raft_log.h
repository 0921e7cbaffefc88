// RaftLog: the core's view of its log — the persisted part (read from LogStorage) followed by entries and possibly a
// snapshot that were handed out in Ready but are not yet persisted ("unstable"), plus the commit and applied indexes.
// Internal to RaftCore.
//
// Layout:  [storage: first_index .. unstable_offset-1] [unstable_: unstable_offset .. last_index]
// A pending (not yet persisted) snapshot replaces the storage part entirely: then unstable_offset = snapshot index + 1
// and nothing at or below the snapshot index is readable except the snapshot's own term.
//
// Thread-safety: not thread-safe; owned by one RaftCore.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/ids.h"
#include "replication/log_storage.h"
#include "replication/types.h"

namespace mayfly::replication {

class RaftLog {
 public:
  RaftLog(const LogStorage& storage, LogIndex committed, LogIndex applied);

  LogIndex first_index() const;
  LogIndex last_index() const { return LogIndex(unstable_offset_.value() - 1 + unstable_.size()); }
  Term last_term() const;
  // Highest index known to be on disk (the leader counts itself in a quorum only up to here).
  LogIndex stable_last_index() const { return unstable_offset_.prev(); }
  // Term at `index`, or nullopt when the index is compacted or past the end.
  std::optional<Term> term(LogIndex index) const;
  bool match_term(LogIndex index, Term term) const;
  // Whether a candidate whose log ends at (index, term) is at least as up to date as this log (Raft §5.4.1).
  bool is_up_to_date(LogIndex index, Term term) const;
  // Entries [low, high), first_index() <= low < high <= last_index() + 1, at most max_bytes but at least one.
  std::vector<Entry> slice(LogIndex low, LogIndex high, uint64_t max_bytes) const;
  // The first entry of `entries` (contiguous) that is not in this log with the same term; 0 when all are.
  LogIndex find_conflict(const std::vector<Entry>& entries) const;
  // The highest index <= `index` whose term is <= `term` (fast backtracking, etcd's findConflictByTerm).
  LogIndex find_conflict_by_term(LogIndex index, Term term) const;
  int64_t last_ts_micros() const { return last_ts_micros_; }
  // ts of the entry at `index`, first_index() - 1 <= index <= last_index() (the snapshot's ts at its index).
  int64_t ts_at(LogIndex index) const;

  // Appends contiguous `entries`; every entry at index >= entries.front().index is replaced. Never below commit.
  void append(std::vector<Entry> entries);
  // Replaces the whole log with `snapshot` (pending until persisted); commit moves to its index.
  void restore(Snapshot snapshot);

  LogIndex committed() const { return committed_; }
  LogIndex applied() const { return applied_; }
  void commit_to(LogIndex index);
  void applied_to(LogIndex index);

  const std::vector<Entry>& unstable_entries() const { return unstable_; }
  const std::optional<Snapshot>& pending_snapshot() const { return pending_snapshot_; }
  bool has_entries_to_apply() const;
  std::vector<Entry> entries_to_apply(uint64_t max_bytes) const;
  // The driver persisted entries up to (index, term) / the pending snapshot at `index`.
  void stable_entries_to(LogIndex index, Term term);
  void stable_snapshot_to(LogIndex index);

  void check_invariants() const;

 private:
  LogIndex apply_from() const;

  const LogStorage& storage_;
  std::optional<Snapshot> pending_snapshot_;
  std::vector<Entry> unstable_;  // unstable_[i].index == unstable_offset_ + i
  LogIndex unstable_offset_;
  LogIndex committed_;
  LogIndex applied_;
  int64_t last_ts_micros_ = 0;  // ts of the entry at last_index() (or of the snapshot when the log is empty)
};

}  // namespace mayfly::replication
