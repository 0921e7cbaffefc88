// Restoring a backup (storage/backup_file.h) into a new cluster: what each TTL mode does to the backed-up state before
// the new cluster serves it. The transformation runs once, on the node that restores, on a real state machine holding
// the backup; the result becomes the new cluster's first Raft snapshot, so every replica gets the same bytes.
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

// Applies `mode` to the state in `machine` (a backup just installed; nothing applied since) at `now_micros`. With
// `dry_run` it only counts: the store is left exactly as it was. Bytes are items' keys and values.
Result<RestoreFigures> transform_for_restore(StateMachine& machine, RestoreTtlMode mode, int64_t now_micros,
                                             bool dry_run);

// Restores the backup file at `path` (read_backup_file: refused unless intact) into `data_dir`, which must be absent
// or empty, as the first state of a new cluster whose initial configuration is `membership`: the backup is installed,
// transformed (`mode` at `now_micros`) and recorded as the Raft log's snapshot at the backup's index, so a node opened
// on the directory (storage::Replica) starts from it and ships it to every member that joins.
Result<RestoreFigures> restore_into_data_dir(const std::string& path, const std::string& data_dir,
                                             const replication::Membership& membership, RestoreTtlMode mode,
                                             int64_t now_micros);
// What each mode would do to the backup at `now_micros`, changing nothing (the backup is installed in a scratch
// directory under `scratch_parent`, removed afterwards).
Result<std::vector<RestoreFigures>> dry_run_restore(const std::string& path, const std::string& scratch_parent,
                                                    int64_t now_micros);

}  // namespace mayfly::storage
