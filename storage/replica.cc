#include "storage/replica.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace mayfly::storage {

using replication::Entry;
using replication::EntryType;

namespace {

// How much of the snapshot file an install reads at a time (StateMachine::install_snapshot holds one such piece).
constexpr uint64_t kInstallReadBytes = 4 << 20;

}  // namespace

Result<std::unique_ptr<Replica>> Replica::open(const ReplicaOptions& options) {
  MAYFLY_RETURN_IF_ERROR(options.raft.validate());
  if (options.checkpoint_interval_entries == 0) {
    return Status::invalid_argument("checkpoint_interval_entries must be at least 1");
  }
  StoreOptions store_options;
  store_options.path = options.data_dir + "/db";
  store_options.env = options.env;
  store_options.block_cache_bytes = options.block_cache_bytes;
  store_options.max_open_tables = options.max_open_tables;
  store_options.table_block_bytes = options.table_block_bytes;
  store_options.install_batch_bytes = options.install_batch_bytes;
  store_options.after_install_batch = options.after_install_batch;
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> state, StateMachine::open(store_options));
  SyncDirectory sync_directory = options.sync_directory;
  if (!sync_directory && options.env == nullptr) sync_directory = sync_directory_posix;
  // LevelDB makes its own files durable (and its directory, for the MANIFEST), but not the entry of db/ itself in a
  // data directory it has just created.
  if (sync_directory) MAYFLY_RETURN_IF_ERROR(sync_directory(options.data_dir));
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<RaftLogStore> log,
                          RaftLogStore::open(state->leveldb(), options.env, options.data_dir + "/snapshots",
                                                  options.bootstrap, std::move(sync_directory), options.log));
  std::unique_ptr<Replica> replica(new Replica(options, std::move(state), std::move(log)));
  MAYFLY_RETURN_IF_ERROR(replica->recover_snapshot());
  MAYFLY_ASSIGN_OR_RETURN(replica->core_,
                          replication::RaftCore::create(options.raft, *replica->log_, Prng(options.seed),
                                                        replica->state_->applied().index, replica->log_.get()));
  return replica;
}

Replica::Replica(const ReplicaOptions& options, std::unique_ptr<StateMachine> state,
                 std::unique_ptr<RaftLogStore> log)
    : options_(options), state_(std::move(state)), log_(std::move(log)) {}

Replica::~Replica() {
  core_.reset();
  log_.reset();  // before the state machine, which owns the LevelDB both use
  state_.reset();
}

Status Replica::recover_snapshot() {
  const replication::SnapshotMetadata snapshot = log_->snapshot_metadata();
  if (const std::optional<LogIndex> unfinished = state_->unfinished_install()) {
    // A crash (or a failure) stopped an install half-way: the store holds part of two states, whatever its applied
    // index says. The log recorded the snapshot before the install began, so its file is the one to install again.
    if (*unfinished != snapshot.index || !log_->snapshot_data_ready()) {
      return Status::corruption(
          "the store holds an unfinished install of the snapshot at index " + std::to_string(unfinished->value()) +
          " but the raft log's snapshot is at index " + std::to_string(snapshot.index.value()) +
          ", so it cannot be finished here: remove this node from the cluster, empty its data directory and add it "
          "again (it then receives a snapshot from the leader)");
    }
  } else if (snapshot.index == LogIndex(0) || state_->applied().index >= snapshot.index) {
    return Status::ok();
  } else if (!log_->snapshot_data_ready()) {
    // A checkpoint record is made only after the state's synced write at its index: a store behind it lost data
    // that was durable (the disk, or a data directory put together from different copies).
    return Status::corruption("the state machine is at index " + std::to_string(state_->applied().index.value()) +
                              ", behind the log's checkpoint at " + std::to_string(snapshot.index.value()) +
                              ": the log before it is gone and the store lost writes it had made durable; wipe this "
                              "node's data directory and re-add it to the cluster (it then receives a snapshot)");
  }
  // The log moved past entries the state machine never applied: only the snapshot has them.
  const bool redo = state_->unfinished_install().has_value();
  const auto started = std::chrono::steady_clock::now();
  Status installed = install_snapshot_file(snapshot);
  if (installed.code() == StatusCode::kCorruption) {
    // The same file at every start: say how to get out rather than fail the same way again.
    return installed.with_context("install the snapshot at index " + std::to_string(snapshot.index.value()) +
                                  " from its file (it cannot be: remove this node from the cluster, empty its data "
                                  "directory and add it again)");
  }
  MAYFLY_RETURN_IF_ERROR(installed);
  if (state_->applied().index != snapshot.index) {
    return Status::corruption("snapshot file does not match its record (applied index " +
                              std::to_string(state_->applied().index.value()) + ", record " +
                              std::to_string(snapshot.index.value()) + ")");
  }
  installed_at_open_ = InstalledAtOpen{
      snapshot, redo, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
  return Status::ok();
}

Status Replica::install_snapshot_file(const replication::SnapshotMetadata& metadata) {
  // Read a piece at a time: memory stays at a piece and a write batch, whatever the snapshot's size.
  uint64_t offset = 0;
  return state_->install_snapshot(
      [&](size_t max_bytes) -> Result<std::string> {
        if (offset >= metadata.size_bytes) return std::string();
        MAYFLY_ASSIGN_OR_RETURN(std::string piece, log_->read_snapshot_chunk(metadata.index, offset,
                                                                            std::min<uint64_t>(max_bytes, kInstallReadBytes)));
        offset += piece.size();
        return piece;
      },
      metadata.index);
}

Result<replication::Proposal> Replica::propose(const Command& command, int64_t now_micros) {
  return core_->propose(encode_command(command), now_micros);
}

Result<AppliedEntry> Replica::apply_entry(const Entry& entry) {
  AppliedEntry applied{entry.index, entry.term, entry.ts_micros, entry.type, OpResult{}};
  if (entry.index <= state_->applied().index) return applied;  // already applied before a restart
  if (entry.type == EntryType::kNormal) {
    // Decoded once: applied, then its type and target kept for request-unit accounting. Undecodable bytes take
    // apply_encoded's deterministic 400.
    Result<Command> command = decode_command(entry.data);
    if (!command.is_ok()) {
      MAYFLY_ASSIGN_OR_RETURN(applied.result, state_->apply_encoded(entry.data, entry.index, entry.ts_micros));
      return applied;
    }
    MAYFLY_ASSIGN_OR_RETURN(applied.result, state_->apply(*command, entry.index, entry.ts_micros));
    applied.command_type = command->type;
    applied.database = std::move(command->database);
    applied.container = std::move(command->container);
    // A validated body (storage::PreparedBody) counts as its compact JSON.
    applied.command_bytes = command->prepared ? command->prepared->item.json.size() : command->body.size();
  } else {
    // Config changes and time entries carry no command, but they move the applied index and replicated time.
    MAYFLY_ASSIGN_OR_RETURN(applied.result, state_->apply(Command{}, entry.index, entry.ts_micros));
  }
  return applied;
}

Result<ReplicaOutput> Replica::process_ready(const SendNow& send_now) {
  ReplicaOutput output;
  while (core_->has_ready()) {
    replication::Ready ready = core_->ready();
    // (0) Messages that may leave before the fsync (a leader's appends: thesis §10.2.1).
    if (send_now && !ready.messages.empty()) {
      send_now(std::move(ready.messages));
    } else {
      for (replication::Message& message : ready.messages) output.messages.push_back(std::move(message));
    }
    // (1) Persist snapshot, entries and hard state in one synced write: the group commit.
    // A Ready that only moves the commit index is written without fsync (commit is recomputed after a crash).
    if (ready.snapshot.has_value() || !ready.entries.empty() || ready.hard_state.has_value()) {
      const auto started = std::chrono::steady_clock::now();  // measured for metrics only, never decides anything
      MAYFLY_RETURN_IF_ERROR(log_->persist(ready.snapshot, ready.entries, ready.hard_state, ready.must_sync));
      if (ready.must_sync) {
        output.persist_seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
      output.synced = output.synced || ready.must_sync;
      output.entries_persisted += ready.entries.size();
    }
    // (2) Messages that needed (1) to be durable.
    for (replication::Message& message : ready.messages_after_persist) output.messages.push_back(std::move(message));
    // (3) Install, apply, answer reads.
    if (ready.snapshot) {
      const auto install_started = std::chrono::steady_clock::now();  // reported only
      if (ready.snapshot->staged) {
        // Streamed to disk on arrival; persist() made it the snapshot file (and recorded it) before this install, so
        // a crash in the middle of it is finished from that file at the next open (recover_snapshot).
        MAYFLY_RETURN_IF_ERROR(install_snapshot_file(ready.snapshot->metadata));
      } else {
        MAYFLY_RETURN_IF_ERROR(state_->install_snapshot(ready.snapshot->data, ready.snapshot->metadata.index));
      }
      if (state_->applied().index != ready.snapshot->metadata.index) {
        // The bytes came from the leader: a mismatch is corrupt data, not a broken invariant of this process.
        return Status::corruption("installed snapshot applies index " +
                                  std::to_string(state_->applied().index.value()) + ", its record says " +
                                  std::to_string(ready.snapshot->metadata.index.value()));
      }
      output.snapshot_installed = ready.snapshot->metadata;
      output.snapshot_install_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - install_started).count();
    }
    // The Ready's applies go to LevelDB as one write (StateMachine::begin_apply_group), before anything is answered.
    state_->begin_apply_group();
    Status applied_all = Status::ok();
    for (const Entry& entry : ready.committed_entries) {
      Result<AppliedEntry> applied = apply_entry(entry);
      if (!applied.is_ok()) {
        applied_all = applied.status();
        break;
      }
      output.applied.push_back(std::move(applied).value());
    }
    Status written = state_->end_apply_group();
    MAYFLY_RETURN_IF_ERROR(applied_all);
    MAYFLY_RETURN_IF_ERROR(written);
    for (replication::ReadState& read : ready.read_states) output.read_states.push_back(std::move(read));
    core_->advance(ready);
  }
  MAYFLY_RETURN_IF_ERROR(maybe_checkpoint());
  MAYFLY_RETURN_IF_ERROR(maybe_take_snapshot());
  return output;
}

Status Replica::maybe_checkpoint() {
  const LogIndex applied = state_->applied().index;
  const replication::SnapshotMetadata recorded = log_->snapshot_metadata();
  if (applied.value() < recorded.index.value() + options_.checkpoint_interval_entries) return Status::ok();
  // Keep the snapshot a follower is about to receive, or is receiving, and the entries after it: a new record would
  // delete its data, and compacting past it would leave the follower needing another one (a transfer that never
  // ends on a large store). Both pins end with the transfer, or when the follower stops answering.
  if (snapshot_running_ || core_->sending_snapshot()) return Status::ok();
  // The same while a follower that has every chunk installs it, silent meanwhile (RaftCore::snapshot_install_pin),
  // up to a bound: the leader resends the last chunk when the answer is slow, and a new record would have deleted
  // it — the follower would then need a second export of the whole store (measured at 500k items: an export started
  // 0.6 s into the follower's 9 s install).
  if (const std::optional<LogIndex> pin = core_->snapshot_install_pin();
      pin && applied.value() - pin->value() <= options_.max_log_entries_held_for_install) {
    return Status::ok();
  }
  if (applied < log_->first_index()) return Status::ok();  // nothing applied since the log's start
  // (1) The state at `applied` becomes durable; (2) the record says so; (3) the log before it may go. In this order:
  // after a crash anywhere, the state is at or past every index the log no longer holds.
  MAYFLY_RETURN_IF_ERROR(state_->checkpoint());
  MAYFLY_ASSIGN_OR_RETURN(replication::SnapshotMetadata metadata,
                          log_->describe_snapshot(applied, core_->membership_at(applied), 0));
  MAYFLY_RETURN_IF_ERROR(log_->record_snapshot(metadata));
  ++checkpoints_;
  uint64_t compact_to = applied.value() > options_.log_entries_kept_after_checkpoint
                            ? applied.value() - options_.log_entries_kept_after_checkpoint
                            : 0;
  if (compact_to > 0) MAYFLY_RETURN_IF_ERROR(log_->compact(LogIndex(compact_to)));
  return Status::ok();
}

std::unique_ptr<Replica::SnapshotJob> Replica::begin_snapshot() {
  if (snapshot_running_) return nullptr;
  const bool asked = core_->take_snapshot_request();
  if (std::exchange(snapshot_requested_, false)) {
    if (state_->applied().index <= log_->snapshot_metadata().index && log_->snapshot_data_ready()) return nullptr;
  } else if (!asked || log_->snapshot_data_ready()) {
    return nullptr;  // not asked, or recorded meanwhile (the next heartbeat sends it)
  }
  auto job = std::make_unique<SnapshotJob>();
  job->view = state_->open_view();
  job->index = job->view->applied().index;
  job->membership = core_->membership_at(job->index);
  job->bytes_per_second = options_.snapshot_export_bytes_per_second;
  snapshot_running_ = true;
  return job;
}

void Replica::SnapshotJob::run(const RaftLogStore& log) {
  // Callers catch exceptions (std::bad_alloc) around this: it runs on a thread of its own. Memory stays at one piece
  // of the export, whatever the store's size.
  const auto started = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  Result<uint64_t> written = log.write_snapshot_stream(index, [&](const auto& write) {
    return view->export_snapshot_to(
        [&](std::string_view piece) -> Status {
          if (cancelled.load()) return Status::unavailable("snapshot export cancelled: the node is stopping");
          MAYFLY_RETURN_IF_ERROR(write(piece));
          bytes += piece.size();
          if (bytes_per_second == 0) return Status::ok();
          // Paced: wait until the bytes so far are due, in short sleeps so a stop is not held up.
          const auto due = started + std::chrono::microseconds(bytes * 1'000'000 / bytes_per_second);
          while (!cancelled.load() && std::chrono::steady_clock::now() < due) {
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                due - std::chrono::steady_clock::now(), std::chrono::milliseconds(20)));
          }
          return Status::ok();
        },
        kSnapshotPieceBytes, nullptr);
  });
  if (!written.is_ok()) {
    status = written.status();
    return;
  }
  size_bytes = *written;
}

Status Replica::finish_snapshot(SnapshotJob& job) {
  snapshot_running_ = false;
  job.view.reset();
  MAYFLY_RETURN_IF_ERROR(job.status);
  const replication::SnapshotMetadata recorded = log_->snapshot_metadata();
  const bool newer = job.index > recorded.index || (job.index == recorded.index && !log_->snapshot_data_ready());
  if (!newer || job.index < log_->first_index().prev()) {
    log_->discard_snapshot_file(job.index);  // overtaken (a leader's snapshot installed meanwhile): not needed
    return Status::ok();
  }
  MAYFLY_ASSIGN_OR_RETURN(replication::SnapshotMetadata metadata,
                          log_->describe_snapshot(job.index, job.membership, job.size_bytes));
  MAYFLY_RETURN_IF_ERROR(log_->record_snapshot(metadata));
  ++snapshots_produced_;
  return Status::ok();
}

Status Replica::maybe_take_snapshot() {
  if (options_.background_snapshots) return Status::ok();
  std::unique_ptr<SnapshotJob> job = begin_snapshot();
  if (!job) return Status::ok();
  job->run(*log_);
  return finish_snapshot(*job);
}

}  // namespace mayfly::storage
