// RaftConfig: every knob and limit of the Raft core in one validated struct. Units are last in the names: `_ticks`
// count RaftCore::tick calls, `_bytes` count bytes (entries are charged Entry::size_bytes()).
//
// Thread-safety: a value.
#pragma once

#include <cstdint>

#include "common/ids.h"
#include "common/status.h"

namespace mayfly::replication {

inline constexpr int64_t kNoClockOffsetLimit = INT64_MAX;

struct RaftConfig {
  NodeId self;  // this node's id; never 0

  // A follower that hears nothing from a leader for a random number of ticks in
  // [election_timeout_ticks, 2 * election_timeout_ticks) starts an election. A leader with check_quorum steps down
  // if it has not heard from a quorum within election_timeout_ticks; a leadership transfer is abandoned after it.
  int64_t election_timeout_ticks = 10;
  int64_t heartbeat_interval_ticks = 1;  // leader → followers heartbeats; must be < election_timeout_ticks

  // Pre-vote (thesis §9.6): a node first asks whether it could win, so a node that was partitioned away does not
  // bump terms and depose a healthy leader on return.
  bool pre_vote = true;
  // Check-quorum (thesis §6.2): a leader that cannot hear a quorum steps down, and a node that heard from a leader
  // within the election timeout ignores (pre-)vote requests.
  bool check_quorum = true;

  // At most this many append (or snapshot chunk) messages in flight to one follower before waiting for acks.
  int64_t max_inflight_messages = 256;
  // Appends unacknowledged by one follower add up to at most this many bytes of entries (at least one append is
  // always in flight). Like max_snapshot_bytes_in_flight it stays below what the transport queues for a peer
  // (node/rpc_common.h kMaxQueuedBytesPerPeer, 64 MB, which drops the oldest past it): a follower catching up from far
  // behind makes the leader read and hold about this much of its log at a time, not max_inflight_messages messages of
  // max_message_bytes (1 GB with mayflyd's 4 MB messages).
  uint64_t max_inflight_bytes = 16 << 20;
  // Entries in one append message add up to at most this (at least one entry is always sent).
  uint64_t max_message_bytes = 1 << 20;
  // One proposed entry may be at most this big.
  uint64_t max_entry_bytes = 1 << 20;
  // A leader refuses proposals while this much of its own term's log is uncommitted (one entry always fits).
  uint64_t max_uncommitted_bytes = 64 << 20;
  // Committed entries handed to the driver in one Ready add up to at most this (at least one entry).
  uint64_t max_committed_bytes_per_ready = 16 << 20;
  // Snapshot data is sent in chunks of this size.
  uint64_t snapshot_chunk_bytes = 1 << 20;
  // Snapshot chunks unacknowledged by one follower add up to at most this (at least one chunk is always in flight):
  // the leader reads and queues no more of a snapshot than this per follower, whatever its size. It must stay below
  // what the transport queues for a peer (node/rpc_common.h kMaxQueuedBytesPerPeer, 64 MB), which drops the oldest
  // messages past it — the snapshot's first chunks, which the follower needs first.
  uint64_t max_snapshot_bytes_in_flight = 8 << 20;
  // After the last chunk of a snapshot is sent, the follower installs it and is silent meanwhile (a large install
  // takes minutes). For this long the leader keeps the log after the snapshot (RaftCore::snapshot_install_pin), so the
  // follower continues from the log when it answers instead of needing another snapshot. 60,000 ticks: 10 minutes.
  int64_t snapshot_install_wait_ticks = 60'000;
  // A follower refuses to reassemble a snapshot larger than this.
  uint64_t max_snapshot_bytes = uint64_t{16} << 30;
  // ReadIndex requests waiting on the leader for confirmation.
  int64_t max_pending_read_requests = 4096;

  // Replicated time. The wall-clock time one tick stands for (the driver's tick interval): a leader measures the
  // time since a follower's clock report in its own ticks, never by its wall clock (the thing that may jump).
  int64_t tick_interval_micros = 10'000;
  // A leader stamps entries at most this far ahead of the clock a quorum of voters (itself included) has at least
  // (like CockroachDB's max-offset), so a leader whose clock jumps forward cannot expire data early.
  // kNoClockOffsetLimit: no ceiling at all (a virtual-clock cluster, whose time is no one's wall clock).
  int64_t max_clock_offset_micros = 500'000;

  Status validate() const;
};

}  // namespace mayfly::replication
