// RaftLogStore: the Raft log, hard state and snapshot record of a node, kept in a segmented append-only write-ahead
// log of its own (`<data dir>/wal/`, beside `snapshots/`), with snapshot data in a file in the snapshot directory
// (`snapshot-<index>`, written and fsync'd before the record that names it; older ones are deleted after). All file
// access goes through the leveldb::Env, so the simulator's fault-injecting Env (its crash model) covers the log and
// the snapshots alike. The state machine stays in LevelDB; the log no longer goes through LevelDB's WAL, memtable and
// compactions (issue #14: that was a large share of the CPU per replicated write).
//
// The WAL: files `wal/<sequence, 20 digits>.log`, each a run of records
//   crc32c (4 bytes LE, over type and payload) | payload length (4 bytes LE) | type (1 byte) | payload
// of five types: an entry (replication::encode_entry; an entry at an index the log already holds replaces it and
// every later one — a follower's conflicting suffix), the hard state, the snapshot record (one of size 0 is a
// checkpoint: the state machine's own durable state covers it and there is no data file), a compaction point (index,
// term: entries up to it are dropped) and a reset (index, term: a snapshot from the leader replaced the whole log).
// Replaying every segment in order rebuilds the log. A new segment starts at every open and when the active one
// passes `segment_bytes`; it begins with the hard state, snapshot record and compaction point of that moment, so an
// older segment can be deleted as soon as the compaction point passes its last entry (never the active one).
//
// Crashes: a record is durable once a synced persist() returned. A torn or unsynced tail of the newest segment (a
// short record, a checksum mismatch) is cut off at open — its valid prefix is rewritten under the same name
// (write, fsync, rename, directory fsync) before a new segment starts. A bad record in any older segment, or a log
// whose entries leave a gap no compaction point covers, is Corruption at open. A segment is only left behind (sealed)
// after an fsync, so only the newest can have a torn tail.
//
// Upgrading: a data directory written by a version that kept the log in LevelDB (its raft keys, storage/layout.h)
// is migrated at the first open — the log is streamed to `<segment>.tmp`, fsync'd and renamed to the first segment,
// then the LevelDB keys are deleted (a crash before the rename leaves a `.tmp` file the next open removes before it
// migrates again; a crash after it leaves keys the next open deletes).
//
// Durability of names: a snapshot file is written as `snapshot-<index>.tmp`, fsync'd, renamed, and then the directory
// is fsync'd (the `sync_directory` hook), so a crash never leaves a partial file under a snapshot's name nor loses the
// name of a file a record points at. The same holds for incoming snapshots (SnapshotSink): a follower streams the
// leader's chunks to `incoming-<index>.part` (memory stays at one chunk), renames it to `incoming-<index>` when
// complete, and persist() of the staged snapshot renames that to `snapshot-<index>`. open() removes every leftover.
// A new WAL segment's name is made durable (directory fsync) before anything is written to it that matters.
// Reading a snapshot that cannot be read (EIO, EMFILE) returns IOError; it never aborts.
//
// Reads of the log: hard_state(), snapshot_metadata(), first_index(), last_index() and term() answer from memory
// (the log's terms and record positions are loaded by open(), which returns any read error as its Status). entries()
// answers the newest entries written since open (up to Options::recent_entry_bytes) from memory — what followers and
// the apply loop ask for — and older ones from the segment files, checking each record's checksum and that it holds
// the entry asked for. An I/O error or corruption there is returned (the core turns it into
// replication::StorageFailure) and is sticky like a write error: failure() reports it and every later write fails.
// Replay checks the log it rebuilds: entries without a gap no compaction point covers, terms never going back.
//
// Writes follow Ready: persist() takes a Ready's snapshot, entries and hard state and appends them as ONE write to the
// active segment, fsync'd when asked — group commit: however many entries arrived during the previous fsync go into
// this one. After a failed write every later write fails with the first error (sticky): what reached the disk is
// unknown, so the node must stop and restart. Reopening restores exactly what was synced.
//
// Thread-safety: one thread (the node's driver) at a time, like every LogStorage — except write_snapshot_data, which
// touches only its snapshot file.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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
class RandomAccessFile;
class WritableFile;
}

namespace mayfly::storage {

// The bytes of an entry's WAL record (tests craft segment contents with it).
std::string wal_entry_record(const replication::Entry& entry);

// Makes the entries of directory `path` durable (open + fsync of the directory on POSIX).
Status sync_directory_posix(const std::string& path);
// How RaftLogStore makes a rename or creation in a directory durable; empty: the Env makes names durable itself
// (the simulator's in-memory Env).
using SyncDirectory = std::function<Status(const std::string& path)>;

struct RaftLogStoreOptions {
  // Start a new segment once the active one is this large.
  uint64_t segment_bytes = 64 << 20;
  // The newest entries written since open kept in memory for entries() (followers catching up, the apply loop);
  // older ones, and every entry after a restart, are read from the segment files.
  uint64_t recent_entry_bytes = 32 << 20;
};

class RaftLogStore final : public replication::LogStorage, public replication::SnapshotSink {
 public:
  using Options = RaftLogStoreOptions;

  // Opens the log of the data directory that holds `snapshot_dir`: its WAL is the sibling directory `wal`. `db` (not
  // owned; must outlive this) is only read for a log an earlier version kept there (migrated, then deleted). Files
  // are accessed through `env` (nullptr: the real file system). A fresh store (nothing persisted) with a non-empty
  // `bootstrap` is initialised with the bootstrap entries and hard state of a new cluster; with an empty one it waits
  // to be filled by a leader.
  static Result<std::unique_ptr<RaftLogStore>> open(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir,
                                                    const replication::Membership& bootstrap,
                                                    SyncDirectory sync_directory = nullptr, Options options = {});

  ~RaftLogStore() override;

  // LogStorage.
  replication::HardState hard_state() const override { return hard_state_; }
  replication::SnapshotMetadata snapshot_metadata() const override { return snapshot_; }
  LogIndex first_index() const override { return LogIndex(base_index_.value() + 1); }
  LogIndex last_index() const override { return LogIndex(base_index_.value() + slots_.size()); }
  Result<Term> term(LogIndex index) const override;
  Result<std::vector<replication::Entry>> entries(LogIndex low, LogIndex high, uint64_t max_bytes) const override;
  Result<std::string> read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                          uint64_t max_bytes) const override;
  // False while the snapshot record is a checkpoint (no data file: see record_snapshot).
  bool snapshot_data_ready() const override { return snapshot_.index == LogIndex(0) || snapshot_.size_bytes != 0; }

  // SnapshotSink (the core, driver thread). receive_begin refuses (InvalidArgument) a declared size over half the
  // free space of the snapshot directory (the file and the installed state both need room).
  Status receive_begin(const replication::SnapshotMetadata& metadata) override;
  Status receive_append(std::string_view chunk) override;
  Status receive_finish() override;
  void receive_abort() override;

  // Persists what a Ready asks for, in one write (synced when `sync`). The snapshot, when present, replaces the
  // whole log; entries replace every stored entry from entries.front().index on. A staged snapshot's data is the
  // file receive_finish() left; it becomes the snapshot file (renamed, directory fsync'd) before the write. A snapshot
  // that is not staged, with index > 0 and size_bytes 0 (and no data), is recorded as a checkpoint (see
  // record_snapshot) and no file is written: a restore (storage/restore.h) starts a new node's log that way, the state
  // at that index made durable in the state machine beforehand.
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
  // The same, with the data handed to `write` piece by piece by `produce` (memory stays at one piece); returns the
  // number of bytes written.
  using SnapshotProducer = std::function<Status(const std::function<Status(std::string_view piece)>& write)>;
  Result<uint64_t> write_snapshot_stream(LogIndex index, const SnapshotProducer& produce) const;
  // A record with size_bytes 0 (and index > 0) is a checkpoint: the state machine made its state at `index` durable
  // itself (StateMachine::checkpoint), no data file exists, and snapshot_data_ready() is false until a snapshot with
  // data is recorded at the same or a later index (produced when a follower needs one: RaftCore::
  // take_snapshot_request). Every other snapshot file is removed when a record is made.
  Status record_snapshot(const replication::SnapshotMetadata& metadata);
  // Removes the file a snapshot job wrote at `index` that was not recorded (unless it is the current record's data).
  void discard_snapshot_file(LogIndex index);
  // Deletes entries up to and including `index`, which the snapshot record (a checkpoint or a snapshot with data) must
  // cover; segments holding only such entries
  // are removed (after an fsync of the record that drops them).
  Status compact(LogIndex index);

  // The first write error or log read error (I/O, corruption), or OK.
  const Status& failure() const { return failure_; }
  uint64_t syncs() const { return syncs_; }
  // WAL segment files on disk (the active one included).
  size_t segment_count() const { return segments_.size(); }
  const std::string& wal_dir() const { return wal_dir_; }

 private:
  // Where an entry's record is: segment `sequence`, `length` bytes (header included) at `offset`.
  struct Slot {
    Term term;
    uint64_t sequence = 0;
    uint64_t offset = 0;
    uint32_t length = 0;
  };
  struct Segment {
    uint64_t sequence = 0;
    uint64_t max_index = 0;  // the highest entry index ever written to it (0: none)
  };

  RaftLogStore(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir, SyncDirectory sync_directory,
               Options options);
  Status open_wal();
  // Replays one segment's records. `gap_floor`: an entry arrived past the end of the log, so the segments before it
  // were deleted after a compaction point passed them — a later compaction point at or past it must say so.
  Status replay_segment(const Segment& segment, bool newest, std::optional<uint64_t>& gap_floor);
  Status migrate_from_leveldb();
  Status delete_leveldb_log();
  // The records a new segment starts with: the hard state, snapshot record and compaction point as they are now.
  std::string header_records() const;
  Status start_segment();
  Status remove_compacted_segments();
  std::string segment_path(uint64_t sequence) const;
  // Record effects on the in-memory log (replay and persist).
  void put_entry(replication::Entry entry, const Slot& slot, bool cache);
  void drop_through(LogIndex index, Term term);  // a compaction point
  void reset_to(LogIndex index, Term term);      // a snapshot replacing the log
  Status append_to_active(const std::string& records, bool sync);

  std::string snapshot_path(LogIndex index) const;
  std::string incoming_path(LogIndex index) const;
  Status sync_snapshot_dir() const;
  Status sync_wal_dir() const;
  Status take_staged_snapshot(const replication::SnapshotMetadata& metadata);
  Status write_snapshot_file(LogIndex index, std::string_view data);
  void remove_snapshot_files_except(LogIndex index);
  Result<std::vector<replication::Entry>> read_entries(LogIndex low, LogIndex high, uint64_t max_bytes) const;
  Result<replication::Entry> read_entry_from_disk(LogIndex index,
                                                  std::map<uint64_t, std::unique_ptr<leveldb::RandomAccessFile>>&
                                                      opened) const;

  leveldb::DB* db_;
  leveldb::Env* env_;
  std::string snapshot_dir_;
  std::string wal_dir_;
  SyncDirectory sync_directory_;
  Options options_;
  // The incoming snapshot being received (SnapshotSink), if any.
  std::optional<replication::SnapshotMetadata> incoming_;
  std::unique_ptr<leveldb::WritableFile> incoming_file_;
  uint64_t incoming_bytes_ = 0;
  replication::HardState hard_state_;
  replication::SnapshotMetadata snapshot_;
  LogIndex base_index_;       // the entry just before the first stored one (snapshot or compaction point)
  Term base_term_;
  std::deque<Slot> slots_;    // first_index()..last_index(): term and record position, so term() never reads
  std::deque<replication::Entry> recent_;  // the newest entries (last_index() - recent_.size() + 1 .. last_index())
  uint64_t recent_bytes_ = 0;
  std::deque<Segment> segments_;  // oldest first; the back one is active
  std::unique_ptr<leveldb::WritableFile> active_;
  uint64_t active_bytes_ = 0;
  mutable Status failure_;  // entries() is a const read that may find the disk failed
  uint64_t syncs_ = 0;
};

}  // namespace mayfly::storage
