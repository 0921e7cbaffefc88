// Restoring a backup (storage/backup_file.h) into a new cluster: what each TTL mode does to the backed-up state before
// the new cluster serves it. The transformation runs once, on the node that restores, on a real state machine holding
// the backup; the result is the new cluster's first state, recorded in its Raft log as a checkpoint at the backup's
// index, and every member that joins receives it as a snapshot produced from that state, so every replica gets the
// same bytes.
//
// Memory is bounded whatever the backup's size: the backup is checked, then installed from the file a piece at a time
// (open_backup_body, StateMachine::install_snapshot), the transformation writes LevelDB batches of about
// RestoreOptions::batch_bytes, and what is derived from the result is recomputed by scanning the store
// (StateMachine::recompute_local_state). Nothing holds the state, or one item per stored item, in memory.
//
// In every mode, items already expired at the backup's replicated time (its `applied time`, B) are deleted for good
// (with their index entries), so no mode can bring one back. Then, with `now` the restoring node's clock:
//   - preserve: nothing else changes. The new cluster's replicated time continues from B to now at its first entry,
//     so what expired while the backup sat on disk (expiry instant in (B, now]) is gone at once.
//   - pause:    every container with TTL on gets TTL off (as Cosmos, DynamoDB and TiDB do after a restore), through
//     the same policy change a user makes (ttl::change_policy at B: the watermarks keep anything expired at B dead).
//     Items keep `_ts` and `ttl`. The previous defaultTtl of each container is reported, to be set again by hand.
//   - rebase:   every live item keeps the lifetime it had left at B: `_ts` (and the replicated time) move forward by
//     S = ceil((now − B) / 1 s) whole seconds, so each expiry instant E becomes E + S >= E + (now − B). Container
//     watermarks move by S too. Item order by `_ts` is unchanged.
// The member address book of the old cluster (storage/layout.h, 08) is dropped: the new cluster has its own members.
// So is all change feed data (0E, 0F): its positions are the old log's; a feed that was on restarts at the restored
// position (docs/changefeed.md).
//
// Thread-safety: the state machine's driver-thread rules (one thread; no other user of the machine meanwhile).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replication/types.h"
#include "storage/state_machine.h"

namespace mayfly::storage {

enum class RestoreTtlMode { kPreserve, kPause, kRebase };
Result<RestoreTtlMode> parse_restore_ttl_mode(std::string_view text);  // "preserve" | "pause" | "rebase"
std::string restore_ttl_mode_name(RestoreTtlMode mode);

struct PausedContainer {
  std::string database;
  std::string container;
  std::string previous_default_ttl;  // as JSON: "3600", "-1"
};

struct RestoreFigures {
  RestoreTtlMode mode = RestoreTtlMode::kPreserve;
  uint64_t backup_index = 0;
  int64_t backup_ts_micros = 0;   // B
  int64_t now_micros = 0;
  int64_t shift_seconds = 0;      // rebase: S
  uint64_t dropped_items = 0;     // expired at B: never restored (all modes)
  uint64_t dropped_bytes = 0;
  uint64_t expire_at_once_items = 0;  // alive at B, expired at `now` in this mode (preserve: expired while on disk)
  uint64_t expire_at_once_bytes = 0;
  uint64_t live_items = 0;            // alive at `now` after the restore
  uint64_t live_bytes = 0;
  std::vector<PausedContainer> paused;  // pause: containers whose TTL was turned off
  std::string to_json() const;
};

// How far a restore has come (RestoreOptions::progress).
struct RestoreProgress {
  enum class Step {
    kInstall,    // the backup's body installed: `done` of `total` bytes
    kTransform,  // the TTL mode's first pass (deletes): `done` items of `total` (the backup's, 0 when unknown)
    kRebase,     // rebase's second pass (the shifted items written): `done` of `total` items
    kRecord,     // the state is durable and recorded in the new Raft log; next, the directory is moved into place
  };
  Step step = Step::kInstall;
  uint64_t done = 0;
  uint64_t total = 0;
};
std::string restore_step_name(RestoreProgress::Step step);

struct RestoreOptions {
  // The install and the transformation write LevelDB batches of about this many bytes (StoreOptions::
  // install_batch_bytes): memory stays at a batch and a piece of the backup.
  size_t batch_bytes = 4 << 20;
  // The backup's body is read this many bytes at a time (open_backup_body).
  size_t piece_bytes = 1 << 20;
  // Called after each piece of the backup installed, after each batch of the transformation (and at the end of each
  // of its passes), and once at kRecord. An error stops the restore there and is returned, after the cleanup any
  // failure gets (tests inject failures with it).
  std::function<Status(const RestoreProgress&)> progress;
  // Tests: stage inside data_dir, as when it is a mount point (restore_into_data_dir).
  bool stage_inside_data_dir = false;
};

// Applies `mode` to the state in `machine` (a backup just installed; nothing applied since) at `now_micros`, in
// bounded batches and two passes: first every delete (items expired at B with their index entries; with a shift, the
// old time and expiry index entries of every item; the address book and the change feed's keys), written before the
// second pass starts, which reads the store again and writes the container records, the shifted items with their new
// index entries, and the applied state. Then what is derived is recomputed (StateMachine::recompute_local_state).
// Each batch is a synced write. With `dry_run` it only counts (the first pass, writing nothing): the store is left
// exactly as it was and the figures are the same. Bytes are items' keys and values.
Result<RestoreFigures> transform_for_restore(StateMachine& machine, RestoreTtlMode mode, int64_t now_micros,
                                             bool dry_run, const RestoreOptions& options = {});

// Restores the backup file at `path` into `data_dir`, which must be absent or empty, as the first state of a new
// cluster whose initial configuration is `membership`. The file is checked end to end first (refused unless intact:
// open_backup_body) and nothing is created for a refused one. Then, in a staging directory, the backup is installed,
// transformed (`mode` at `now_micros`), made durable (StateMachine::checkpoint) and recorded in a new Raft log as a
// checkpoint at the backup's index (term 1, `membership`, hard state {1, none, index}; no snapshot file: the leader
// produces one from its state when a member needs it), so a node opened on the directory (storage::Replica) starts
// from it. Crash safety: the staging directory is `<data_dir>.restoring-XXXXXX`, beside data_dir on the same file
// system, renamed to data_dir at the end (an empty data_dir is replaced by the rename) and the parent directory
// fsync'd, so data_dir is either as before or the whole result. When data_dir is a mount point (a container's
// volume) or its parent cannot be written, the staging directory is `<data_dir>/.restoring-XXXXXX` instead and its
// parts are moved up at the end, the log (`wal/`) before the state (`db/`): a crash between the two leaves a log
// whose checkpoint is ahead of an empty state, which a node refuses to start on (Corruption). On error the staging
// directory is removed. Staging directories an interrupted restore left (beside data_dir, or inside an otherwise
// empty data_dir) are removed by the next restore into data_dir.
Result<RestoreFigures> restore_into_data_dir(const std::string& path, const std::string& data_dir,
                                             const replication::Membership& membership, RestoreTtlMode mode,
                                             int64_t now_micros, const RestoreOptions& options = {});
// What each mode would do to the backup at `now_micros`, changing nothing (the backup is installed in a scratch
// directory under `scratch_parent`, removed afterwards).
Result<std::vector<RestoreFigures>> dry_run_restore(const std::string& path, const std::string& scratch_parent,
                                                    int64_t now_micros, const RestoreOptions& options = {});

}  // namespace mayfly::storage
