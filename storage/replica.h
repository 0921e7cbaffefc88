// Replica: one node's replicated store — the Raft core, its write-ahead log and the state machine — and the one
// implementation of the driver's duty cycle (persist → send → apply → advance), shared by mayflyd's driver and the
// deterministic simulator so that what the simulator proves is what production runs.
//
// The caller owns time and the network: it calls tick() with its wall clock, step() with peer messages, propose()
// with commands, and process_ready() after each batch of inputs, sending the messages it returns. Everything else —
// fsync'd group commit of the log, applying committed entries at their replicated time, installing snapshots,
// checkpointing and compacting the log — happens here.
//
// Compaction by checkpoint (no export): every `checkpoint_interval_entries` applied entries, process_ready makes the
// state durable (StateMachine::checkpoint: one synced LevelDB write), records a checkpoint at the applied index in
// the log (a snapshot record without data) and compacts the log up to `log_entries_kept_after_checkpoint` entries
// before it. Invariant, through every crash: the log's compaction point <= the checkpoint <= the state's durable
// applied index. A snapshot's data is produced only when a follower needs entries the log no longer has
// (RaftCore::take_snapshot_request): begin_snapshot opens a consistent view of the state, SnapshotJob::run streams it
// to the snapshot file (memory: one piece), finish_snapshot records it, and the leader sends it. While a snapshot is
// being produced or sent, checkpoints wait (the follower needs that snapshot and the entries after it).
//
// Recovery: open() rebuilds the core from the log; entries already applied to the state machine are not applied
// again; if a crash came between persisting an installed snapshot and installing it into the state machine, or in
// the middle of that install (the store's install marker says so, whatever its applied index), the snapshot is
// installed again from its file first. A state behind the log's checkpoint is Corruption (it lost writes it had made
// durable).
//
// Snapshots from the leader stream to a file as they arrive (the log store is the core's SnapshotSink); once
// persisted, the state is installed from that file, read a piece at a time (StateMachine::install_snapshot: bounded
// batches, crash-safe by its marker), so neither receiving nor installing holds the snapshot in memory.
//
// Thread-safety: one thread (the driver's). The state machine's read methods may be used from other threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/prng.h"
#include "common/status.h"
#include "replication/raft_core.h"
#include "storage/command.h"
#include "storage/raft_log_store.h"
#include "storage/state_machine.h"

namespace mayfly::storage {

struct ReplicaOptions {
  std::string data_dir;                      // holds db/ and the snapshot file
  leveldb::Env* env = nullptr;               // nullptr: the real file system
  replication::RaftConfig raft;              // raft.self is this node's id
  replication::Membership bootstrap;         // a fresh cluster's initial voters; empty for a node that joins later
  uint64_t seed = 1;                         // for the core's randomized election timeouts
  uint64_t checkpoint_interval_entries = 10000;  // checkpoint and compact the log after this many applied entries
  uint64_t log_entries_kept_after_checkpoint = 1000;  // keep this much log behind a checkpoint for slow followers
  // While a follower installs a snapshot (RaftCore::snapshot_install_pin), the log after it is kept — unless that is
  // more than this many entries behind the applied index (the WAL on disk is bounded; the follower then needs a new
  // snapshot when it answers).
  uint64_t max_log_entries_held_for_install = 2'000'000;
  // The export of a snapshot for a follower (one at a time) writes at most this many bytes a second, so it leaves
  // the disk and a core to the foreground; 0: unpaced (the simulator, tests).
  uint64_t snapshot_export_bytes_per_second = 0;
  // Off: process_ready() produces the snapshots followers ask for itself, synchronously (the simulator, benchmarks).
  // On: it leaves them to the caller, who runs begin_snapshot / SnapshotJob::run / finish_snapshot with the export
  // on another thread, so a large export never stalls the driver past an election timeout (mayflyd).
  bool background_snapshots = false;
  size_t block_cache_bytes = 64 << 20;
  int max_open_tables = kDefaultMaxOpenTables;        // StoreOptions: the table cache
  size_t table_block_bytes = kDefaultTableBlockBytes;  // StoreOptions: a table's data block
  RaftLogStoreOptions log;                   // the WAL's segment size and cache of the newest entries
  // The state machine's install batches and (tests) its hook after each (StoreOptions, storage/state_machine.h).
  size_t install_batch_bytes = 4 << 20;
  std::function<Status(int batch)> after_install_batch;
  // Makes a rename in a directory durable (snapshot files). Empty: fsync the directory (POSIX) when `env` is the real
  // file system, nothing for another Env (the simulator's takes renames as durable at once).
  SyncDirectory sync_directory;

  ReplicaOptions() {
    raft.max_entry_bytes = 4 << 20;    // a 2 MB item plus its command must fit in one entry
    raft.max_message_bytes = 4 << 20;
  }
};

// One committed entry as applied here.
struct AppliedEntry {
  LogIndex index;
  Term term;
  int64_t ts_micros = 0;
  replication::EntryType type = replication::EntryType::kNormal;
  OpResult result;  // for normal entries: the command's outcome; otherwise a 200 with no body
  // Normal entries: what the command was, for request-unit accounting (kTime for undecodable or other entries).
  CommandType command_type = CommandType::kTime;
  std::string database;
  std::string container;
  uint64_t command_bytes = 0;  // the request body's size
};

// What one process_ready() produced.
struct ReplicaOutput {
  std::vector<replication::Message> messages;  // send these, in order
  std::vector<AppliedEntry> applied;
  std::vector<replication::ReadState> read_states;
  std::optional<replication::SnapshotMetadata> snapshot_installed;  // a leader's snapshot replaced the state
  double snapshot_install_seconds = 0;  // how long that install took (reported, never decides anything)
  bool synced = false;  // the log was fsync'd for this batch (one fsync per batch: group commit)
  std::vector<double> persist_seconds;  // how long each synced log write took (for the fsync latency histogram)
  uint64_t entries_persisted = 0;
};

class Replica {
 public:
  static Result<std::unique_ptr<Replica>> open(const ReplicaOptions& options);
  ~Replica();

  void tick(int64_t now_micros) { core_->tick(now_micros); }
  Status step(const replication::Message& message) { return core_->step(message); }
  Result<replication::Proposal> propose(const Command& command, int64_t now_micros);
  Result<replication::Proposal> propose_time_entry(int64_t now_micros) { return core_->propose_time_entry(now_micros); }
  Result<replication::Proposal> propose_config_change(const replication::ConfigChange& change) {
    return core_->propose_config_change(change);
  }
  Status read_index(std::string context) { return core_->read_index(std::move(context)); }
  Status transfer_leadership(NodeId target) { return core_->transfer_leadership(target); }

  bool has_ready() const { return core_->has_ready(); }
  // Handles every pending Ready in the driver's order. A Status error means the disk failed: the node must stop.
  // With `send_now`, the messages that may leave before the local fsync (a leader's appends) are handed to it before
  // the log write starts, so followers persist in parallel with the leader (Raft thesis §10.2.1); without it they
  // come back in ReplicaOutput::messages like the rest.
  using SendNow = std::function<void(std::vector<replication::Message>&&)>;
  Result<ReplicaOutput> process_ready(const SendNow& send_now = nullptr);

  // Pieces of a snapshot export (the memory an export holds, besides LevelDB's iterator).
  static constexpr size_t kSnapshotPieceBytes = 1 << 20;
  // A snapshot of the state machine in the making. run() may execute on any thread; the rest is the driver's.
  struct SnapshotJob {
    std::unique_ptr<StateMachine::View> view;  // the state at `metadata.index`
    replication::Membership membership;
    LogIndex index;
    Status status;                             // run()'s outcome
    uint64_t size_bytes = 0;
    // At most this many bytes a second (ReplicaOptions::snapshot_export_bytes_per_second; 0: as fast as it goes).
    uint64_t bytes_per_second = 0;
    // Set from any thread (the driver, stopping): run() stops at its next piece with Unavailable, and its file goes.
    std::atomic<bool> cancelled{false};
    // Streams the view to the snapshot file (thread-safe: touches only the view and that file).
    void run(const RaftLogStore& log);
  };
  // A job when the core asked for a snapshot's data (a follower needs entries before the log's start) and none is
  // running.
  std::unique_ptr<SnapshotJob> begin_snapshot();
  // Makes the next begin_snapshot return a job even though no follower asked (tests; a tool that wants the state as
  // a snapshot file).
  void request_snapshot() { snapshot_requested_ = true; }
  // Records the job's snapshot; the leader sends it at the next heartbeat. A job overtaken by a newer snapshot (one
  // installed from the leader meanwhile) is dropped quietly; a failed export or write is returned.
  Status finish_snapshot(SnapshotJob& job);
  // Checkpoints made and snapshots produced since open (for tests and metrics).
  uint64_t checkpoints() const { return checkpoints_; }
  uint64_t snapshots_produced() const { return snapshots_produced_; }
  // A snapshot open() installed from the raft log's file before anything else: a crash came after the snapshot was
  // persisted and before its install finished (`redo`: the install had begun — the store held its marker).
  struct InstalledAtOpen {
    replication::SnapshotMetadata snapshot;
    bool redo = false;
    double seconds = 0;
  };
  const std::optional<InstalledAtOpen>& installed_at_open() const { return installed_at_open_; }

  replication::RaftCore& core() { return *core_; }
  const replication::RaftCore& core() const { return *core_; }
  // This opening's seed (ReplicaOptions::seed): different for every start of the process (mayflyd draws it from the
  // clock and the node id; the simulator from its seed and the restart count).
  uint64_t seed() const { return options_.seed; }
  StateMachine& state() { return *state_; }
  const StateMachine& state() const { return *state_; }
  RaftLogStore& log() { return *log_; }

 private:
  Replica(const ReplicaOptions& options, std::unique_ptr<StateMachine> state, std::unique_ptr<RaftLogStore> log);
  Status recover_snapshot();
  // Installs the snapshot file `metadata` names into the state machine, a piece at a time.
  Status install_snapshot_file(const replication::SnapshotMetadata& metadata);
  Result<AppliedEntry> apply_entry(const replication::Entry& entry);
  Status maybe_checkpoint();
  Status maybe_take_snapshot();
  bool snapshot_running_ = false;
  bool snapshot_requested_ = false;  // request_snapshot
  uint64_t checkpoints_ = 0;
  uint64_t snapshots_produced_ = 0;
  std::optional<InstalledAtOpen> installed_at_open_;

  ReplicaOptions options_;
  std::unique_ptr<StateMachine> state_;
  std::unique_ptr<RaftLogStore> log_;
  std::unique_ptr<replication::RaftCore> core_;
};

}  // namespace mayfly::storage
