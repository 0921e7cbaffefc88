// LevelDbLogStorage: the Raft log, hard state and snapshot record of a node, kept in the node's LevelDB beside the
// state machine (its own key prefixes, see storage/layout.h), with snapshot data in a file beside the database
// (`snapshot-<index>`, written and fsync'd before the record that names it; older ones are deleted after). All file
// access goes through the leveldb::Env, so the simulator's fault-injecting Env covers snapshots too.
//
// Durability of names: a snapshot file is written as `snapshot-<index>.tmp`, fsync'd, renamed, and then the directory
// is fsync'd (the `sync_directory` hook), so a crash never leaves a partial file under a snapshot's name nor loses the
// name of a file a record points at. The same holds for incoming snapshots (SnapshotSink): a follower streams the
// leader's chunks to `incoming-<index>.part` (memory stays at one chunk), renames it to `incoming-<index>` when
// complete, and persist() of the staged snapshot renames that to `snapshot-<index>`. open() removes every leftover.
// Reading a snapshot that cannot be read (EIO, EMFILE) returns IOError; it never aborts.
//
// Reads of the log: hard_state(), snapshot_metadata(), first_index(), last_index() and term() answer from memory
// (the terms are loaded once by open(), which returns any read error as its Status), so only entries() reads the
// disk — with LevelDB's checksums verified. An I/O error or corruption there is returned (the core turns it into
// replication::StorageFailure) and is sticky like a write error: failure() reports it and every later write fails.
//
// Writes follow Ready: persist() takes a Ready's snapshot, entries and hard state and writes them as ONE LevelDB
// write batch, synced when asked — group commit: however many entries arrived during the previous fsync go into
// this one. A follower's conflicting suffix is deleted in the same batch. After a failed write every later write
// fails with the first error (sticky): what reached the disk is unknown, so the node must stop and restart.
// Reopening restores exactly what was synced.
//
// Thread-safety: one thread (the node's driver) at a time, like every LogStorage.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "replication/log_storage.h"
#include "replication/types.h"

namespace leveldb {
class DB;
class Env;
class WritableFile;
}

namespace mayfly::storage {

// Makes the entries of directory `path` durable (open + fsync of the directory on POSIX).
Status sync_directory_posix(const std::string& path);
// How LevelDbLogStorage makes a rename or creation in a directory durable; empty: the Env makes names durable itself
// (the simulator's in-memory Env).
using SyncDirectory = std::function<Status(const std::string& path)>;

class LevelDbLogStorage final : public replication::LogStorage, public replication::SnapshotSink {
 public:
  // Opens the log kept in `db` (not owned; must outlive this), with snapshot files in `snapshot_dir` accessed through
  // `env` (nullptr: the real file system). A fresh store (nothing persisted) with a non-empty `bootstrap` is
  // initialised with the bootstrap entries and hard state of a new cluster; with an empty one it waits to be filled
  // by a leader.
  static Result<std::unique_ptr<LevelDbLogStorage>> open(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir,
                                                         const replication::Membership& bootstrap,
                                                         SyncDirectory sync_directory = nullptr);

  ~LevelDbLogStorage() override;

  // LogStorage.
  replication::HardState hard_state() const override { return hard_state_; }
  replication::SnapshotMetadata snapshot_metadata() const override { return snapshot_; }
  LogIndex first_index() const override { return LogIndex(base_index_.value() + 1); }
  LogIndex last_index() const override { return LogIndex(base_index_.value() + terms_.size()); }
  Result<Term> term(LogIndex index) const override;
  Result<std::vector<replication::Entry>> entries(LogIndex low, LogIndex high, uint64_t max_bytes) const override;
  Result<std::string> read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                          uint64_t max_bytes) const override;

  // SnapshotSink (the core, driver thread). receive_begin refuses (InvalidArgument) a declared size over half the
  // free space of the snapshot directory (the file and the installed state both need room).
  Status receive_begin(const replication::SnapshotMetadata& metadata) override;
  Status receive_append(std::string_view chunk) override;
  Status receive_finish() override;
  void receive_abort() override;

  // Persists what a Ready asks for, in one write batch (synced when `sync`). The snapshot, when present, replaces the
  // whole log; entries replace every stored entry from entries.front().index on. A staged snapshot's data is the
  // file receive_finish() left; it becomes the snapshot file (renamed, directory fsync'd) before the batch.
  Status persist(const std::optional<replication::Snapshot>& snapshot, const std::vector<replication::Entry>& entries,
                 const std::optional<replication::HardState>& hard_state, bool sync);
  // Records a snapshot the state machine took at `index` (an entry of the log, at or after the current snapshot).
  Status create_snapshot(LogIndex index, const replication::Membership& membership, std::string_view data);
  // The same in two steps, so the data can be written off the driver thread:
  // describe_snapshot (driver thread) reads the entry's term and time; write_snapshot_data (any thread, touches only
  // the file `snapshot-<index>`) writes and fsyncs the data; record_snapshot (driver thread) makes it the current
  // snapshot — or refuses (InvalidArgument) when a newer one arrived meanwhile, and then removes the file.
  Result<replication::SnapshotMetadata> describe_snapshot(LogIndex index, const replication::Membership& membership,
                                                          uint64_t size_bytes) const;
  Status write_snapshot_data(LogIndex index, std::string_view data) const;
  Status record_snapshot(const replication::SnapshotMetadata& metadata);
  // Deletes entries up to and including `index`, which the snapshot must cover.
  Status compact(LogIndex index);

  // The first write error or log read error (I/O, corruption), or OK.
  const Status& failure() const { return failure_; }
  uint64_t syncs() const { return syncs_; }

 private:
  LevelDbLogStorage(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir, SyncDirectory sync_directory);
  Status load();
  std::string snapshot_path(LogIndex index) const;
  std::string incoming_path(LogIndex index) const;
  Status sync_snapshot_dir() const;
  Status take_staged_snapshot(const replication::SnapshotMetadata& metadata);
  Status write_snapshot_file(LogIndex index, std::string_view data);
  void remove_snapshot_files_except(LogIndex index);
  Status write_batch(void* batch, bool sync);
  Result<std::vector<replication::Entry>> read_entries(LogIndex low, LogIndex high, uint64_t max_bytes) const;

  leveldb::DB* db_;
  leveldb::Env* env_;
  std::string snapshot_dir_;
  SyncDirectory sync_directory_;
  // The incoming snapshot being received (SnapshotSink), if any.
  std::optional<replication::SnapshotMetadata> incoming_;
  std::unique_ptr<leveldb::WritableFile> incoming_file_;
  uint64_t incoming_bytes_ = 0;
  replication::HardState hard_state_;
  replication::SnapshotMetadata snapshot_;
  LogIndex base_index_;       // the entry just before the first stored one (snapshot or compaction point)
  Term base_term_;
  std::deque<Term> terms_;    // terms of first_index()..last_index(), so term() never reads the disk
  mutable Status failure_;  // entries() is a const read that may find the disk failed
  uint64_t syncs_ = 0;
};

}  // namespace mayfly::storage
