// Progress: what a leader knows about one follower's log, and the flow control that follows from it.
// Internal to the Raft core (exposed in RaftStatus for observability).
//
//   kProbe      the follower's log position is unknown: send one append at a time and wait for the answer
//   kReplicate  the follower matches up to `match`: stream appends optimistically, at most
//               max_inflight_messages (and max_inflight_bytes) unacknowledged
//   kSnapshot   the follower needs entries the leader has compacted: send the snapshot in chunks, no appends
//
// Thread-safety: a value, owned by one RaftCore.
#pragma once

#include <cstdint>
#include <deque>
#include <string_view>

#include "common/assert.h"
#include "common/ids.h"
#include "replication/types.h"

namespace mayfly::replication {

enum class ProgressState : uint8_t { kProbe, kReplicate, kSnapshot };
std::string_view progress_state_name(ProgressState state);

// The appends in flight to one follower, by the last index and the bytes each carried. Full at `capacity` appends or
// `max_bytes` bytes (at least one append is always let through), so a follower far behind — catching up after a
// snapshot or a long pause — never makes the leader read and queue more than about `max_bytes` of log for it.
class Inflights {
 public:
  Inflights(int64_t capacity, uint64_t max_bytes) : capacity_(capacity), max_bytes_(max_bytes) {}

  bool full() const { return count() >= capacity_ || (!appends_.empty() && bytes_ >= max_bytes_); }
  int64_t count() const { return static_cast<int64_t>(appends_.size()); }
  uint64_t bytes() const { return bytes_; }
  // The window was open when its newest append went out: what was in flight before it stayed under max_bytes (the
  // newest may pass the bound by its own size, whatever the entries' sizes).
  bool within_bound() const { return appends_.empty() || bytes_ - appends_.back().bytes < max_bytes_; }
  void add(LogIndex last_index, uint64_t bytes) {
    MAYFLY_ASSERT(!full());
    MAYFLY_ASSERT(appends_.empty() || appends_.back().last_index < last_index);
    appends_.push_back(Append{last_index, bytes});
    bytes_ += bytes;
  }
  // The follower acknowledged up to `index`: every append that ended at or before it is done.
  void free_up_to(LogIndex index) {
    while (!appends_.empty() && appends_.front().last_index <= index) pop_front();
  }
  // A heartbeat answer proves the follower is alive: let one more append through even when full.
  void free_first_one() {
    if (!appends_.empty()) pop_front();
  }
  void reset() {
    appends_.clear();
    bytes_ = 0;
  }

 private:
  struct Append {
    LogIndex last_index;
    uint64_t bytes;
  };
  void pop_front() {
    bytes_ -= appends_.front().bytes;
    appends_.pop_front();
  }

  int64_t capacity_;
  uint64_t max_bytes_;
  std::deque<Append> appends_;
  uint64_t bytes_ = 0;
};

struct Progress {
  Progress(int64_t max_inflight_messages, uint64_t max_inflight_bytes)
      : inflights(max_inflight_messages, max_inflight_bytes) {}

  LogIndex match;  // highest index known to be replicated on the follower
  LogIndex next;   // next index to send
  ProgressState state = ProgressState::kProbe;
  bool probe_sent = false;     // kProbe: an append is outstanding; wait for its answer or a heartbeat answer
  bool recent_active = false;  // heard from within the current election timeout (check-quorum)
  bool is_learner = false;
  Inflights inflights;

  // kSnapshot: the snapshot being sent, how far it was sent and acknowledged.
  SnapshotMetadata snapshot;
  uint64_t snapshot_sent_offset = 0;
  uint64_t snapshot_acked_offset = 0;
  bool snapshot_done_sent = false;
  int64_t snapshot_done_sent_tick = 0;  // the leader's tick count when the last chunk was (last) sent
  // The leader's tick count when the transfer began or the follower last acknowledged more of it.
  int64_t snapshot_heard_tick = 0;
  int64_t snapshot_chunks_in_flight = 0;
  int64_t snapshot_stalled_heartbeats = 0;
  bool snapshot_read_failed = false;  // the leader could not read its snapshot file: retry at the next heartbeat

  uint64_t read_round_acked = 0;  // highest ReadIndex round this follower acknowledged

  void become_probe();
  void become_replicate();
  void become_snapshot(const SnapshotMetadata& metadata);
  // Gives up a snapshot transfer the follower has not received (its data is gone): probe again after `match`.
  void abandon_snapshot();
  // Rewinds a snapshot transfer to `offset` (the follower asked for it, or acks stopped coming).
  void rewind_snapshot(uint64_t offset);
  // The follower accepted up to `index`. Returns false for a stale answer (nothing new).
  bool maybe_update(LogIndex index);
  // The follower rejected the append after `rejected`; `match_hint` is the highest index that may match.
  // Returns false for a stale rejection.
  bool maybe_decrease_to(LogIndex rejected, LogIndex match_hint);
  bool is_paused() const;
};

}  // namespace mayfly::replication
