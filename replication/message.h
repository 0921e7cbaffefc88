// Message: the one struct every Raft RPC travels in between cores. The core produces them in Ready and consumes them
// in RaftCore::step; the transport only moves them (encode with codec.h). Fields a type does not use stay default.
//
// Thread-safety: a value; safe to copy and move between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "replication/types.h"

namespace mayfly::replication {

enum class MessageType : uint8_t {
  // Leader → follower: entries after (index, log_term), and the leader's commit.
  kAppend = 0,
  // Follower → leader: accepted up to `index`, or (reject) the probe at `index` failed; then reject_hint and
  // log_term name the follower's last entry that may match (fast backtracking).
  kAppendResponse = 1,
  // Leader → follower: "I am still leader"; carries commit (capped at what the follower has) and read_round.
  kHeartbeat = 2,
  kHeartbeatResponse = 3,  // echoes read_round so the leader can confirm ReadIndex rounds
  kPreVote = 4,            // "would you vote for me in `term`?" — changes no state on either side
  kPreVoteResponse = 5,
  kVote = 6,  // candidate in `term` with last entry (index, log_term)
  kVoteResponse = 7,
  // Leader → follower: one chunk of the snapshot described by `snapshot`, starting at snapshot_offset.
  kSnapshot = 8,
  // Follower → leader: received snapshot_offset bytes of the snapshot at `index` (reject: out of order, resend from
  // snapshot_offset).
  kSnapshotResponse = 9,
  kReadIndex = 10,          // follower → leader: please confirm a read for `context`
  kReadIndexResponse = 11,  // leader → follower: reads for `context` may be served at `index`
  kTimeoutNow = 12,         // leader → transfer target: start an election now, skipping pre-vote
};
constexpr uint8_t kMaxMessageType = 12;
std::string_view message_type_name(MessageType type);

// True for the messages that request or answer a (pre-)vote.
bool is_vote_request(MessageType type);
bool is_vote_response(MessageType type);
bool is_response(MessageType type);

struct Message {
  MessageType type = MessageType::kAppend;
  NodeId from;
  NodeId to;
  Term term;  // sender's term (for kPreVote: the term it would campaign in)

  Term log_term;  // kAppend: term at `index`; votes: candidate's last term; kAppendResponse reject: term at hint
  LogIndex index;  // kAppend: entry before `entries`; votes: candidate's last index; responses: see the type
  std::vector<Entry> entries;
  LogIndex commit;
  bool reject = false;
  LogIndex reject_hint;

  // kVote/kPreVote sent because of a leadership transfer: voters must not ignore it for having a leader.
  bool leadership_transfer = false;

  // kSnapshot / kSnapshotResponse
  SnapshotMetadata snapshot;
  uint64_t snapshot_offset = 0;
  std::string snapshot_chunk;
  bool snapshot_done = false;

  // ReadIndex: rounds are the leader's heartbeat sequence numbers; context is the caller's request id.
  uint64_t read_round = 0;
  std::string context;

  // Responses (append, heartbeat, (pre-)vote, snapshot): the sender's wall clock at its last tick, in µs since the
  // epoch; 0 when unknown. Leaders bound replicated time by what a quorum reports (RaftConfig::max_clock_offset).
  int64_t clock_micros = 0;

  // A (pre-)vote refused: the leader the sender knows in its term (0: none). A node whose membership is stale — it
  // lacks the entries that add the current leader back — learns from a member whom it may hear (node/peer_admission.h).
  NodeId leader;

  bool operator==(const Message&) const = default;
  std::string describe() const;  // one line for logs and test failures, without payloads
};

}  // namespace mayfly::replication
