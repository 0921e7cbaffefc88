#include "replication/progress.h"

#include <algorithm>

namespace mayfly::replication {

std::string_view progress_state_name(ProgressState state) {
  switch (state) {
    case ProgressState::kProbe:
      return "probe";
    case ProgressState::kReplicate:
      return "replicate";
    case ProgressState::kSnapshot:
      return "snapshot";
  }
  return "unknown";
}

void Progress::become_probe() {
  // After a snapshot the follower has at least the snapshot; resume right after it.
  if (state == ProgressState::kSnapshot) {
    next = std::max(match.next(), snapshot.index.next());
  } else {
    next = match.next();
  }
  state = ProgressState::kProbe;
  probe_sent = false;
  inflights.reset();
  snapshot = {};
  snapshot_sent_offset = snapshot_acked_offset = 0;
  snapshot_done_sent = false;
  snapshot_chunks_in_flight = snapshot_stalled_heartbeats = 0;
  snapshot_read_failed = false;
}

void Progress::abandon_snapshot() {
  snapshot = {};  // the follower has nothing of it: become_probe resumes after match
  become_probe();
}

void Progress::become_replicate() {
  state = ProgressState::kReplicate;
  next = match.next();
  probe_sent = false;
  inflights.reset();
}

void Progress::become_snapshot(const SnapshotMetadata& metadata) {
  state = ProgressState::kSnapshot;
  probe_sent = false;
  inflights.reset();
  snapshot = metadata;
  snapshot_sent_offset = snapshot_acked_offset = 0;
  snapshot_done_sent = false;
  snapshot_chunks_in_flight = snapshot_stalled_heartbeats = 0;
  snapshot_read_failed = false;
}

void Progress::rewind_snapshot(uint64_t offset) {
  MAYFLY_ASSERT(state == ProgressState::kSnapshot);
  offset = std::min(offset, snapshot.size_bytes);
  snapshot_sent_offset = snapshot_acked_offset = offset;
  snapshot_done_sent = false;
  snapshot_chunks_in_flight = 0;
  snapshot_stalled_heartbeats = 0;
  snapshot_read_failed = false;
}

bool Progress::maybe_update(LogIndex index) {
  bool updated = false;
  if (match < index) {
    match = index;
    probe_sent = false;
    updated = true;
  }
  next = std::max(next, index.next());
  return updated;
}

bool Progress::maybe_decrease_to(LogIndex rejected, LogIndex match_hint) {
  if (state == ProgressState::kReplicate) {
    // Everything up to match is known good; a rejection at or below it is stale.
    if (rejected <= match) return false;
    next = match.next();
    return true;
  }
  // In probe only the answer to the latest probe counts.
  if (next.prev() != rejected) return false;
  if (match_hint < match) {
    // The follower no longer has entries it acknowledged: its disk was lost or wiped and it restarted under the same
    // id. Believe it (its old acknowledgement no longer counts toward commits) and repair it from where it is, rather
    // than probing the same index forever.
    match = match_hint;
  }
  next = std::max(std::min(rejected, match_hint.next()), match.next());
  probe_sent = false;
  return true;
}

bool Progress::is_paused() const {
  switch (state) {
    case ProgressState::kProbe:
      return probe_sent;
    case ProgressState::kReplicate:
      return inflights.full();
    case ProgressState::kSnapshot:
      return true;
  }
  return true;
}

}  // namespace mayfly::replication
