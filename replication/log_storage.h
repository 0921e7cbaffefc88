// LogStorage: where the Raft core reads its persisted log, hard state and snapshot from — the core never writes it.
// The driver writes it (from Ready) with whatever the implementation offers, then calls RaftCore::advance; from then
// on the core expects to read back what it handed out. Like etcd's Storage interface.
//
// The persisted log is: an optional snapshot covering every index up to `snapshot_metadata().index`, then entries
// `first_index() .. last_index()`. Every compacted index is covered by the snapshot:
//   first_index() - 1 <= snapshot_metadata().index <= last_index()
// (first_index() - 1 == last_index() means the log holds no entries.)
//
// Bootstrapping: membership lives in the log (config-change entries) and in snapshots, never beside them, so a node
// that joins later learns it by replaying the log. Every node of a fresh cluster therefore starts with the same
// bootstrap_entries(membership) as committed entries and bootstrap_hard_state(membership); a node that will join
// an existing cluster starts empty (no entries, zero hard state) and waits for the leader.
//
// Errors: a read outside the stored range returns NotFound (the core checks ranges first, so this is a bug, and the
// core asserts). Any other error (I/O, corruption, too many open files) is the disk's: the core cannot go on without
// the entry, and unwinding every caller for it would put a Status on dozens of pure functions, so it throws
// StorageFailure out of whatever call needed the read — step, tick, propose, ready, advance, or RaftCore::create,
// which returns it as a Status. The core is then unusable; the driver stops the node (the log line names the read and
// the storage's error) and a restart reopens the store. Except the snapshot file: see RaftCore.
//
// Thread-safety: implementations are used by one thread (the driver's) at a time; MemoryLogStorage is not
// thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replication/types.h"

namespace mayfly::replication {

// The log every node of a fresh cluster starts with: one config-change entry per member (kAddVoter for voters,
// then kAddLearner), term 1, indexes 1..n, ts 1..n. Identical on every node given the same membership.
std::vector<Entry> bootstrap_entries(const Membership& membership);
// The hard state that goes with it: term 1, no vote, the bootstrap entries committed.
HardState bootstrap_hard_state(const Membership& membership);

// A LogStorage read failed with something other than NotFound; status() names the read and carries the storage's
// own error ("IoError: Raft log entries [12, 20): read raft entry 12: IO error: .../000005.ldb: Input/output error").
// Thrown by the core (see Errors above); what() is status().to_string().
class StorageFailure : public std::runtime_error {
 public:
  explicit StorageFailure(Status status);
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// What the core does with a LogStorage read's error (never OK): asserts on NotFound (the core asked outside the stored
// range: its own bug); throws StorageFailure, with `operation` in front of the storage's message, on anything else.
[[noreturn]] void storage_read_failed(const Status& status, std::string_view operation);

class LogStorage {
 public:
  virtual ~LogStorage() = default;

  // The hard state last persisted; all zero on a fresh node.
  virtual HardState hard_state() const = 0;
  // The newest snapshot's metadata (index 0: none yet, but the membership is still the bootstrap one).
  virtual SnapshotMetadata snapshot_metadata() const = 0;
  virtual LogIndex first_index() const = 0;
  virtual LogIndex last_index() const = 0;
  // Term of entry `index`, for first_index() - 1 <= index <= last_index() (first_index() - 1 answers from the
  // snapshot or the compaction point).
  virtual Result<Term> term(LogIndex index) const = 0;
  // Entries [low, high) with first_index() <= low < high <= last_index() + 1, stopping before the total
  // Entry::size_bytes() exceeds max_bytes — but always at least one entry.
  virtual Result<std::vector<Entry>> entries(LogIndex low, LogIndex high, uint64_t max_bytes) const = 0;
  // Up to max_bytes of the snapshot data at `offset`, for the snapshot at `snapshot_index`; NotFound when that
  // snapshot has been replaced by a newer one (the core then restarts the transfer with the new one).
  virtual Result<std::string> read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                                  uint64_t max_bytes) const = 0;
  // Whether the data of snapshot_metadata() can be read now. A storage may record a snapshot whose data is produced
  // only when a follower needs it — a checkpoint of a state machine that keeps its own durable state
  // (storage/raft_log_store.h): the leader then asks for it (RaftCore::take_snapshot_request) and waits, retrying at
  // each heartbeat, until the storage records a snapshot with data.
  virtual bool snapshot_data_ready() const { return true; }
};

// Where a follower writes a snapshot arriving from the leader, chunk by chunk, so that memory does not grow with the
// snapshot's size (the in-memory alternative, without a sink, holds the whole snapshot until it is installed).
// receive_begin() starts a transfer (dropping any partial one); receive_append() adds the next bytes; receive_finish()
// makes the complete
// data durable under a staging name that is never mistaken for a snapshot — the driver's storage takes it when it
// persists the Ready's snapshot (Snapshot::staged); receive_abort() drops a partial transfer. A failed call leaves
// no transfer: the core answers so that the leader starts over later. receive_begin refuses (InvalidArgument) a declared size
// the sink cannot hold, e.g. more than the free disk.
// Thread-safety: called by the core only, on its thread.
class SnapshotSink {
 public:
  virtual ~SnapshotSink() = default;
  virtual Status receive_begin(const SnapshotMetadata& metadata) = 0;
  virtual Status receive_append(std::string_view chunk) = 0;
  virtual Status receive_finish() = 0;
  virtual void receive_abort() = 0;
};

// An in-memory LogStorage for tests and the simulator, with the write side a driver needs.
class MemoryLogStorage final : public LogStorage {
 public:
  // A node of a fresh cluster whose initial configuration is `bootstrap` (holding bootstrap_entries), or with an
  // empty `bootstrap` a node that will join an existing cluster.
  explicit MemoryLogStorage(const Membership& bootstrap = {});

  HardState hard_state() const override { return hard_state_; }
  SnapshotMetadata snapshot_metadata() const override { return snapshot_.metadata; }
  LogIndex first_index() const override { return LogIndex(base_index_.value() + 1); }
  LogIndex last_index() const override { return LogIndex(base_index_.value() + entries_.size()); }
  Result<Term> term(LogIndex index) const override;
  Result<std::vector<Entry>> entries(LogIndex low, LogIndex high, uint64_t max_bytes) const override;
  Result<std::string> read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                          uint64_t max_bytes) const override;

  // --- Writes (the driver's side) ---
  void set_hard_state(const HardState& hard_state) { hard_state_ = hard_state; }
  // Writes `entries` (contiguous, ascending); every stored entry at index >= entries.front().index is replaced,
  // which is how a follower's conflicting suffix is truncated. entries.front().index must be in
  // [first_index(), last_index() + 1].
  Status append(const std::vector<Entry>& entries);
  // Replaces the whole log with `snapshot` (a follower installing one from the leader): every entry is dropped, as
  // Ready::snapshot requires. Refuses a snapshot older than the current one.
  Status apply_snapshot(Snapshot snapshot);
  // Records a snapshot the state machine took at `index` (<= last_index(), >= the current snapshot's index); the
  // term and ts come from the entry. Does not compact.
  Status create_snapshot(LogIndex index, Membership membership, std::string data);
  // Drops entries up to and including `index`, which must be covered by the snapshot (index <= snapshot index).
  Status compact(LogIndex index);

  const Snapshot& snapshot() const { return snapshot_; }

 private:
  HardState hard_state_;
  Snapshot snapshot_;
  // Entry just before entries_.front(): the snapshot or compaction point.
  LogIndex base_index_;
  Term base_term_;
  std::deque<Entry> entries_;
};

}  // namespace mayfly::replication
